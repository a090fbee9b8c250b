"""Drive many programs: in-process (``fuzz``), or over worker processes (``fuzz_parallel``, what
``python -m bench.fuzz`` uses; a worker that hangs or crashes loses one program, reported).

A worker is ``python -m tests.fuzz.runner --seed S --start A --stop B --results FILE ...``; it
appends one JSON line per program to FILE.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import time
from typing import Iterable, Optional

from .generator import ALL_FEATURES, FEATURES, SAFE_FEATURES, features_for, generate
from .minimize import minimize, write_repro
from .oracle import is_of_f, run_program


def parse_features(text: Optional[str]) -> frozenset:
    """'all' | 'safe' | 'safe,+dict_views,-print' | 'tensor_ops,if_python'."""
    if not text or text == "all":
        return ALL_FEATURES
    feats: set = set()
    for part in text.split(","):
        part = part.strip()
        if part == "all":
            feats |= ALL_FEATURES
        elif part == "safe":
            feats |= SAFE_FEATURES
        elif part.startswith("-"):
            feats.discard(part[1:])
        else:
            name = part.lstrip("+")
            if name not in FEATURES:
                raise ValueError(f"unknown feature {name!r}; known: {', '.join(FEATURES)}")
            feats.add(name)
    return frozenset(feats)


def normalize_reason(reason: str) -> str:
    reason = reason.split("): ", 1)[-1]
    reason = re.sub(r"'[^']*'", "'…'", reason)
    return re.sub(r"\d+", "N", reason)[:160]


def normalize_break(reason: str) -> str:
    """'f__resume_at_9 (<fuzz>:12): CALL at <fuzz>:14: call to print' -> 'CALL: call to print'."""
    reason = reason.split("): ", 1)[-1]
    inst, _, rest = reason.partition(" at ")
    return normalize_reason(f"{inst}: {rest.split(': ', 1)[-1]}")


def signature(mismatch: str) -> str:
    """A mismatch family key: category + the detail with names, numbers and values blurred."""
    cat, _, detail = mismatch.partition(": ")
    detail = re.sub(r"(eager|optimized) .*", r"\1 …", detail, count=1)
    detail = re.sub(r"\[[^\]]*\]", "[…]", detail)
    detail = re.sub(r"\b[a-z]+\d+\b", "v", detail)
    detail = re.sub(r"\d+", "N", detail)
    return f"{cat}: {detail}"[:160]


def fuzz_one(seed: int, index: int, features: frozenset, backend="eager", out_dir: Optional[str] = None,
             do_minimize: bool = True, device: str = "cpu") -> dict:
    if backend == "counting":
        from .oracle import CountingBackend
        backend = CountingBackend()
    t0 = time.perf_counter()
    prog = generate(seed, index, features_for(features, device))
    out = run_program(prog.source(), prog.steps, backend, device=device)
    rec = {"seed": seed, "index": index, "mismatch": out.mismatch, "category": out.category,
           "step": out.step, "calls": out.calls, "eager_errors": out.eager_errors,
           "f_fallbacks": out.f_fallbacks, "setup_error": out.setup_error, "reference_error": out.reference_error,
           "host_agreed": out.host_agreed,
           "fallback_reasons": sorted({normalize_reason(r) for r in out.fallbacks if is_of_f(r)}),
           "f_breaks": out.f_breaks, "grad_checks": out.grad_checks,
           "break_reasons": sorted({normalize_break(r) for r in out.breaks if is_of_f(r)}),
           "features": sorted(prog.features), "time": 0.0, "repro": None}
    if out.mismatch:
        rec["signature"] = signature(out.mismatch)
        if do_minimize:
            small = minimize(prog, out.category, backend, device=device)
            small_out = run_program(small.source(), small.steps, backend, device=device)
            mismatch = small_out.mismatch or out.mismatch
            rec["minimized_mismatch"] = mismatch
            if out_dir:
                rec["repro"] = write_repro(small, mismatch, out_dir, backend, device=device)
            rec["minimized_source"] = small.source().split("def f(", 1)[1]
    rec["time"] = round(time.perf_counter() - t0, 3)
    return rec


def fuzz(seed: int, indices: Iterable[int], features: frozenset = ALL_FEATURES, backend="eager",
         out_dir: Optional[str] = None, do_minimize: bool = True, device: str = "cpu") -> list[dict]:
    return [fuzz_one(seed, i, features, backend, out_dir, do_minimize, device) for i in indices]


# ----------------------------------------------------------------------------- processes


# A worker's exit status asking for a fresh process (not a crash): after lazy torch_xla failed
# on its own graph (device mode), its runtime state can break every later program.
FRESH_PROCESS = 75


def fuzz_parallel(seed: int, n: int, jobs: int, features_text: str, out_dir: str, backend="eager",
                  timeout: float = 60.0, do_minimize: bool = True, progress=None, start: int = 0,
                  device: str = "cpu") -> list[dict]:
    """Split ``range(n)`` over ``jobs`` workers; restart a worker past a program that hangs
    (no result for ``timeout`` s) or kills it."""
    os.makedirs(out_dir, exist_ok=True)
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    chunks = [(start + n * k // jobs, start + n * (k + 1) // jobs) for k in range(jobs)]
    workers = {}
    records: dict[int, dict] = {}
    feats = features_for(parse_features(features_text), device)

    def launch(k, begin, stop):
        path = os.path.join(out_dir, f"worker{k}.jsonl")
        cmd = [sys.executable, "-m", "tests.fuzz.runner", "--seed", str(seed), "--start", str(begin),
               "--stop", str(stop), "--results", path, "--features", features_text, "--out", out_dir,
               "--backend", backend, "--device", device] + ([] if do_minimize else ["--no-minimize"])
        env = dict(os.environ, PJRT_DEVICE=os.environ.get("PJRT_DEVICE", "CPU"), PYTHONPATH=repo)
        log = open(os.path.join(out_dir, f"worker{k}.log"), "a")
        proc = subprocess.Popen(cmd, cwd=repo, env=env, stdout=log, stderr=subprocess.STDOUT)
        workers[k] = {"proc": proc, "path": path, "next": begin, "stop": stop, "last": time.time(), "pos": 0}

    for k, (a, b) in enumerate(chunks):
        if os.path.exists(os.path.join(out_dir, f"worker{k}.jsonl")):
            os.remove(os.path.join(out_dir, f"worker{k}.jsonl"))
        if a < b:
            launch(k, a, b)
    while workers:
        time.sleep(0.5)
        for k, w in list(workers.items()):
            with open(w["path"]) if os.path.exists(w["path"]) else open(os.devnull) as fh:
                fh.seek(w["pos"])
                data = fh.read()
            lines = data.split("\n")
            complete, rest = lines[:-1], lines[-1]
            w["pos"] += len(data) - len(rest)
            for line in complete:
                rec = json.loads(line)
                records[rec["index"]] = rec
                w["next"] = rec["index"] + 1
                w["last"] = time.time()
                if progress:
                    progress(rec, len(records), n)
            rc = w["proc"].poll()
            if rc is not None and w["next"] >= w["stop"]:
                del workers[k]
                continue
            if rc == FRESH_PROCESS:           # asked for a fresh process: go on from the next one
                del workers[k]
                launch(k, w["next"], w["stop"])
                continue
            hung = time.time() - w["last"] > timeout
            if rc is not None or hung:
                if hung:
                    w["proc"].kill()
                    w["proc"].wait()
                bad = w["next"]
                records[bad] = {"seed": seed, "index": bad, "mismatch": None, "category": None,
                                "crash": f"worker {'timed out' if hung else f'exited {rc}'} on this program",
                                "features": sorted(generate(seed, bad, feats).features),
                                "calls": 0, "f_fallbacks": 0, "fallback_reasons": [], "time": timeout if hung else 0}
                try:   # the program as it is, unminimized (a hang would stall the minimizer)
                    prog = generate(seed, bad, feats)
                    records[bad]["repro"] = write_repro(prog, records[bad]["crash"] + " (" + backend + ")", out_dir,
                                                        backend, name=f"hang_s{seed}_i{bad}.py", device=device)
                except Exception:   # noqa: BLE001
                    pass
                if progress:
                    progress(records[bad], len(records), n)
                del workers[k]
                if bad + 1 < w["stop"]:
                    launch(k, bad + 1, w["stop"])
    return [records[i] for i in sorted(records)]


def summarize(records: list[dict], elapsed: float, jobs: int) -> dict:
    n = len(records)
    mism = [r for r in records if r.get("mismatch")]
    fams: dict = collections.OrderedDict()
    for r in mism:
        fams.setdefault(r["signature"], []).append(r)
    reasons = collections.Counter(reason for r in records for reason in r.get("fallback_reasons", []))
    breaks = collections.Counter(reason for r in records for reason in r.get("break_reasons", []))
    calls = sum(r.get("calls", 0) for r in records)
    return {
        "programs": n, "calls": calls, "grad_checks": sum(r.get("grad_checks", 0) for r in records),
        "elapsed_s": round(elapsed, 1),
        "programs_per_s": round(n / elapsed, 2) if elapsed else None,
        "programs_per_s_per_job": round(n / elapsed / jobs, 2) if elapsed else None,
        "mismatches": len(mism), "families": {k: [r["index"] for r in v] for k, v in fams.items()},
        "crashes": [r["index"] for r in records if r.get("crash")],
        "setup_errors": sum(1 for r in records if r.get("setup_error")),
        "reference_errors": [r["index"] for r in records if r.get("reference_error")],
        "calls_only_host_agreed": sum(r.get("host_agreed", 0) for r in records),
        "programs_fully_captured": sum(1 for r in records if not r.get("f_fallbacks") and not r.get("crash")),
        "programs_captured_in_one_graph": sum(1 for r in records if not r.get("f_fallbacks") and not r.get("f_breaks")
                                              and not r.get("crash")),
        "programs_with_breaks": sum(1 for r in records if r.get("f_breaks")),
        "programs_with_f_fallbacks": sum(1 for r in records if r.get("f_fallbacks")),
        "graph_breaks": sum(r.get("f_breaks", 0) for r in records),
        "programs_with_eager_errors": sum(1 for r in records if r.get("eager_errors")),
        "top_fallback_reasons": reasons.most_common(15),
        "top_break_reasons": breaks.most_common(15),
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description="fuzz worker")
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--start", type=int, required=True)
    ap.add_argument("--stop", type=int, required=True)
    ap.add_argument("--results", required=True)
    ap.add_argument("--features", default="all")
    ap.add_argument("--out", default=None)
    ap.add_argument("--backend", default="eager")
    ap.add_argument("--no-minimize", action="store_true")
    ap.add_argument("--device", default="cpu", choices=("cpu", "xla"))
    a = ap.parse_args(argv)
    feats = parse_features(a.features)
    with open(a.results, "a") as fh:
        for i in range(a.start, a.stop):
            rec = fuzz_one(a.seed, i, feats, a.backend, a.out, not a.no_minimize, a.device)
            fh.write(json.dumps(rec) + "\n")
            fh.flush()
            if rec.get("reference_error") and i + 1 < a.stop:
                sys.exit(FRESH_PROCESS)   # lazy torch_xla's state may stay broken for what follows


if __name__ == "__main__":
    main()

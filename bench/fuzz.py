"""The differential fuzzer, at scale: ``python -m bench.fuzz --n 10000 --seed S [--jobs 2] [--out DIR]``.

Generates ``n`` random programs (``tests/fuzz/generator.py``), runs each eagerly and through
``minidynamo.optimize(backend)`` on several input sets and state mutations, compares everything
(``tests/fuzz/oracle.py``), and for each mismatch writes a minimized repro script to
``DIR/repro_s<seed>_i<index>.py``.  Prints a summary (programs/s, capture rate, mismatch
families, top fallback reasons) and writes it to ``DIR/summary.json``.  Exit status 1 when
anything mismatched or a program crashed the process.

Program ``i`` of seed ``S`` is regenerated alone with
``python -m bench.fuzz --seed S --only i``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

_repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _repo not in sys.path:
    sys.path.insert(0, _repo)
os.environ.setdefault("PJRT_DEVICE", "CPU")

from tests.fuzz.generator import FEATURES, features_for, generate  # noqa: E402
from tests.fuzz.runner import fuzz_one, fuzz_parallel, parse_features, summarize  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1000, help="number of programs")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--start", type=int, default=0, help="first program index")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes")
    ap.add_argument("--out", default="fuzz-out", help="repros, worker logs, summary.json")
    ap.add_argument("--features", default="all",
                    help="'all' (default), 'safe' (known-bug features off), or a list: 'safe,+dict_views,-print'")
    ap.add_argument("--backend", default="eager", help="eager | counting | any registered backend name")
    ap.add_argument("--device", default="cpu", choices=("cpu", "xla"),
                    help="where the program's tensors live; 'xla': the reference is plain lazy torch_xla")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds before a silent program counts as hung")
    ap.add_argument("--no-minimize", action="store_true")
    ap.add_argument("--only", type=int, default=None, help="run (and print) just this program index")
    ap.add_argument("--list-features", action="store_true")
    a = ap.parse_args(argv)

    if a.list_features:
        for name, (weight, bug, what) in FEATURES.items():
            print(f"{name:18} {'known-bug' if bug else '         '} w={weight:<4} {what}")
        return 0
    feats = features_for(parse_features(a.features), a.device)
    if a.only is not None:
        prog = generate(a.seed, a.only, feats)
        print(prog.source())
        print("steps:", prog.steps)
        rec = fuzz_one(a.seed, a.only, feats, a.backend, a.out, not a.no_minimize, a.device)
        print(json.dumps(rec, indent=1))
        return 1 if rec["mismatch"] else 0

    t0 = time.time()
    last = [0.0]

    def progress(rec, done, total):
        if rec.get("mismatch"):
            print(f"MISMATCH seed {rec['seed']} index {rec['index']}: {rec['mismatch'][:200]}"
                  + (f"\n  repro: {rec['repro']}" if rec.get("repro") else ""), flush=True)
        if rec.get("crash"):
            print(f"CRASH seed {rec['seed']} index {rec['index']}: {rec['crash']}", flush=True)
        if time.time() - last[0] > 15 or done == total:
            last[0] = time.time()
            el = time.time() - t0
            print(f"[{done}/{total}] {el:.0f}s {done / el:.1f} programs/s", flush=True)

    records = fuzz_parallel(a.seed, a.n, a.jobs, a.features, a.out, a.backend, a.timeout,
                            not a.no_minimize, progress, start=a.start, device=a.device)
    summary = summarize(records, time.time() - t0, a.jobs)
    summary.update(seed=a.seed, start=a.start, features=a.features, backend=a.backend, device=a.device,
                   features_enabled=sorted(feats))
    with open(os.path.join(a.out, "summary.json"), "w") as fh:
        json.dump(summary, fh, indent=1)
    with open(os.path.join(a.out, "records.jsonl"), "w") as fh:
        for r in records:
            fh.write(json.dumps(r) + "\n")
    print(f"\nseed {a.seed}, programs {a.start}..{a.start + a.n - 1}, features {a.features}, backend {a.backend}, "
          f"device {a.device}")
    print(f"{summary['programs']} programs, {summary['calls']} calls ({summary['grad_checks']} with gradients "
          f"compared) in {summary['elapsed_s']} s: "
          f"{summary['programs_per_s']} programs/s ({summary['programs_per_s_per_job']} per job)")
    print(f"f captured without fallback in {summary['programs_fully_captured']} programs; "
          f"{summary['programs_with_eager_errors']} programs raise in eager on some call (compared too)")
    print(f"f in one graph (no break, no fallback) in {summary['programs_captured_in_one_graph']} programs; "
          f"with graph breaks in {summary['programs_with_breaks']} ({summary['graph_breaks']} breaks); "
          f"f or a resume function of it fell back in {summary['programs_with_f_fallbacks']}")
    print(f"mismatches: {summary['mismatches']} in {len(summary['families'])} families; crashes/hangs: {summary['crashes']}")
    if a.device != "cpu":
        print(f"calls where minidynamo differed from lazy torch_xla but agreed with eager on the host: "
              f"{summary['calls_only_host_agreed']}")
    if summary["reference_errors"]:
        print(f"not compared (lazy torch_xla's own result unreadable): {summary['reference_errors']}")
    for sig, idx in summary["families"].items():
        print(f"  {len(idx):4} x {sig}   (e.g. index {idx[0]})")
    print("top fallback reasons of f:")
    for reason, count in summary["top_fallback_reasons"]:
        print(f"  {count:5} {reason}")
    print("top graph-break reasons of f:")
    for reason, count in summary["top_break_reasons"]:
        print(f"  {count:5} {reason}")
    return 1 if summary["mismatches"] or summary["crashes"] else 0


if __name__ == "__main__":
    sys.exit(main())

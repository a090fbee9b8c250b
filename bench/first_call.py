"""``python -m bench.first_call``: each peer's first call, timed in a fresh process.

In one process the peers share XLA's compile cache: a graph one peer compiled is a cache hit for
the next (lazy mode and ``_xla_warm_up_cache`` even hash the same graph differently), so the
main bench's "1st call" totals are not comparable. Here every (model, regime, peer) runs in its
own subprocess: build the model from the same seed, place it as the peer does, run the peer once
on a tiny warm-up module (imports and runtime start-up are paid there, not in the timed call),
then time the model's first call and split it into parts:

    trace     minidynamo's bytecode tracer (``trace_frame``)           ours only
    guards    building the guard function and the input reader         ours only
    backend   the backend call: ours = xla_bridge (lazy trace on the
              device, analyses, weight copies and their execution);
              openxla_eval = its bridge's ``extract_compiled_graph``   ours, openxla_eval
    compile   XLA compilation (torch_xla's CompileTime metric)          all
    rest      the rest of the call: the program's run, outputs to the
              host, glue (lazy mode: also its Python forward on lazy
              tensors; openxla_eval: also dynamo's tracing and guards)  all

A timed part excludes the XLA compilation inside it (compilation is synchronous), so the parts add
up to the total. XLA execution (the ExecuteTime metric) is reported beside them, not as a part:
the runtime executes asynchronously and the metric counts queued executions that overlap, so it
can exceed the wall time it happened in. ``--profile DIR`` also writes a cProfile of each timed
first call there.
"""

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time

from bench.options import ALL_MODELS, REGIMES

PEERS = ("xla_lazy", "torchxla_trace_once", "openxla_eval")
PARTS = ("trace", "guards", "backend", "compile", "rest")
CHILD_TIMEOUT_S = 1800


# -- the child: one peer's first call ---------------------------------------------------------

class PartClock:
    """Seconds per part; a part's time excludes the XLA compilation inside it and includes the
    device work it launched (a barrier at its end: the runtime executes asynchronously)."""

    def __init__(self, probe):
        self.probe = probe
        self.seconds = {}

    def wrap(self, part, fn):
        def timed(*args, **kwargs):
            start, compiled = time.perf_counter(), self.probe.compile_ns()
            try:
                return fn(*args, **kwargs)
            finally:
                self.probe.wait_device()   # device work the part launched is the part's
                spent = time.perf_counter() - start - (self.probe.compile_ns() - compiled) / 1e9
                self.seconds[part] = self.seconds.get(part, 0.0) + spent
        return timed


@contextlib.contextmanager
def patched(targets, clock):
    """Wrap ``module.attr`` for each (part, module, attr) with the clock; undo on exit."""
    saved = []
    try:
        for part, module, attr in targets:
            saved.append((module, attr, getattr(module, attr)))
            setattr(module, attr, clock.wrap(part, getattr(module, attr)))
        yield
    finally:
        for module, attr, original in reversed(saved):
            setattr(module, attr, original)


def instruments(peer):
    """(part, module, attribute) to time for ``peer``: functions looked up at call time."""
    if peer == "torchxla_trace_once":
        import guards
        import minidynamo.tracer
        import xla_bridge.backends

        return [("trace", minidynamo.tracer, "trace_frame"),
                ("guards", guards, "build_guard_function"),
                ("guards", guards, "compile_reader"),
                ("backend", xla_bridge.backends, "_build")]
    if peer == "openxla_eval":
        import torch_xla.core.dynamo_bridge as bridge   # the name torch's openxla_eval calls

        return [("backend", bridge, "extract_compiled_graph")]
    return []


def _warm_up_module():
    import torch

    class WarmUp(torch.nn.Module):
        """A graph no seed model contains: starts the runtime and imports the peer's code."""

        def forward(self, x):
            return torch.tanh(x * 3.0 - 1.0).sum(dim=-1)

    return WarmUp()


def _forget_compiled():
    """Drop compiled entries of the warm-up (the XLA cache keeps its unrelated graph)."""
    if "minidynamo" in sys.modules:
        sys.modules["minidynamo"].reset()
    if "torch._dynamo" in sys.modules:
        sys.modules["torch._dynamo"].reset()


def _minidynamo_under_profiler():
    """minidynamo compiles as usual while cProfile is on (by default a profiler set makes it run
    frames as CPython does, which is not what --profile measures)."""
    if "minidynamo" not in sys.modules:
        return contextlib.nullcontext()
    from minidynamo.eval_frame import profiling_minidynamo

    return profiling_minidynamo()


def first_call(model_name, regime_name, peer_name, seed=1337, batch_size=1, profile_to=None):
    """{part: seconds, "total": seconds} of ``peer_name``'s first call on the model."""
    os.environ.setdefault("PJRT_DEVICE", "CPU")
    import torch

    from bench import xla_probe
    from bench.measure import fresh_copy
    from bench.models import REGIMES as REGIME_SPECS, build_model, make_inputs
    from bench.peers import make_peer

    regime = REGIME_SPECS[regime_name]
    with torch.no_grad():
        model = build_model(model_name, regime, seed)
        inputs = make_inputs(model_name, regime, batch_size, torch.Generator().manual_seed(seed))
        warm = make_peer(peer_name, _warm_up_module())
        warm((torch.randn(4, 8),))
        _forget_compiled()
        peer = make_peer(peer_name, model)
        call_inputs = fresh_copy(inputs)
        clock = PartClock(xla_probe)
        profiler = None
        if profile_to:
            import cProfile

            profiler = cProfile.Profile()
        with patched(instruments(peer_name), clock), _minidynamo_under_profiler():
            xla_probe.wait_device()
            compiled, executed = xla_probe.compile_ns(), xla_probe.execute_ns()
            start = time.perf_counter()
            if profiler is not None:
                profiler.enable()
            peer(call_inputs)
            if profiler is not None:
                profiler.disable()
            xla_probe.wait_device()
            total = time.perf_counter() - start
            seconds = dict(clock.seconds)
            seconds["compile"] = (xla_probe.compile_ns() - compiled) / 1e9
            execute = (xla_probe.execute_ns() - executed) / 1e9
    if profiler is not None:
        profiler.dump_stats(profile_to)
    seconds["rest"] = total - sum(seconds.values())
    return {part: seconds.get(part, 0.0) for part in PARTS} | {"total": total, "execute": execute}


# -- the parent: one subprocess per (model, regime, peer), then the tables ---------------------

def run_child(model, regime, peer, seed, profile_dir=None, timeout=CHILD_TIMEOUT_S):
    """The child's parts, or {"error": reason}."""
    command = [sys.executable, "-m", "bench.first_call", "--child", model, regime, peer,
               "--seed", str(seed)]
    if profile_dir:
        command += ["--profile", profile_dir]
    env = dict(os.environ, PJRT_DEVICE=os.environ.get("PJRT_DEVICE", "CPU"))
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env,
                              cwd=root)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout} s"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"exit {done.returncode}: {tail[:200]}"}
    return json.loads(lines[-1])


def _cell(result):
    if "error" in result:
        return "-" if result["error"] == "-" else "error"     # "-": the peer was not run
    rest = result["total"] - result["compile"]
    return f"{result['total']:.2f} ({result['compile']:.2f}+{rest:.2f})"


def _verdict(results, without_compile=False):
    """yes/NO and ours / openxla_eval, of the totals or of the totals less XLA compilation (the
    part each implementation controls: a compile time swings by 2x and more on a loaded host)."""
    ours, theirs = results.get("torchxla_trace_once", {}), results.get("openxla_eval", {})
    if "total" not in ours or "total" not in theirs:
        return "-"
    cut = (lambda r: r["total"] - r["compile"]) if without_compile else (lambda r: r["total"])
    ratio = cut(ours) / cut(theirs)
    return f"{'yes' if ratio <= 1.0 else 'NO'} ({ratio:.2f}x)"


def fastest(runs):
    """The run with the smallest total of several (noise only adds), or the first error."""
    done = [r for r in runs if "total" in r]
    return min(done, key=lambda r: r["total"]) if done else runs[0]


def tables(regime, by_model):
    """Two text tables of one regime: each peer's total (compile + rest) with the verdict, then
    the parts of ours and of openxla_eval, with the XLA execution metric beside them."""
    from bench.report import TITLES, grid

    totals = [[model] + [_cell(results.get(p, {"error": "-"})) for p in PEERS]
              + [_verdict(results), _verdict(results, without_compile=True)]
              for model, results in by_model.items()]
    parts = []
    for model, results in by_model.items():
        for peer in ("torchxla_trace_once", "openxla_eval"):
            got = results.get(peer, {})
            if "total" in got:
                parts.append([model, TITLES.get(peer, peer)]
                             + [f"{got[p]:.2f}" for p in PARTS + ("total", "execute")])
    return (f"First call, a fresh process per peer ({regime} regime): total s (XLA compile + rest)\n"
            + grid(["model"] + [TITLES.get(p, p) for p in PEERS]
                   + ["ours <= openxla_eval", "same, less XLA compile"], totals)
            + f"\nParts of the first call, s ({regime} regime)\n"
            + grid(["model", "peer"] + list(PARTS) + ["total", "(XLA execute)"], parts))


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m bench.first_call", description=__doc__.split("\n")[0])
    parser.add_argument("--child", nargs=3, metavar=("MODEL", "REGIME", "PEER"), help=argparse.SUPPRESS)
    parser.add_argument("--only", action="append", choices=ALL_MODELS, metavar="MODEL")
    parser.add_argument("--all", action="store_true", help="every model of the seed's table")
    parser.add_argument("--small", action="store_true", help="the small regime only")
    parser.add_argument("--both-regimes", action="store_true")
    parser.add_argument("--peer", action="append", choices=PEERS, help="default: all three")
    parser.add_argument("--seed", type=int, default=1337)
    parser.add_argument("--profile", metavar="DIR", help="write a cProfile of each first call here")
    parser.add_argument("--repeats", type=int, default=1,
                        help="fresh processes per peer; the fastest is kept (default 1)")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = parser.parse_args(argv)
    if args.child:
        model, regime, peer = args.child
        profile_to = None
        if args.profile:
            os.makedirs(args.profile, exist_ok=True)
            profile_to = os.path.join(args.profile, f"{model}-{regime}-{peer}.prof")
        print(json.dumps(first_call(model, regime, peer, args.seed, profile_to=profile_to)))
        return 0
    models = ALL_MODELS if args.all else tuple(args.only or ("resnet18",))
    regimes = REGIMES if args.both_regimes else (("small",) if args.small else ("standard",))
    peers = tuple(args.peer or PEERS)
    everything = {}
    for regime in regimes:
        by_model = everything.setdefault(regime, {})
        for model in models:
            by_model[model] = {}
            for peer in peers:
                by_model[model][peer] = fastest([run_child(model, regime, peer, args.seed, args.profile)
                                                 for _ in range(args.repeats)])
                print(f"{regime} {model} {peer}: {by_model[model][peer]}", file=sys.stderr, flush=True)
        print(tables(regime, by_model))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(everything, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""``python -m bench``: run every model of every regime, then print and write the reports."""

import gc
import os
import sys

from bench.options import parse_args  # the rest is imported after parsing: --help stays instant

FLOOR_REPEATS = 5  # instrumented lazy-mode calls per model when the baseline is not lazy mode


class Progress:
    """A progress bar over models and iterations (tqdm, on stderr), or nothing."""

    def __init__(self, total, enabled):
        self.bar = None
        if enabled:
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit="it", file=sys.stderr, dynamic_ncols=True)

    def describe(self, text):
        if self.bar is not None:
            self.bar.set_description(text)

    def tick(self):
        if self.bar is not None:
            self.bar.update(1)

    def close(self):
        if self.bar is not None:
            self.bar.close()


def plan(options):
    """(iterations, warm-up) per model: accuracy mode checks a few inputs and times nothing."""
    if options.mode == "accuracy":
        return min(options.iterations, 3), 0
    return options.iterations, options.warmup


def input_source(name, regime, options):
    """``inputs_at(step)``: the same inputs at every step, or fresh ones per step (seeded)."""
    import torch

    from bench.models import make_inputs

    def draw(step):
        return make_inputs(name, regime, options.batch_size, torch.Generator().manual_seed(options.seed + step))

    if options.randomize_input:
        return draw
    fixed = draw(0)
    return lambda step: fixed


def _reset_minidynamo():
    """Drop compiled entries between models: models sharing a forward (the ResNets) would
    otherwise pile entries onto one code object and hit the recompile limit. Zero the counters."""
    minidynamo = sys.modules.get("minidynamo")
    if minidynamo is not None:
        minidynamo.reset()
    bridge = sys.modules.get("xla_bridge")
    if bridge is not None and hasattr(bridge, "reset_counters"):
        bridge.reset_counters()


def diagnostics():
    """What minidynamo and xla_bridge counted during this model (all their peers together):
    compiles, recompiles, fallbacks, retraces, with reasons. A replay that silently fell back
    would otherwise be measured without anyone knowing."""
    found = {}
    minidynamo = sys.modules.get("minidynamo")
    if minidynamo is not None and hasattr(minidynamo.counters, "snapshot"):
        found["minidynamo"] = minidynamo.counters.snapshot()
    bridge = sys.modules.get("xla_bridge")
    if bridge is not None and hasattr(getattr(bridge, "counters", None), "as_dict"):
        found["xla_bridge"] = bridge.counters.as_dict()
    return found


def warnings_of(found):
    """Readable lines for the counters that say a backend did not just replay."""
    lines = []
    for layer, counts in found.items():
        for key in ("fallbacks", "recompiles", "retraces", "graph_breaks"):
            if counts.get(key):
                lines.append(f"{layer} {key}={counts[key]}")
        for key in ("fallback_reasons", "recompile_reasons", "break_reasons", "reasons"):
            lines += [f"{layer}: {reason}" for reason in list(counts.get(key) or [])[:3]]
    return lines


# The peers whose device work is the lazy-mode graph of the model's forward (lazy mode itself,
# and minidynamo's XLA backends, which trace the same forward lazily).
LAZY_GRAPH_PEERS = ("xla_lazy", "torchxla_trivial", "torchxla_trace_once")


def floor_phases(model, runs, transfers, inputs_at, first_step):
    """{transfer_in, execute, transfer_out} of a model: what no framework can remove.

    ``execute`` is the smallest median XLA execution among the peers that run the lazy-mode graph
    and gave right answers: each median estimates that graph's execution, and the smallest keeps
    the floor below every one of them, so no such peer can beat the limit through execution-time
    noise: one that does beat it skipped work the others do (a transfer)."""
    from bench import breakdown
    from bench.peers import LazyXLA
    from bench.stats import median

    executions = [median(run.execute_s) for name, run in runs.items()
                  if name in LAZY_GRAPH_PEERS and run.ok and any(run.execute_s)
                  and (run.accuracy is None or run.accuracy.ok)]
    if "xla_lazy" not in runs or not runs["xla_lazy"].ok:  # eager baseline: time lazy mode apart
        executions.append(breakdown.lazy_execute_seconds(LazyXLA(model), inputs_at, FLOOR_REPEATS,
                                                         first_step))
    return transfers.seconds() | {"execute": min(executions)}


def measure_own(result, peers, model, inputs):
    """The replaying peers' shared floor (``_run_cached_graph`` launch) and each one's own time
    per call (``bench.own_time``)."""
    from bench import own_time, xla_probe
    from bench.peers import LazyXLA
    from bench.results import REPLAYING_PEERS

    replaying = {p: peers[p] for p in REPLAYING_PEERS if p in peers and result.runs[p].ok}
    if not replaying:
        return
    lazy = peers.get("xla_lazy") or LazyXLA(model)
    result.launch_s = own_time.launch_seconds(lazy.model, xla_probe.to_device(inputs, lazy.device))
    for name, peer in replaying.items():
        result.own_s[name] = peer.own_seconds(inputs)


def run_model(options, name, regime_name, progress):
    """Measure one model in one regime; never raises (a failure becomes the result's error)."""
    import torch

    from bench import breakdown
    from bench.measure import PeerRun, describe, measure
    from bench.models import REGIMES, build_model
    from bench.peers import make_peer
    from bench.results import ModelResult

    regime = REGIMES[regime_name]
    baseline = options.baseline
    iterations, warmup = plan(options)
    result = ModelResult(name, regime_name, baseline, {})
    peers = {}
    progress.describe(f"{regime_name} {name}")
    try:
        with torch.no_grad():
            model = build_model(name, regime, options.seed)
            inputs_at = input_source(name, regime, options)
            failed = {}
            for peer in dict.fromkeys((baseline,) + options.contenders):
                try:
                    peers[peer] = make_peer(peer, model)
                except Exception as error:
                    if peer == baseline:
                        raise
                    failed[peer] = PeerRun(peer, error=describe(error))
            wants_floor = options.mode == "performance" and any(getattr(p, "uses_xla", False) for p in peers.values())
            transfers = breakdown.TransferSampler(inputs_at(0), model(*inputs_at(0))) if wants_floor else None

            def between_iterations():
                progress.tick()
                if transfers is not None:
                    transfers.sample()

            _reset_minidynamo()
            result.runs = measure(peers, baseline, inputs_at, iterations, warmup, between_iterations) | failed
            result.diagnostics = diagnostics()
            # the measured runs stand even if the floor or the breakdown fails: those become notes
            if wants_floor:
                try:
                    result.floor_phases = floor_phases(model, result.runs, transfers, inputs_at, warmup)
                    result.floor_s = sum(result.floor_phases.values())
                except Exception as error:
                    result.notes.append(f"floor not measured: {describe(error)}")
            if wants_floor:
                try:
                    measure_own(result, peers, model, inputs_at(warmup))
                except Exception as error:
                    result.notes.append(f"own time not measured: {describe(error)}")
            if options.breakdown:
                alive = {p: peers[p] for p, run in result.runs.items() if run.ok and p in peers}
                try:
                    result.breakdown = breakdown.study(alive, inputs_at, max(5, iterations // 2), first_step=warmup)
                except Exception as error:
                    result.notes.append(f"breakdown not measured: {describe(error)}")
    except Exception as error:
        result.error = describe(error)
    finally:
        peers.clear()
        _reset_minidynamo()
        gc.collect()
    return result


def main(argv=None):
    options = parse_args(argv)
    os.environ.setdefault("PJRT_DEVICE", "CPU")  # read when torch_xla first starts
    iterations, warmup = plan(options)
    progress = Progress(len(options.regimes) * len(options.models) * (iterations + warmup), options.progress)
    by_regime = {}
    try:
        for regime in options.regimes:
            by_regime[regime] = [run_model(options, name, regime, progress) for name in options.models]
    finally:
        progress.close()
    from bench import report

    for regime, results_list in by_regime.items():
        print_report(options, regime, results_list)
        paths = report.write_all(os.path.join(options.output, regime), options, regime, results_list)
        print("wrote " + ", ".join(paths))
    return 0


def print_report(options, regime, results_list):
    from bench import report

    print()
    print(report.header(options, regime))
    if options.mode == "performance":
        print(report.speedup_table(results_list, options.contenders))
        print("Per-call overhead = median(call - its XLA execution) - transfers (in + out, the copies alone); "
              "own = overhead - launch, where launch = the wall time of _run_cached_graph (it returns once the "
              "program is launched) called alone on the lazy-mode graph: the floor both replaying peers share.")
        print(report.overhead_table(results_list, options.contenders))
        print("Own time per call, us: everything but the XLA runtime (inputs on the device, _run_cached_graph "
              "stood in for by its cached results; bench/own_time.py).")
        print(report.own_time_table(results_list))
        print("1st call s = capture + compile + one run (of which XLA compilation; rest = everything else: the "
              "part each implementation controls); an XLA graph that an earlier peer (the baseline runs first) "
              "compiled in this process is a compile-cache hit: compare the rest across peers.")
        print(report.first_call_table(results_list, options.contenders))
        verdicts = report.goals(results_list, options)
        if verdicts:
            print(verdicts)
    print(report.accuracy_table(results_list, options.contenders))
    if options.breakdown:
        print("Breakdown: median ms per phase of instrumented calls (barriers between phases).")
        print(report.breakdown_table(results_list))
        for r in results_list:
            for peer, phases in (r.breakdown or {}).items():
                if "note" in phases:
                    print(f"  {r.model} {peer}: {phases['note']}")
    for r in results_list:
        if r.error:
            print(f"{r.model}: not measured: {r.error}")
        for line in r.notes + warnings_of(r.diagnostics or {}):
            print(f"{r.model}: {line}")

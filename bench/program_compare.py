"""``python -m bench.program_compare``: is trace-once's replayed XLA program as fast as lazy mode's?

Both peers are prepared in one process and warmed; then they take turns (interleaved, many
repeats) and each call's XLA execution is read from the runtime's ExecuteTime metric, so only
the programs are compared, not the Python around them. A third contender runs lazy mode's own
program the way trace-once (and openxla_eval) run theirs, compiled by ``_xla_warm_up_cache`` and
launched by ``_run_cached_graph``: when it is as slow as trace-once's, a gap to lazy mode is the
replay path's (shared by both replaying peers), not a difference of the programs. The HLO of both
programs is taken too (lazy: the outputs of one traced forward; trace-once: the results its
capture compiles) and summarised: parameters, outputs, instruction counts per opcode, and the
opcodes whose counts differ. ``--hlo DIR`` writes both HLO texts there.
"""

import argparse
import collections
import os
import re
import statistics
import sys


def _execute_seconds(peer, inputs, probe):
    from bench.measure import fresh_copy

    call_inputs = fresh_copy(inputs)
    probe.wait_device()
    before = probe.execute_ns()
    peer(call_inputs)
    probe.wait_device()
    return (probe.execute_ns() - before) / 1e9


def _replayed(lazy, inputs):
    """A contender running lazy mode's program for ``inputs`` as the replaying peers run theirs:
    ``_run_cached_graph(hash, device data)`` (the same parameters every call)."""
    from bench import xla_probe
    from bench.own_time import lazy_graph

    graph_hash, parameters = lazy_graph(lazy.model, xla_probe.to_device(inputs, lazy.device))
    xlac = xla_probe._xla()._XLAC
    return lambda _inputs: xlac._run_cached_graph(graph_hash, parameters)


def lazy_hlo(lazy, inputs):
    """HLO text of lazy mode's program for ``inputs`` (traced, not run)."""
    import torch_xla

    from bench import xla_probe

    outputs = lazy.model(*xla_probe.to_device(inputs, lazy.device))
    flat = list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]
    text = torch_xla._XLAC._get_xla_tensors_hlo(flat)
    xla_probe.sync()
    return text


class CaptureHLO:
    """Records the HLO of every graph trace-once's capture compiles (while active)."""

    def __enter__(self):
        from xla_bridge import lazy_graph

        self.module, self.original, self.texts = lazy_graph, lazy_graph._compile, []

        def recording(xlac, results):
            self.texts.append(xlac._get_xla_tensors_hlo(results))
            return self.original(xlac, results)

        lazy_graph._compile = recording
        return self

    def __exit__(self, *exc):
        self.module._compile = self.original
        return False


def summary(hlo):
    """{"parameters", "outputs", "instructions", "opcodes": Counter} of an HLO module's entry."""
    entry = hlo[hlo.rfind("ENTRY"):]
    opcodes = collections.Counter(re.findall(r"= \S+ ([a-z][a-z0-9-]*)\(", hlo))
    root = next((line for line in entry.splitlines() if "ROOT" in line), "")
    outputs = root.count("%") - 1 if " tuple(" in root else 1
    return {"parameters": entry.count(" parameter("), "outputs": outputs,
            "instructions": sum(opcodes.values()), "opcodes": opcodes}


def compare(model_name, regime_name, repeats=30, seed=1337, hlo_dir=None):
    os.environ.setdefault("PJRT_DEVICE", "CPU")
    import torch

    from bench import xla_probe
    from bench.models import REGIMES, build_model, make_inputs
    from bench.peers import make_peer

    regime = REGIMES[regime_name]
    with torch.no_grad():
        model = build_model(model_name, regime, seed)
        inputs = make_inputs(model_name, regime, 1, torch.Generator().manual_seed(seed))
        lazy = make_peer("xla_lazy", model)
        ours = make_peer("torchxla_trace_once", model)
        lazy(inputs)
        with CaptureHLO() as captured:
            ours(inputs)
        contenders = {"xla_lazy": lazy, "torchxla_trace_once": ours,
                      "lazy's program replayed": _replayed(lazy, inputs)}
        for _ in range(2):
            for peer in contenders.values():
                peer(inputs)
        samples = {name: [] for name in contenders}
        for i in range(repeats):
            order = list(samples) if i % 2 == 0 else list(reversed(samples))
            for name in order:
                samples[name].append(_execute_seconds(contenders[name], inputs, xla_probe))
        hlo = {"xla_lazy": lazy_hlo(lazy, inputs), "torchxla_trace_once": "\n".join(captured.texts)}
    if hlo_dir:
        os.makedirs(hlo_dir, exist_ok=True)
        for name, text in hlo.items():
            with open(os.path.join(hlo_dir, f"{model_name}-{regime_name}-{name}.hlo"), "w") as f:
                f.write(text)
    print(f"{model_name} ({regime_name}): XLA execution per call, ms, {repeats} interleaved repeats")
    for name, values in samples.items():
        print(f"  {name:24s} min {min(values) * 1e3:8.2f}  median {statistics.median(values) * 1e3:8.2f}")
    lazy_sum, ours_sum = summary(hlo["xla_lazy"]), summary(hlo["torchxla_trace_once"])
    print(f"  HLO graphs: ours {len(captured.texts)} (partitioned when more than one)")
    for key in ("parameters", "outputs", "instructions"):
        print(f"  HLO {key:12s} lazy {lazy_sum[key]:6d}  ours {ours_sum[key]:6d}")
    differing = sorted(op for op in set(lazy_sum["opcodes"]) | set(ours_sum["opcodes"])
                       if lazy_sum["opcodes"][op] != ours_sum["opcodes"][op])
    print("  opcodes that differ: " + (", ".join(
        f"{op} {lazy_sum['opcodes'][op]}/{ours_sum['opcodes'][op]}" for op in differing) or "none"))
    return samples, hlo


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m bench.program_compare",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("models", nargs="+")
    parser.add_argument("--small", action="store_true")
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--hlo", metavar="DIR", help="write both HLO texts here")
    args = parser.parse_args(argv)
    for model in args.models:
        compare(model, "small" if args.small else "standard", args.repeats, hlo_dir=args.hlo)
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

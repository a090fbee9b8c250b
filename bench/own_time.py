"""What each implementation itself costs per call, apart from the runtime work every peer shares.

Both replaying peers (minidynamo's ``torchxla_trace_once`` and ``openxla_eval``) end each call
in the same runtime function, ``torch_xla._XLAC._run_cached_graph(hash, inputs)``, which
launches the compiled XLA program and waits for it. Around it, each runs its own code: guards,
reading inputs, mapping them to the graph's parameters, shaping the outputs. Two numbers:

- ``launch_seconds``: the shared floor, the runtime call itself, measured on the model's
  lazy-mode graph with the runtime called directly (no peer's code runs) on an idle device.
  ``_run_cached_graph`` returns once the program is launched (the execution runs on the
  runtime's threads; the caller waits for it when it reads a result), so its wall time is the
  launch: converting the inputs, looking the program up, scheduling it. Median over calls.
- ``own_seconds(call)``: one peer's own time per call, everything but the runtime: the call is
  timed with ``_XLAC._run_cached_graph`` replaced by a stand-in that returns the real results of
  that graph (computed once), minus the stand-in's own cost. Inputs are already on the device
  (no transfer) and nothing executes, so the loop times exactly the peer's code, to a fraction
  of a microsecond (best of several loops: noise only adds).

The timing loop's per-call overhead (call - execution - transfers) includes the launch;
subtracting it leaves the part each implementation controls.
"""

import contextlib
import inspect
import statistics
import time

from bench import xla_probe


class StandIn:
    """Answers ``_run_cached_graph(hash, inputs)`` from a per-hash cache of real results (a
    fresh list per call, as the runtime gives)."""

    def __init__(self, real):
        self.real = real
        self.answers = {}

    def __call__(self, graph_hash, inputs):
        found = self.answers.get(graph_hash)
        if found is None:
            found = self.answers[graph_hash] = self.real(graph_hash, inputs)
        return list(found)


@contextlib.contextmanager
def runtime_stand_in():
    """``_XLAC._run_cached_graph`` replaced by a ``StandIn`` inside the block; yields it."""
    xlac = xla_probe._xla()._XLAC
    stand_in = StandIn(xlac._run_cached_graph)
    xlac._run_cached_graph = stand_in
    try:
        yield stand_in
    finally:
        xlac._run_cached_graph = stand_in.real


def _best_per_call(call, calls, loops):
    for _ in range(min(calls, 20)):
        call()
    best = float("inf")
    for _ in range(loops):
        start = time.perf_counter()
        for _ in range(calls):
            call()
        best = min(best, (time.perf_counter() - start) / calls)
    return best


def own_seconds(call, calls=200, loops=7):
    """Seconds per call of ``call()`` (a peer called on device inputs) without the runtime call:
    the stand-in's own cost (a dict lookup, a list copy: the same for every peer) taken off."""
    with runtime_stand_in() as stand_in:
        call()                                  # fills the stand-in's answers
        total = _best_per_call(call, calls, loops)
        if not stand_in.answers:                # the peer never called the runtime
            return total
        graph_hash = next(iter(stand_in.answers))
        cost = _best_per_call(lambda: stand_in(graph_hash, None), calls, loops)
    return max(0.0, total - cost)


def lazy_graph(model, inputs):
    """(hash, parameters) of the lazy-mode graph of ``model(*inputs)`` (both on the device),
    compiled into XLA's cache: what every replaying peer runs, called with no peer around it."""
    xlac = xla_probe._xla()._XLAC
    import torch
    from torch.utils import _pytree as pytree

    outputs = [t for t in pytree.tree_leaves(model(*inputs)) if isinstance(t, torch.Tensor)]
    graph_hash = xlac._get_graph_hash(outputs)
    xlac._xla_warm_up_cache(outputs, [])
    _, parameters = xlac._get_tensors_xla_device_data_node(outputs)
    return graph_hash, list(parameters)


def launch_seconds(model, inputs, calls=15):
    """Median wall seconds of ``_run_cached_graph`` (the launch: it returns before the program
    has run) on the model's lazy-mode graph (model and inputs on the device), device idle."""
    xlac = xla_probe._xla()._XLAC
    graph_hash, parameters = lazy_graph(model, inputs)
    samples = []
    for _ in range(calls + 2):
        xla_probe.wait_device()
        start = time.perf_counter()
        xlac._run_cached_graph(graph_hash, parameters)
        samples.append(time.perf_counter() - start)
    xla_probe.wait_device()
    return statistics.median(samples[2:])


def _split_minidynamo(peer, inputs, calls, loops):
    """The parts of a minidynamo call as a hit runs them, each timed with the runtime stood in
    for: ``guard`` (the entry's guard alone), ``entry`` (the cache entry's body right after its
    guard passed: the guard's reads handed to it, the replay, the output; guard+entry - guard),
    ``calls`` (the rest: the optimized module's and the model's ``nn.Module.__call__``, the frame
    hook; total - guard+entry) and, for reference, ``bridge alone`` (the compiled graph called on
    the inputs read anew, checking every input itself)."""
    import minidynamo

    func = type(peer.model).forward
    on_device = xla_probe.to_device(inputs, peer.device)
    converter = peer.optimized._minidynamo_converter     # the code's cache holds every peer's entries
    entries = [e for e in minidynamo.cache_entries(peer.optimized)
               if e.guard_fn is not None and e.owner() is converter]
    _, guard_fn, compiled_fn = entries[0]
    # The frame's argument slots as the hook hands them over: defaults filled in
    # (timm's ViT: ``forward(self, x, attn_mask=None, is_causal=False)``).
    bound = inspect.signature(func).bind(peer.model, *on_device)
    bound.apply_defaults()
    args = tuple(bound.arguments.values())
    graph_args = compiled_fn.read_inputs(func, *args)
    with runtime_stand_in() as stand_in:
        peer.optimized(*on_device)
        graph_hash = next(iter(stand_in.answers), None)
        stand_in_cost = 0.0 if graph_hash is None else \
            _best_per_call(lambda: stand_in(graph_hash, None), calls, loops)
        timed = {"total": lambda: peer.optimized(*on_device), "guard": lambda: guard_fn(func, *args),
                 "guard+entry": lambda: guard_fn(func, *args) and compiled_fn(func, *args),
                 "bridge": lambda: compiled_fn.compiled_graph(*graph_args)}
        best = dict.fromkeys(timed, float("inf"))
        for _ in range(3):                  # rounds in turn: a busy spell cannot skew one part
            for part, call in timed.items():
                best[part] = min(best[part], _best_per_call(call, calls, loops))
    total, guard = best["total"] - stand_in_cost, best["guard"]
    guard_entry, bridge = best["guard+entry"] - stand_in_cost, best["bridge"] - stand_in_cost
    return {"guard": guard, "entry": max(0.0, guard_entry - guard),
            "calls": max(0.0, total - guard_entry), "bridge alone": max(0.0, bridge)}


def main(argv=None):
    """``python -m bench.own_time [--model M ...]``: own time per call of each replaying peer
    (small regime, batch 1), minidynamo split into its parts, with the C++ replay on and off."""
    import argparse
    import os

    os.environ.setdefault("PJRT_DEVICE", "CPU")
    import torch

    import xla_bridge
    from bench.models import REGIMES, build_model, make_inputs
    from bench.peers import LazyXLA, Minidynamo, OpenXLAEval

    parser = argparse.ArgumentParser(description=main.__doc__.splitlines()[0])
    parser.add_argument("--model", action="append")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--loops", type=int, default=7)
    options = parser.parse_args(argv)
    regime = REGIMES["small"]
    for name in options.model or ["resnet18", "BERT_pytorch"]:
        with torch.no_grad():
            model = build_model(name, regime, 0)
            inputs = make_inputs(name, regime, 1, torch.Generator().manual_seed(0))
            peers = {"openxla_eval": OpenXLAEval(model)}
            for native in (True, False):
                xla_bridge.config.native_replay = native
                peers[f"trace_once ({'C++' if native else 'Python'} replay)"] = peer = \
                    Minidynamo(model, "torchxla_trace_once")
                peer(inputs)                     # capture + compile (the C++ flag is read now)
            xla_bridge.config.native_replay = True
            peers["openxla_eval"](inputs)
            lazy = LazyXLA(model)
            launch = launch_seconds(lazy.model, xla_probe.to_device(inputs, lazy.device))
            print(f"\n{name} (small regime, batch 1): own time per call, us (runtime stood in for)")
            print(f"  shared floor: _run_cached_graph launch {launch * 1e6:9.1f}")
            for label, peer in peers.items():
                call = peer.own_seconds(inputs)
                line = f"  {label:28s} {call * 1e6:9.1f}"
                if label.startswith("trace_once"):
                    parts = _split_minidynamo(peer, inputs, options.calls, options.loops)
                    line += "   of which " + ", ".join(f"{k} {v * 1e6:.1f}" for k, v in parts.items())
                print(line)


if __name__ == "__main__":
    main()

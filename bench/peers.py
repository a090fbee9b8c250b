"""The contenders, each prepared from the same model and called the same way.

Every peer takes CPU inputs and returns CPU outputs, so all are measured alike: a call includes
moving the inputs to the XLA device, the forward, and bringing the results back to the host.
Every XLA peer holds its model on the XLA device (the canonical PyTorch/XLA set-up) and moves
the inputs in with the same call (``xla_probe.to_device``) and the results out with the same
call (``xla_probe.to_host``); the harness hands each call freshly allocated input tensors
(``measure.fresh_copy``), so no peer can skip an input copy that the others make.

    eager_cpu          the model itself, eager PyTorch on the CPU (the default baseline)
    xla_lazy           PyTorch/XLA lazy mode: trace the forward anew, sync, fetch (--use-xla-baseline)
    eager, torchxla_trivial, torchxla_trace_once
                       minidynamo.optimize(backend)(model): guards, then the backend's compiled graph
    openxla_eval       torch.compile(model, backend="openxla_eval"): the reference implementation

Each peer is a callable ``peer(inputs) -> outputs`` and has ``phases(inputs) -> (outputs,
{phase: seconds})``, the same call instrumented for the overhead study (``bench.breakdown``).
Each peer owns a deep copy of the model, so moving one to the XLA device leaves the others alone.
"""

import copy
import inspect
import time

from bench import xla_probe

# The phases of one call, in the order they happen. ``other`` is whatever the instruments cannot
# attribute (the frame hook, Python glue, dynamo's guards and dispatch for openxla_eval).
PHASES = ("guard", "transfer_in", "trace", "hash_lookup_dispatch", "execute", "transfer_out", "other")


class _Laps:
    """Wall-clock phases of one instrumented call, each with the XLA execution that happened
    inside it moved to ``execute`` (lazy mode executes mid-trace when an op falls back to the
    CPU: that time is execution, not tracing). Waits for the device at every boundary."""

    def __init__(self):
        xla_probe.wait_device()
        self.phases = {"execute": 0.0}
        self._clock, self._executed = time.perf_counter(), xla_probe.execute_ns()

    def lap(self, phase):
        xla_probe.wait_device()
        clock, executed = time.perf_counter(), xla_probe.execute_ns()
        execute = (executed - self._executed) / 1e9
        self.phases[phase] = self.phases.get(phase, 0.0) + max(0.0, clock - self._clock - execute)
        self.phases["execute"] += execute
        self._clock, self._executed = clock, executed


class EagerCPU:
    """Eager PyTorch on the CPU: what a user gets without any compiler."""

    uses_xla = False

    def __init__(self, model):
        self.model = model

    def __call__(self, inputs):
        return self.model(*inputs)

    def phases(self, inputs):
        start = time.perf_counter()
        outputs = self(inputs)
        return outputs, {"execute": time.perf_counter() - start}


class LazyXLA:
    """PyTorch/XLA lazy mode: every call runs the Python forward on lazy tensors (tracing), then
    ``sync`` hashes the traced graph, finds it in the compile cache and launches it."""

    uses_xla = True

    def __init__(self, model):
        self.device = xla_probe.device()
        self.model = copy.deepcopy(model).to(self.device)

    def __call__(self, inputs):
        outputs = self.model(*xla_probe.to_device(inputs, self.device))
        xla_probe.sync()
        return xla_probe.to_host(outputs)

    def phases(self, inputs):
        laps = _Laps()
        on_device = xla_probe.to_device(inputs, self.device)
        laps.lap("transfer_in")
        outputs = self.model(*on_device)
        laps.lap("trace")
        xla_probe.sync()
        laps.lap("hash_lookup_dispatch")  # the graph's execution inside it goes to "execute"
        host = xla_probe.to_host(outputs)
        laps.lap("transfer_out")
        return host, laps.phases


class Minidynamo:
    """``minidynamo.optimize(backend)(model)``: guards pick a cache entry, its compiled graph runs.

    For the XLA backends the model lives on the XLA device and the peer moves the inputs in and
    the results out, exactly as lazy mode and openxla_eval do: the same placement and the same
    copies for every XLA peer. (A model left on the host would have the bridge copy every
    weight to the device on every call: see ``xla_bridge``'s "Host data and the device".)
    """

    def __init__(self, model, backend):
        import minidynamo

        self.backend = backend
        self.uses_xla = backend != "eager"
        self.model = copy.deepcopy(model)
        if self.uses_xla:
            self.device = xla_probe.device()
            self.model = self.model.to(self.device)
        self.optimized = minidynamo.optimize(backend)(self.model)

    def __call__(self, inputs):
        if not self.uses_xla:
            return self.optimized(*inputs)
        return xla_probe.to_host(self.optimized(*xla_probe.to_device(inputs, self.device)))

    def phases(self, inputs):
        """Transfers timed around the call, as for lazy mode; inside it the backend's own phase
        timer (``xla_bridge.phase_timer``) for tracing, XLA execution from the runtime metric
        as for every peer, the rest of the device time being the lookup and dispatch. Without
        the timer, execution alone is attributed. Guard time is measured apart
        (``guard_seconds``)."""
        if not self.uses_xla:
            start = time.perf_counter()
            outputs = self(inputs)
            total = time.perf_counter() - start
            return outputs, {"execute": total, "total": total}
        timer = _xla_bridge_phase_timer()
        start = time.perf_counter()
        laps = _Laps()
        on_device = xla_probe.to_device(inputs, self.device)
        laps.lap("transfer_in")
        executed = xla_probe.execute_ns()
        if timer is None:
            outputs = self.optimized(*on_device)
            split = {}
        else:
            with timer() as recorded:
                outputs = self.optimized(*on_device)
            split = {phase: float(seconds) for phase, seconds in dict(recorded.totals).items()}
        laps.lap("call")
        execute = (xla_probe.execute_ns() - executed) / 1e9
        host = xla_probe.to_host(outputs)
        laps.lap("transfer_out")
        phases = laps.phases
        phases.pop("call", None)           # split below; what no phase explains becomes other
        for phase in ("transfer_in", "transfer_out", "trace"):   # the bridge's own (device
            phases[phase] = phases.get(phase, 0.0) + split.get(phase, 0.0)  # inputs: ~0)
        on_device_s = split.get("hash_lookup_dispatch", 0.0) + split.get("execute", 0.0)
        if on_device_s:
            phases["hash_lookup_dispatch"] = max(0.0, on_device_s - execute)
        phases["total"] = time.perf_counter() - start
        return host, phases

    def own_seconds(self, inputs):
        """Seconds per call of everything but the XLA runtime (``bench.own_time``): inputs on
        the device, ``_run_cached_graph`` stood in for. Only the replaying backend calls it."""
        from bench import own_time

        on_device = xla_probe.to_device(inputs, self.device)
        return own_time.own_seconds(lambda: self.optimized(*on_device))

    def guard_seconds(self, inputs, repeats=200):
        """Median time of one guard check of the entry that serves ``inputs``, or a reason string.

        This is the guard of the model's own ``forward`` frame, which covers the whole capture
        when the forward is one graph; frames captured apart (after a fallback) count as other."""
        import minidynamo

        converter = self.optimized._minidynamo_converter
        entries = [e for e in minidynamo.cache_entries(self.optimized) if _owner(e) is converter]
        if not entries:
            return "no cache entry of this peer (the frame ran eagerly?)"
        func = type(self.model).forward
        if self.uses_xla:
            inputs = xla_probe.to_device(inputs, self.device)
        args = frame_arguments(func, (self.model, *inputs))
        for _, guard_fn, _ in entries:
            if guard_fn(func, *args):
                return _median_seconds(lambda: guard_fn(func, *args), repeats)
        return "no guard of the cache passes on these inputs"


class OpenXLAEval:
    """``torch.compile(model, backend="openxla_eval")`` on the XLA device: dynamo's guards, then
    torch_xla's dynamo bridge replays the graph compiled at the first call."""

    uses_xla = True

    def __init__(self, model):
        import torch

        self.device = xla_probe.device()
        self.model = copy.deepcopy(model).to(self.device)
        self.compiled = torch.compile(self.model, backend="openxla_eval")

    def __call__(self, inputs):
        return xla_probe.to_host(self.compiled(*xla_probe.to_device(inputs, self.device)))

    def phases(self, inputs):
        laps = _Laps()
        on_device = xla_probe.to_device(inputs, self.device)
        laps.lap("transfer_in")
        outputs = self.compiled(*on_device)
        laps.lap("other")  # dynamo's guards and the bridge's dispatch; ``guard_seconds`` splits guards off
        host = xla_probe.to_host(outputs)
        laps.lap("transfer_out")
        return host, laps.phases


    def own_seconds(self, inputs):
        """Seconds per call of everything but the XLA runtime (``bench.own_time``)."""
        from bench import own_time

        on_device = xla_probe.to_device(inputs, self.device)
        return own_time.own_seconds(lambda: self.compiled(*on_device))

    def guard_seconds(self, inputs, repeats=200):
        """Median time of dynamo's guard check (its C++ guard manager) on ``inputs``, or a reason."""
        from torch._dynamo.eval_frame import _debug_get_cache_entry_list

        forward = type(self.model).forward
        bound = inspect.signature(forward).bind(self.model, *xla_probe.to_device(inputs, self.device))
        bound.apply_defaults()
        f_locals = dict(bound.arguments)
        for entry in _debug_get_cache_entry_list(forward.__code__):
            if entry.guard_manager.check(f_locals):
                return _median_seconds(lambda: entry.guard_manager.check(f_locals), repeats)
        return "no dynamo cache entry passes its guards on these inputs"


def frame_arguments(func, args):
    """The raw argument slots of ``func``'s frame for a call with ``args``, as the frame hook
    passes them to a guard: positionals, keyword-only, then ``*args``, then ``**kwargs``, with
    defaults applied (timm's ViT forward has defaulted ``attn_mask``, ``is_causal``)."""
    signature = inspect.signature(func)
    bound = signature.bind(*args)
    bound.apply_defaults()
    kinds = inspect.Parameter
    order = (kinds.POSITIONAL_ONLY, kinds.POSITIONAL_OR_KEYWORD, kinds.KEYWORD_ONLY,
             kinds.VAR_POSITIONAL, kinds.VAR_KEYWORD)
    params = sorted(signature.parameters.values(), key=lambda p: order.index(p.kind))
    return tuple(bound.arguments[p.name] for p in params)


def _median_seconds(fn, repeats):
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    samples.sort()
    return samples[len(samples) // 2]


def _owner(entry):
    """The callback that made a cache entry (its ``owner`` is a weak reference)."""
    return entry.owner()


def _xla_bridge_phase_timer():
    try:
        import xla_bridge
    except ImportError:
        return None
    return getattr(xla_bridge, "phase_timer", None)


PEER_FACTORIES = {
    "eager_cpu": EagerCPU,
    "xla_lazy": LazyXLA,
    "eager": lambda model: Minidynamo(model, "eager"),
    "torchxla_trivial": lambda model: Minidynamo(model, "torchxla_trivial"),
    "torchxla_trace_once": lambda model: Minidynamo(model, "torchxla_trace_once"),
    "openxla_eval": OpenXLAEval,
}


def make_peer(name, model):
    """The peer ``name`` prepared from ``model`` (which it copies, never changes)."""
    return PEER_FACTORIES[name](model)

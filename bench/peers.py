"""The contenders, each prepared from the same model and called the same way.

Every peer takes CPU inputs and returns CPU outputs, so all are measured alike: a call includes
moving the inputs to the XLA device, the forward, and bringing the results back to the host.

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
import time

from bench import xla_probe

# The phases of one call, in the order they happen. ``other`` is whatever the instruments cannot
# attribute (the frame hook, Python glue, dynamo's guards and dispatch for openxla_eval).
PHASES = ("guard", "transfer_in", "trace", "hash_lookup_dispatch", "execute", "transfer_out", "other")


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
        clock = time.perf_counter
        executed = xla_probe.execute_ns()
        t0 = clock()
        on_device = xla_probe.to_device(inputs, self.device)
        t1 = clock()
        outputs = self.model(*on_device)
        t2 = clock()
        xla_probe.sync()
        xla_probe.wait_device()
        t3 = clock()
        host = xla_probe.to_host(outputs)
        t4 = clock()
        execute = (xla_probe.execute_ns() - executed) / 1e9
        return host, {
            "transfer_in": t1 - t0,
            "trace": t2 - t1,
            "hash_lookup_dispatch": max(0.0, (t3 - t2) - execute),
            "execute": execute,
            "transfer_out": t4 - t3,
        }


class Minidynamo:
    """``minidynamo.optimize(backend)(model)``: guards pick a cache entry, its compiled graph runs.

    The XLA backends move CPU inputs in and results back themselves (parameters once, at compile
    time), so the model stays on the CPU here.
    """

    def __init__(self, model, backend):
        import minidynamo

        self.backend = backend
        self.uses_xla = backend != "eager"
        self.model = copy.deepcopy(model)
        self.optimized = minidynamo.optimize(backend)(self.model)

    def __call__(self, inputs):
        return xla_probe.to_host(self.optimized(*inputs)) if self.uses_xla else self.optimized(*inputs)

    def phases(self, inputs):
        """The backend's own phase timer when ``xla_bridge`` has one; else XLA execution from the
        runtime metrics and the rest unattributed. Guard time is measured apart (``guard_seconds``)."""
        timer = _xla_bridge_phase_timer() if self.uses_xla else None
        executed = xla_probe.execute_ns() if self.uses_xla else 0
        start = time.perf_counter()
        if timer is None:
            outputs = self(inputs)
            split = {}
        else:
            with timer() as recorded:
                outputs = self(inputs)
            split = {phase: float(seconds) for phase, seconds in dict(recorded.totals).items()}
        total = time.perf_counter() - start
        if self.uses_xla and "execute" not in split:
            split["execute"] = (xla_probe.execute_ns() - executed) / 1e9
        split["total"] = total
        return outputs, split

    def guard_seconds(self, inputs, repeats=200):
        """Median time of one guard check of the entry that serves ``inputs``, or a reason string."""
        import minidynamo

        entries = minidynamo.cache_entries(self.optimized)
        if not entries:
            return "no cache entry (the frame ran eagerly?)"
        func = type(self.model).forward
        args = (self.model, *inputs)
        for entry in entries:
            guard_fn = getattr(entry, "guard_fn", None) or entry[1]
            if guard_fn(func, *args):
                samples = []
                for _ in range(repeats):
                    start = time.perf_counter()
                    guard_fn(func, *args)
                    samples.append(time.perf_counter() - start)
                samples.sort()
                return samples[len(samples) // 2]
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
        clock = time.perf_counter
        executed = xla_probe.execute_ns()
        t0 = clock()
        on_device = xla_probe.to_device(inputs, self.device)
        t1 = clock()
        outputs = self.compiled(*on_device)
        xla_probe.wait_device()
        t2 = clock()
        host = xla_probe.to_host(outputs)
        t3 = clock()
        execute = (xla_probe.execute_ns() - executed) / 1e9
        # dynamo's guard check and the bridge's dispatch cannot be told apart from outside
        return host, {
            "transfer_in": t1 - t0,
            "execute": execute,
            "other": max(0.0, (t2 - t1) - execute),
            "transfer_out": t3 - t2,
        }


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

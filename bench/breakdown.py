"""The overhead study: where the time of one call goes, phase by phase, peer by peer.

    guard                 minidynamo's guard function, timed alone on the same inputs
    transfer_in           CPU inputs -> XLA device
    trace                 the Python forward on lazy tensors (lazy mode and torchxla_trivial)
    hash_lookup_dispatch  graph hash, compile-cache lookup, launching the executable
    execute               XLA execution (the runtime's own ExecuteTime metric)
    transfer_out          results -> CPU
    other                 what no instrument attributes: the frame hook, Python glue; for
                          openxla_eval, dynamo's guards and its bridge's dispatch together

Each instrumented call gets fresh input tensors, as in the timing loop (``measure.fresh_copy``).
The instrumented calls add barriers between phases (wait for the device), so they run apart from
the timing loop and their totals are close to, not equal to, the measured medians. Execution that
happens inside another phase (lazy mode runs part of the graph mid-trace when an op falls back to
the CPU) is counted as execute. Peers take turns, one instrumented call each per round, and each
phase is the median over the rounds.

The floor of a model is transfer_in + execute + transfer_out: the time left if every framework
overhead vanished. Execution is the lazy-mode graph's: the smallest median execution of the
peers that run it (lazy mode, torchxla_trivial, torchxla_trace_once, from the timing loop; lazy
mode timed apart when the baseline is eager), so execution-time noise cannot lift one of them
over the limit; transfers are the data movement alone (``TransferSampler``), the same calls
every XLA peer makes on fresh inputs. It bounds systems
that replay the lazy-mode graph (trace_once); openxla_eval compiles its own graph (from aten
ops via dynamo), whose execution can be faster or slower. ``limit = baseline /
floor`` is the best speedup any capture system could show on that model.
"""

import statistics

from bench import peers as peer_kinds
from bench.measure import fresh_copy



def median_phases(samples):
    """{phase: median seconds} over a list of {phase: seconds} (phases missing count as 0)."""
    names = {name for sample in samples for name in sample}
    return {name: statistics.median(s.get(name, 0.0) for s in samples) for name in names}


def sample_phases(peer, inputs_at, repeats, first_step=0):
    return [peer.phases(fresh_copy(inputs_at(first_step + i)))[1] for i in range(repeats)]


class TransferSampler:
    """Times the data movement alone: ``inputs`` to the device, outputs shaped like ``outputs``
    (already on the device) back; the same for every peer. One sample per ``sample()`` call,
    taken between timed iterations so the samples spread over the run; ``seconds()`` keeps the
    minimum of each direction (a copy has a fixed cost, noise only adds)."""

    def __init__(self, inputs, outputs):
        from bench import xla_probe

        self.probe = xla_probe
        self.inputs = inputs
        self.outputs = outputs
        self.dev = xla_probe.device()
        self.samples = {"transfer_in": [], "transfer_out": []}

    def sample(self):
        import time

        probe = self.probe
        probe.wait_device()
        start = time.perf_counter()
        probe.to_device(self.inputs, self.dev)
        probe.wait_device()
        self.samples["transfer_in"].append(time.perf_counter() - start)
        on_device = probe.to_device(self.outputs, self.dev)
        probe.wait_device()
        start = time.perf_counter()
        probe.to_host(on_device)
        self.samples["transfer_out"].append(time.perf_counter() - start)

    def seconds(self, at_least=15):
        """{"transfer_in", "transfer_out"}: minimum seconds, sampling more if there are few."""
        while len(self.samples["transfer_in"]) < at_least:
            self.sample()
        return {direction: min(samples) for direction, samples in self.samples.items()}


def lazy_execute_seconds(lazy_peer, inputs_at, repeats, first_step=0):
    """Median XLA execution of a model's lazy-mode graph, from instrumented calls."""
    return median_phases(sample_phases(lazy_peer, inputs_at, repeats, first_step))["execute"]


def study(peers, inputs_at, repeats, first_step=0):
    """name -> {phase: seconds, ..., "total": seconds} for every XLA peer in ``peers``."""
    xla_peers = {name: peer for name, peer in peers.items() if getattr(peer, "uses_xla", False)}
    samples = {name: [] for name in xla_peers}
    for i in range(repeats):  # round-robin, so a burst of machine noise hits every peer alike
        for name, peer in xla_peers.items():
            samples[name].append(peer.phases(fresh_copy(inputs_at(first_step + i)))[1])
    table = {}
    for name, peer in xla_peers.items():
        phases = median_phases(samples[name])
        if "total" not in phases:
            phases["total"] = statistics.median(sum(s.values()) for s in samples[name])
        if hasattr(peer, "guard_seconds"):
            _attribute_guard(peer, phases, inputs_at(first_step))
        table[name] = {p: phases.get(p, 0.0) for p in peer_kinds.PHASES} | {"total": phases["total"]}
        if "note" in phases:
            table[name]["note"] = phases["note"]
    return table


def _attribute_guard(peer, phases, inputs):
    """Add the guard check (timed alone, it runs inside the call) and put the rest of the call
    that no phase explains in ``other``."""
    try:
        guard = peer.guard_seconds(inputs)
    except Exception as error:  # an introspection API that moved: report, do not crash
        guard = f"{type(error).__name__}: {error}"
    if isinstance(guard, str):
        phases["note"] = f"guard not measured: {guard}"
        guard = 0.0
    phases["guard"] = guard
    known = sum(v for p, v in phases.items() if p in peer_kinds.PHASES and p != "other")
    phases["other"] = max(0.0, phases["total"] - known)

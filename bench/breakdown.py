"""The overhead study: where the time of one call goes, phase by phase, peer by peer.

    guard                 minidynamo's guard function, timed alone on the same inputs
    transfer_in           CPU inputs -> XLA device
    trace                 the Python forward on lazy tensors (lazy mode and torchxla_trivial)
    hash_lookup_dispatch  graph hash, compile-cache lookup, launching the executable
    execute               XLA execution (the runtime's own ExecuteTime metric)
    transfer_out          results -> CPU
    other                 what no instrument attributes: the frame hook, Python glue; for
                          openxla_eval, dynamo's guards and its bridge's dispatch together

The instrumented calls add barriers between phases (wait for the device), so they run apart from
the timing loop and their totals are close to, not equal to, the measured medians. Each phase is
the median over the repeats.

The same instrumented lazy-mode call gives the floor of a model: transfer_in + execute +
transfer_out, the time left if every framework overhead vanished. ``limit = baseline / floor``
is the best speedup any capture system could show on that model.
"""

import statistics

from bench import peers as peer_kinds

FLOOR_PHASES = ("transfer_in", "execute", "transfer_out")


def median_phases(samples):
    """{phase: median seconds} over a list of {phase: seconds} (phases missing count as 0)."""
    names = {name for sample in samples for name in sample}
    return {name: statistics.median(s.get(name, 0.0) for s in samples) for name in names}


def sample_phases(peer, inputs_at, repeats, first_step=0):
    return [peer.phases(inputs_at(first_step + i))[1] for i in range(repeats)]


def floor_seconds(lazy_peer, inputs_at, repeats, first_step=0):
    """(floor, phases) of a model from its instrumented lazy-mode calls."""
    phases = median_phases(sample_phases(lazy_peer, inputs_at, repeats, first_step))
    return sum(phases.get(p, 0.0) for p in FLOOR_PHASES), phases


def study(peers, inputs_at, repeats, first_step=0):
    """name -> {phase: seconds, ..., "total": seconds} for every XLA peer in ``peers``."""
    table = {}
    for name, peer in peers.items():
        if not getattr(peer, "uses_xla", False):
            continue
        samples = sample_phases(peer, inputs_at, repeats, first_step)
        phases = median_phases(samples)
        if isinstance(peer, peer_kinds.Minidynamo):
            phases = _attribute_minidynamo(peer, phases, inputs_at(first_step))
        else:
            phases["total"] = statistics.median(sum(s.values()) for s in samples)
        table[name] = {p: phases.get(p, 0.0) for p in peer_kinds.PHASES} | {"total": phases["total"]}
        if "note" in phases:
            table[name]["note"] = phases["note"]
    return table


def _attribute_minidynamo(peer, phases, inputs):
    """Add the guard check (timed alone) and put the unattributed rest of the call in ``other``."""
    guard = peer.guard_seconds(inputs)
    if isinstance(guard, str):
        phases["note"] = f"guard not measured: {guard}"
        guard = 0.0
    phases["guard"] = guard
    known = sum(v for p, v in phases.items() if p in peer_kinds.PHASES and p != "other")
    phases["other"] = max(0.0, phases["total"] - known)
    return phases


"""An opt-in timer that splits each bridge call into phases.

    with xla_bridge.phase_timer() as t:
        compiled(x)
    t.totals   # {"transfer_in": s, "hash_lookup_dispatch": s, "execute": s, "transfer_out": s}

The bridge marks its phases with one idiom, ``with timing.phase("transfer_in"): ...``. While no
timer is active ``phase`` returns a shared do-nothing context, so timing costs a global read
and a call when it is off (and the C++ replay path, which times nothing, hands timed calls to
the Python path).
"""

import time
from contextlib import contextmanager

PHASES = ("transfer_in", "trace", "hash_lookup_dispatch", "execute", "transfer_out")

active = None   # the PhaseTimer being filled, or None (the fast path)


class PhaseTimer:
    """Seconds spent per phase (``totals``) and how many times each phase ran (``counts``)."""

    def __init__(self):
        self.totals = {}
        self.counts = {}

    def add(self, phase: str, seconds: float) -> None:
        self.totals[phase] = self.totals.get(phase, 0.0) + seconds
        self.counts[phase] = self.counts.get(phase, 0) + 1


class _Phase:
    """Charges the time spent inside a ``with`` block to one phase of a timer."""

    __slots__ = ("timer", "name", "start")

    def __init__(self, timer: PhaseTimer, name: str):
        self.timer, self.name = timer, name

    def __enter__(self):
        self.start = time.perf_counter()

    def __exit__(self, *exc):
        self.timer.add(self.name, time.perf_counter() - self.start)
        return False


class _Untimed:
    __slots__ = ()

    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


_UNTIMED = _Untimed()


def phase(name: str):
    """``with phase(name):`` charges the block to ``name`` when a timer is active."""
    timer = active
    return _UNTIMED if timer is None else _Phase(timer, name)


@contextmanager
def phase_timer():
    """Time the bridge calls made inside the block; yields the PhaseTimer."""
    global active
    previous, active = active, PhaseTimer()
    try:
        yield active
    finally:
        active = previous

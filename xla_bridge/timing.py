"""An opt-in timer that splits each bridge call into phases.

    with xla_bridge.phase_timer() as t:
        compiled(x)
    t.totals   # {"transfer_in": s, "hash_lookup_dispatch": s, "execute": s, "transfer_out": s}

While no timer is active the bridge's call path checks one module global and takes its
untimed branch, so timing costs nothing when it is off.
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
        self._last = 0.0

    def start(self) -> None:
        self._last = time.perf_counter()

    def lap(self, phase: str) -> None:
        """Charge the time since the previous lap (or start) to ``phase``."""
        now = time.perf_counter()
        self.totals[phase] = self.totals.get(phase, 0.0) + (now - self._last)
        self.counts[phase] = self.counts.get(phase, 0) + 1
        self._last = now


@contextmanager
def phase_timer():
    """Time the bridge calls made inside the block; yields the PhaseTimer."""
    global active
    previous, active = active, PhaseTimer()
    try:
        yield active
    finally:
        timer, active = active, previous

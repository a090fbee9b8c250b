"""One lock around every save and restore of a generator's state made by minidynamo and the bridge.

Both layers save the host generator's state and put it back: the tracer around the calls it makes
that the program did not (stand-in runs of an op, a module's constructor), the bridge around its
one-time runs of a graph and before a call it may re-run eagerly.  torch's ``Generator.get_state``
holds the generator's mutex while it wraps the state in a Python object.  That allocation may run
the garbage collector, whose finalizers are Python code and so may hand the GIL to another thread.
Should that thread then call ``get_state`` or ``set_state``, it waits for the mutex while holding
the GIL, and the first thread never gets the GIL back: both hang (seen in a six-thread program).
A Python lock waits without the GIL, so the second thread waits on ``STATE_LOCK`` instead.  The
lock lives here, in the lower layer, so that one lock covers both (minidynamo imports it; the
bridge never imports minidynamo).
"""

from __future__ import annotations

import threading

import torch

STATE_LOCK = threading.RLock()


def cpu_state() -> torch.Tensor:
    """The default CPU generator's state."""
    with STATE_LOCK:
        return torch.default_generator.get_state()


def set_cpu_state(state: torch.Tensor) -> None:
    with STATE_LOCK:
        torch.default_generator.set_state(state)


class cpu_state_kept:
    """``with cpu_state_kept() as kept:`` runs the body, then puts the default CPU generator back
    where it was if the body drew (``kept.drew`` says whether it did)."""

    def __enter__(self):
        self.state, self.drew = cpu_state(), False
        return self

    def __exit__(self, *exc):
        self.drew = not torch.equal(self.state, cpu_state())
        if self.drew:
            set_cpu_state(self.state)
        return False

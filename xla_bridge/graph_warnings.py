"""Graphs that warn: eager shows a warning on every call, and raises it under an "error"
filter; a replayed program runs no Python, so it would do neither.

``GraphWarnings`` watches the first trace of a graph (the inference program or a training
plan): when anything warned while the graph's code ran (``F.mse_loss`` of mismatched sizes
warns from Python), trace_once traces that graph every call instead of replaying it, which runs
that code again each time.  Every warning counts, whichever file it names (the graph's calls
pass through the bridge's own code, so the file does not say whose it is): a warning that was
not the graph's costs speed, never an answer.
"""

from __future__ import annotations

import warnings


class GraphWarnings(warnings.catch_warnings):
    """``with GraphWarnings() as seen:`` ... ``seen.reason()``: None, or why the graph must be
    traced every call.  Warnings inside are recorded, not shown (the traced call shows them)."""

    def __init__(self):
        super().__init__(record=True)
        self.caught = []

    def __enter__(self):
        self.caught = super().__enter__()
        warnings.simplefilter("always")
        return self

    def reason(self) -> str | None:
        if not self.caught:
            return None
        first = self.caught[0]
        return (f"the graph warns ({first.category.__name__}: {str(first.message)[:80]}): a replay "
                "would neither show nor raise it")

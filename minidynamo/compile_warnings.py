"""Warnings raised while a frame compiles, kept out of the program's sight.

A compile runs real code beside its symbolic trace (ops on meta values, a constant folded, the
backend's own trace and compile), and some of it warns.  That is not the program's run, so it is
not shown: the call's real run shows what eager shows.  ``warnings.catch_warnings`` would hide it
at a cost the program sees:

- it swaps ``warnings.showwarning`` and the filter list while it is open, and the trace reads
  those in place of the program's own (a program that had replaced ``showwarning`` found the
  default there, baked into its graph);
- it marks the filters changed on the way in and out, which empties every module's record of the
  warnings already shown: after each compile, a warning the program had shown once (the
  "default" action) showed again.

So ``muted()`` replaces only the hook that displays a warning once the filters let it through
(``warnings._showwarnmsg``, private, which CPython's ``warn`` calls), and ``recorded(action)``
gives one short real call (never a trace) a filter list of its own, then puts the program's very
list back, without marking the filters changed.
"""

from __future__ import annotations

import contextlib
import warnings


@contextlib.contextmanager
def muted():
    """Warnings pass the program's filters as usual (an "error" filter still raises), and none is
    displayed."""
    display = warnings._showwarnmsg
    warnings._showwarnmsg = _dropped
    try:
        yield
    finally:
        warnings._showwarnmsg = display


def _dropped(message) -> None:
    pass


@contextlib.contextmanager
def recorded(action: str = "always"):
    """``with recorded() as caught:`` one real call, whose warnings are listed in ``caught``
    (``warnings.WarningMessage``), none displayed; ``action="ignore"`` drops them instead."""
    filters, display = warnings.filters, warnings._showwarnmsg
    caught: list = []
    warnings.filters = [(action, None, Warning, None, 0)]
    warnings._showwarnmsg = caught.append
    try:
        yield caught
    finally:
        warnings.filters, warnings._showwarnmsg = filters, display

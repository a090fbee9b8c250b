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

The first compile of a process also imports modules (sympy, through torch's symbolic shapes)
that add a filter of their own, and adding one marks the filters changed, at that same cost.

So ``muted()`` replaces only the hook that displays a warning once the filters let it through
(``warnings._showwarnmsg``, private, which CPython's ``warn`` calls), and takes back the mark
that says "shown" (else the program's own run, right after, would not show it); ``recorded()``
gives one short real call (never a trace) a filter list of its own, then puts the program's very
list back, without marking the filters changed.  Inside ``muted()`` an import may add its filter
(for its own warnings) without the mark.
"""

from __future__ import annotations

import contextlib
import sys
import warnings


@contextlib.contextmanager
def muted():
    """Warnings pass the program's filters as usual (an "error" filter still raises), and none is
    displayed, nor remembered as displayed: the "default", "module" and "once" actions mark a
    warning shown in its module's ``__warningregistry__`` before displaying it, and a mark left
    by a compile would hide it from the program's own run (``_dropped`` takes the mark back)."""
    display, mark_changed = warnings._showwarnmsg, warnings._filters_mutated
    warnings._showwarnmsg, warnings._filters_mutated = _dropped, _unmarked
    try:
        yield
    finally:
        warnings._showwarnmsg, warnings._filters_mutated = display, mark_changed


def _unmarked() -> None:
    pass


def _dropped(message) -> None:
    """Not displayed; the marks the filter's action just made are removed.  (They are new: a
    warning already marked is not displayed at all, so it never reaches here.)"""
    action = _action(message)
    if action not in ("default", "module", "once"):
        return
    text, category = str(message.message), message.category
    registry = _registry_of(message.filename, message.lineno)
    if registry is not None:
        registry.pop((text, category, message.lineno), None)
        if action == "module":
            registry.pop((text, category, 0), None)
    if action == "once":
        warnings.onceregistry.pop((text, category), None)


def _action(message) -> str:
    """The action of the first filter matching ``message``, as CPython's ``warn_explicit`` finds
    it (the module is the file name without ``.py``)."""
    text, module = str(message.message), message.filename
    module = module[:-3] if module.endswith(".py") else module
    for action, pattern, category, module_pattern, lineno in warnings.filters:
        if (pattern is None or pattern.match(text)) and issubclass(message.category, category) \
                and (module_pattern is None or module_pattern.match(module)) \
                and (lineno == 0 or lineno == message.lineno):
            return action
    return warnings.defaultaction


def _registry_of(filename: str, lineno: int):
    """The ``__warningregistry__`` of the frame the warning names (it is on the stack: ``warn``
    runs inside the call that warned)."""
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_filename == filename and frame.f_lineno == lineno:
            return frame.f_globals.get("__warningregistry__")
        frame = frame.f_back
    return None


@contextlib.contextmanager
def recorded():
    """``with recorded() as caught:`` one real call, whose warnings are listed in ``caught``
    (``warnings.WarningMessage``), none displayed nor marked shown (the "always" action marks
    nothing)."""
    filters, display = warnings.filters, warnings._showwarnmsg
    caught: list = []
    warnings.filters = [("always", None, Warning, None, 0)]
    warnings._showwarnmsg = caught.append
    try:
        yield caught
    finally:
        warnings.filters, warnings._showwarnmsg = filters, display

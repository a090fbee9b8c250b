"""Graphs that warn: eager shows a warning on every call (through the filters as they are
then: an "error" filter raises it); a replayed program runs no Python, so it would do neither.

``GraphWarnings`` records what warned while a graph's first trace ran (the inference program
or a training plan: ``F.mse_loss`` of mismatched sizes warns from Python, ``torch.tensor`` of a
tensor from its binding).  Every replay then issues those warnings again, before the device run
(``reissue``), under the caller's filters of the moment and with a registry per compiled graph
(the "default" action shows a warning once per graph, as eager shows it once per call site).
When a filter turns one into an error, the call runs eagerly instead, so the error comes from
eager itself, after exactly the writes eager makes before it.  Every warning counts, whichever
file it names (the graph's calls pass through the bridge's own code, so the file does not say
whose it is): one that was not the graph's would be shown again, never change an answer.
"""

from __future__ import annotations

import warnings


class GraphWarnings:
    """``with GraphWarnings() as seen:`` ... ``seen.caught``: what warned inside, recorded and
    not shown (the call that follows issues them).  Not ``warnings.catch_warnings``: that marks
    the filters changed on the way in and out, which empties every module's record of the
    warnings already shown, so each warning the program had shown once would show again after
    a compile.  The program's very filter list and display hook are put back instead."""

    def __init__(self):
        self.caught = []

    def __enter__(self):
        self._kept = warnings.filters, warnings._showwarnmsg
        self.caught = []
        warnings.filters = [("always", None, Warning, None, 0)]
        warnings._showwarnmsg = self.caught.append
        return self

    def __exit__(self, *exc_info):
        warnings.filters, warnings._showwarnmsg = self._kept
        return False


class WarningIsError(Exception):
    """A reissued warning raised: a filter makes it an error now."""


def reissue(recorded, registry: dict) -> None:
    """Issue the ``recorded`` warnings again as eager would issue them now; ``WarningIsError``
    when a filter makes one an error (the caller then runs the call eagerly)."""
    for warning in recorded:
        try:
            warnings.warn_explicit(str(warning.message), warning.category, warning.filename,
                                   warning.lineno, registry=registry)
        except Warning as error:
            raise WarningIsError(f"a filter makes the graph's warning an error "
                                 f"({type(error).__name__}): eager raises it") from None

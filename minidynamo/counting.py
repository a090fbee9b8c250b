"""What happened so far: frames seen, cache hits and misses, compiles, recompiles, fallbacks.

The hook counts its hot-path events in C; everything else is counted here.
"""

from __future__ import annotations

import collections
import collections.abc

from . import _eval_frame

_counts: collections.Counter = collections.Counter()
fallback_reasons: list[str] = []
recompile_reasons: list[str] = []
break_reasons: list[str] = []


def bump(name: str, n: int = 1) -> None:
    _counts[name] += n


def record_fallback(reason: str) -> None:
    _counts["fallbacks"] += 1
    fallback_reasons.append(reason)


def record_break(reason: str) -> None:
    _counts["graph_breaks"] += 1
    break_reasons.append(reason)


def record_recompile(reason: str) -> None:
    _counts["recompiles"] += 1
    recompile_reasons.append(reason)


def snapshot() -> dict:
    """All counters as one dict (the hook's and the Python side's)."""
    stats = _eval_frame.stats()
    stats.pop("threads_with_callback")
    return {**stats, **_counts, "fallback_reasons": list(fallback_reasons),
            "recompile_reasons": list(recompile_reasons), "break_reasons": list(break_reasons)}


def reset() -> None:
    _eval_frame.reset_stats()
    _counts.clear()
    fallback_reasons.clear()
    recompile_reasons.clear()
    break_reasons.clear()


class _CountersView(collections.abc.Mapping):
    """``minidynamo.counters["compiles"]``: a read-only mapping that is always current.  A name
    never counted reads 0 (as in a ``Counter``); ``in``, iteration and ``len`` see the names
    there are (without ``__iter__``, ``in`` would probe ``counters[0], counters[1], ...``
    forever)."""

    def __getitem__(self, name):
        return snapshot().get(name, 0)

    def __contains__(self, name):
        return name in snapshot()

    def __iter__(self):
        return iter(snapshot())

    def __len__(self):
        return len(snapshot())

    def __repr__(self):
        return f"counters({snapshot()})"

    snapshot = staticmethod(snapshot)
    reset = staticmethod(reset)


counters = _CountersView()

"""``explain(fn)(*args)``: run ``fn`` once under a fresh capture and report what happened.

    e = minidynamo.explain(model)(x)
    e.graph_count, e.graph_break_count, e.reasons, e.guards, e.graphs
"""

from __future__ import annotations

import dataclasses
from typing import Any, List

from .backends import lookup_backend


@dataclasses.dataclass
class ExplainOutput:
    graphs: List[Any] = dataclasses.field(default_factory=list)        # fx.GraphModules
    guards: List[str] = dataclasses.field(default_factory=list)        # readable guard strings
    guard_sources: List[str] = dataclasses.field(default_factory=list) # generated guard code
    reasons: List[str] = dataclasses.field(default_factory=list)       # fallbacks, then recompiles
    graph_break_count: int = 0           # frames that fell back to eager (no graph breaks yet)
    output: Any = None                   # what the call returned

    @property
    def graph_count(self) -> int:
        return len(self.graphs)

    # -- the FrameConverter's recorder protocol --
    def on_compile(self, capture, guard_fn):
        self.graphs.append(capture.graph_module)
        self.guards.extend(guard_fn.guard_strings)
        self.guard_sources.append(guard_fn.source)

    def on_fallback(self, reason: str):
        self.graph_break_count += 1
        self.reasons.append(reason)

    def on_recompile(self, reason: str):
        self.reasons.append(f"recompile: {reason}")

    def __str__(self):
        lines = [f"graphs: {self.graph_count}, fallbacks: {self.graph_break_count}"]
        lines += [f"  reason: {r}" for r in self.reasons]
        lines += ["guards:"] + [f"  {g}" for g in self.guards]
        return "\n".join(lines)


def explain(fn, backend="eager"):
    """Return a function that runs ``fn`` under a new capture and returns an ``ExplainOutput``."""
    from .eval_frame import OptimizeContext

    lookup_backend(backend)  # an unknown name fails here, not inside the call

    def run(*args, **kwargs) -> ExplainOutput:
        report = ExplainOutput()
        report.output = OptimizeContext(backend, recorder=report)(fn)(*args, **kwargs)
        return report

    return run

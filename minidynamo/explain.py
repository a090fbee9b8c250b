"""``explain(fn)(*args)``: run ``fn`` once under a fresh capture and report what happened.

    e = minidynamo.explain(model)(x)
    e.graph_count, e.graph_break_count, e.breaks, e.fallback_count, e.reasons, e.guards, e.graphs

``graph_count`` counts the graphs given to the backend (a graph with no operations is not);
``graph_break_count`` the graph breaks (a frame split at an instruction run eagerly, see
docs/graph-breaks.md), each in ``breaks`` with its reason, ``file:line`` and instruction;
``fallback_count`` the frames that ran eagerly whole.  ``reasons`` lists breaks, fallbacks and
recompiles in the order they happened.
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
    reasons: List[str] = dataclasses.field(default_factory=list)       # breaks, fallbacks, recompiles
    breaks: List["BreakInfo"] = dataclasses.field(default_factory=list)
    fallback_count: int = 0              # frames that ran eagerly whole
    output: Any = None                   # what the call returned

    @property
    def graph_count(self) -> int:
        return len(self.graphs)

    @property
    def graph_break_count(self) -> int:
        return len(self.breaks)

    # -- the FrameConverter's recorder protocol --
    def on_compile(self, capture, guard_fn, has_ops=True):
        if has_ops:
            self.graphs.append(capture.graph_module)
        self.guards.extend(guard_fn.guard_strings)
        self.guard_sources.append(guard_fn.source)

    def on_break(self, state):
        info = BreakInfo(state.reason, state.where, state.inst.name, state.code.co_qualname)
        self.breaks.append(info)
        self.reasons.append(str(info))

    def on_fallback(self, reason: str):
        self.fallback_count += 1
        self.reasons.append(reason)

    def on_recompile(self, reason: str):
        self.reasons.append(f"recompile: {reason}")

    def __str__(self):
        lines = [f"graphs: {self.graph_count}, graph breaks: {self.graph_break_count}, fallbacks: {self.fallback_count}"]
        lines += [f"  reason: {r}" for r in self.reasons]
        lines += ["guards:"] + [f"  {g}" for g in self.guards]
        return "\n".join(lines)


@dataclasses.dataclass
class BreakInfo:
    reason: str          # why the instruction could not be traced
    where: str           # file:line
    instruction: str     # the opcode run eagerly
    function: str

    def __str__(self):
        return f"graph break in {self.function} at {self.where} ({self.instruction}): {self.reason}"


def explain(fn, backend="eager"):
    """Return a function that runs ``fn`` under a new capture and returns an ``ExplainOutput``."""
    from .eval_frame import OptimizeContext

    lookup_backend(backend)  # an unknown name fails here, not inside the call

    def run(*args, **kwargs) -> ExplainOutput:
        report = ExplainOutput()
        report.output = OptimizeContext(backend, recorder=report)(fn)(*args, **kwargs)
        return report

    return run

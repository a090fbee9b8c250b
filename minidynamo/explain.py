"""``explain(fn)(*args)``: run ``fn`` once under a fresh capture and report what happened.

    e = minidynamo.explain(model)(x)
    e.graph_count, e.graph_break_count, e.breaks, e.fallback_count, e.reasons, e.guards, e.graphs

``graph_count`` counts the graphs given to the backend (a graph with no operations is not);
``graph_break_count`` the graph breaks (a frame split at an instruction run eagerly, see
docs/graph-breaks.md), each in ``breaks`` with its reason, ``file:line`` and instruction;
``fallback_count`` the frames that ran eagerly whole.  ``reasons`` lists breaks, fallbacks and
recompiles in the order they happened.

Every artifact ``MINIDYNAMO_LOG`` can print is also a field, one entry per compiled frame:
``graph_codes`` (each node with the user line that made it), ``guard_sources`` (each check
with the line that needed it; ``guard_origins`` lines up with ``guards``), ``reader_sources``
and ``compiled_fn_sources`` (what runs on a hit; for a graph break, the generated entry),
``trace`` (the ``trace`` topic's lines: each instruction with the symbolic stack after it) and
``xla`` (the ``xla`` topic's lines).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from typing import Any, List

from .backends import lookup_backend
from .logs import get_logger


@dataclasses.dataclass
class ExplainOutput:
    graphs: List[Any] = dataclasses.field(default_factory=list)        # fx.GraphModules
    guards: List[str] = dataclasses.field(default_factory=list)        # readable guard strings
    guard_origins: List[str] = dataclasses.field(default_factory=list) # per guard: "f.py:4 in f"
    guard_sources: List[str] = dataclasses.field(default_factory=list) # generated guard code
    graph_codes: List[str] = dataclasses.field(default_factory=list)   # print_readable, with "# File: ..."
    reader_sources: List[str] = dataclasses.field(default_factory=list)       # graph-input readers
    compiled_fn_sources: List[str] = dataclasses.field(default_factory=list)  # the hit path
    trace: List[str] = dataclasses.field(default_factory=list)         # MINIDYNAMO_LOG=trace lines
    xla: List[str] = dataclasses.field(default_factory=list)           # MINIDYNAMO_LOG=xla lines
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
    def on_compile(self, capture, guard_fn, compiled_fn=None, has_ops=True):
        if has_ops:
            self.graphs.append(capture.graph_module)
            self.graph_codes.append(capture.graph_module.print_readable(print_output=False))
        self.guards.extend(guard_fn.guard_strings)
        self.guard_origins.extend(getattr(g, "origin", "") for g in guard_fn.guards)
        self.guard_sources.append(guard_fn.source)
        if compiled_fn is not None:
            self.reader_sources.append(getattr(compiled_fn.read_inputs, "source", ""))
            self.compiled_fn_sources.append(compiled_fn.source)

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


class _Lines(logging.Handler):
    """Keeps every message; passes on to the logger's ancestors only what they would have got
    without the collection (records at or above the level it had, if it propagated)."""

    def __init__(self, lines: list, logger: logging.Logger):
        super().__init__(logging.DEBUG)
        self.lines = lines
        self.forward_from = logger.getEffectiveLevel() if logger.propagate else None
        self.parent = logger.parent

    def emit(self, record):
        self.lines.extend(record.getMessage().splitlines())
        if self.forward_from is not None and record.levelno >= self.forward_from and self.parent is not None:
            self.parent.handle(record)


@contextlib.contextmanager
def _collect(topic: str, lines: list):
    """Copy one log topic's messages into ``lines`` while the block runs.  The topic's level
    drops to DEBUG meanwhile; the program's own logging setup (``basicConfig``) must not then
    start printing every traced instruction, so the records stop propagating except as before."""
    logger = get_logger(topic)
    handler, level, propagate = _Lines(lines, logger), logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate


@dataclasses.dataclass
class BreakInfo:
    reason: str          # why the instruction could not be traced
    where: str           # file:line
    instruction: str     # the opcode run eagerly
    function: str

    def __str__(self):
        return f"graph break in {self.function} at {self.where} ({self.instruction}): {self.reason}"


def _unoptimized(fn):
    """What an already optimized function wraps, however deep (explained under the new capture:
    the wrapper's own would compile it out of the report's sight).  A ``disable``d one stays."""
    from . import _eval_frame

    while isinstance(fn, _eval_frame.Watched) and fn.callback is not None:
        fn = fn.fn
    return fn


@contextlib.contextmanager
def _watched_by(module, converter):
    """An optimized module (and the optimized modules it wraps) watched by ``converter`` while
    the block runs: called as itself, hooks on the wrapper included.  A disabled one stays."""
    from .eval_frame import OptimizedModule

    wrappers = []
    while isinstance(module, OptimizedModule) and module.__dict__["_minidynamo_converter"] is not None:
        wrappers.append((module, module.__dict__["_minidynamo_converter"]))
        module = module._orig_mod
    try:
        for wrapper, _ in wrappers:
            wrapper.__dict__["_minidynamo_converter"] = converter
            wrapper._watch()
        yield
    finally:
        for wrapper, own in wrappers:
            wrapper.__dict__["_minidynamo_converter"] = own
            wrapper._watch()


def explain(fn, backend="eager"):
    """Return a function that runs ``fn`` under a new capture and returns an ``ExplainOutput``."""
    from .eval_frame import OptimizeContext, OptimizedModule

    lookup_backend(backend)  # an unknown name fails here, not inside the call
    fn = _unoptimized(fn)

    def run(*args, **kwargs) -> ExplainOutput:
        report = ExplainOutput()
        context = OptimizeContext(backend, recorder=report)
        with _collect("trace", report.trace), _collect("xla", report.xla):
            if isinstance(fn, OptimizedModule):
                with _watched_by(fn, context.converter):
                    report.output = fn(*args, **kwargs)
            else:
                report.output = context(fn)(*args, **kwargs)
        return report

    return run

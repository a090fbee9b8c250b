"""Graph-input readers: re-read tensors (arguments, module parameters and buffers) on
every call, so a weight updated in place is seen without recompiling.

The reader is generated Python (``reader.source`` shows it); where every read has a native
form it runs as one native call (``fast_path.native_reader``: the same reads as ops), and
where every input is an argument, as ``ArgumentReader``."""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from . import fast_path, native
from .codegen import exec_generated, signature
from .guard import Guard
from .planner import ConstPool, Planner
from .source import FrameInfo, Source


def compile_reader(sources: Sequence[Source], frame_info: FrameInfo,
                   guards: Iterable[Guard] = (), guard_fn: Any = None) -> Any:
    """A generated ``reader(func, *args) -> list`` that re-reads ``sources`` in order.

    Pass the entry's ``guards`` to let it read module parameters, buffers and submodules
    straight from ``_parameters``/``_buffers``/``_modules`` where the guards verify the
    module's exact type (with a plain-getattr fallback, so the read is always what
    ``module.attr`` gives).  Meant to run right after those guards passed.  Pass their
    ``guard_fn`` too: where it is a FastGuard holding every input, a call right after it passed
    takes the values it read (``fast_path.hand_off``) instead of reading them again.
    """
    planner = Planner(frame_info, ConstPool(), mode="reader")
    planner.learn(guards)
    results = [planner.value_of(source) for source in sources]
    reader = native.argument_reader(sources, frame_info)
    if reader is not None:
        reader.source = (f"# Runs in C (guards._guard_helpers.ArgumentReader), like:\n"
                         f"def ___reader({signature(frame_info)}):\n    return [{', '.join(results)}]\n")
        return reader
    lines = [f"def ___reader({signature(frame_info)}):"]
    lines += [f"    {step.var} = {step.expr}  # {step.label}" for step in planner.steps]
    lines.append(f"    return [{', '.join(results)}]")
    text = "\n".join(lines) + "\n"
    python = exec_generated(text, planner.consts.namespace, "___reader", "reader")
    python.source = text
    reader = fast_path.native_reader(planner.steps, results, frame_info, planner.consts.namespace)
    if reader is None:
        reader = python
    else:
        reader.source = f"# Runs natively (guards._tensor_match.Reader), as {len(reader.program)} ops:\n{text}"
        reader.python = python   # the generated twin: same reads, same answers (tests compare them)
    handed = fast_path.hand_off(guard_fn, getattr(guard_fn, "var_of", {}), sources, reader)
    if handed is None:
        return reader
    handed.source = ("# Right after the guard's native fast path passed for the same call: the inputs it "
                     "read (guards._tensor_match.HandOff); else:\n" + reader.source)
    handed.python = python
    return handed

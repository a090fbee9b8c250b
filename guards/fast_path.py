"""The native fast path: the steps a guard's common call runs, as ``FastGuard`` ops.

The planner records each step twice, as Python text (what ``source`` shows and the generated
function runs) and as data (``Read.how``, ``Check.native``).  This module turns the data of the
steps the memo cannot vouch for (``memo.fast_path_steps``; every step when there is no memo) into
the op list of ``_tensor_match.FastGuard``, which runs them, then the tensor checks, in one call
without a Python frame.  A step without a native form (a block, a closure read, a length check,
...) means no FastGuard: the generated Python runs instead, with the same answers.

    ___guard(___func, L_self, L_x)       # generated: pins, memo.valid(), volatile steps, tensors
    FastGuard(...)(func, self, x)        # the same, natively; ___full(...) when a pin or the memo fails
"""

from __future__ import annotations

from typing import Any, Sequence

from . import native
from .planner import FUNC, Block, Read, local_var
from .source import FrameInfo

# FastGuard's op codes (the enum Op of _tensor_match.cpp, in order).
_OPS = {name: code for code, name in enumerate(
    ("attr", "item", "builtin", "const", "is", "type_is", "eq", "call_is", "call_eq", "call_true", "not_in"))}


def fast_guard(steps: list, pins: dict, memo: Any, values: Sequence[str], fallback: Any,
               frame_info: FrameInfo, namespace: dict) -> Any:
    """A ``FastGuard`` running ``steps`` natively, or None when some step has no native form
    (or the helper is not built): the generated Python then runs instead.

    ``pins`` maps argument variables to the names of the objects they must be, ``memo`` is the
    DictMemo vouching for the rest (None: ``steps`` are all of the guard), ``values`` the memo's
    committed variables, ``fallback`` what runs when a pin or the memo fails."""
    if not native.compiled() or not hasattr(native.cpp_helpers, "FastGuard"):
        return None
    registers = {FUNC: 0, **{local_var(name): 1 + i for i, name in enumerate(frame_info.arg_names)}}
    for var in values:
        registers[var] = len(registers)
    program: list[tuple] = []
    tensors: list[tuple] = []

    def new_register(var: str) -> int:
        registers[var] = len(registers)
        return registers[var]

    def operand(name: str) -> int:
        """The register of a variable, or of a constant loaded from the namespace."""
        if name not in registers:
            if name not in namespace:
                raise _NoNativeForm(name)
            program.append((_OPS["const"], new_register(name), namespace[name]))
        return registers[name]

    try:
        for step in steps:
            if isinstance(step, Block):
                return None
            if isinstance(step, Read):
                how = step.how or ("",)
                if how[0] in ("attr", "item"):
                    base = operand(how[1])
                    program.append((_OPS[how[0]], new_register(step.var), base, how[2]))
                elif how[0] == "builtin":
                    g, b = operand(how[1]), operand(how[2])
                    program.append((_OPS["builtin"], new_register(step.var), g, b, how[3]))
                elif how[0] == "const":
                    program.append((_OPS["const"], new_register(step.var), namespace[how[1]]))
                else:
                    return None
                continue
            if step.batched is not None:
                tensors.append((operand(step.batched[0]), step.batched[1]))
                continue
            for check in step.checks:
                if check.native is None:
                    return None
                op, *rest = check.native
                if op in ("is", "type_is", "eq"):
                    program.append((_OPS[op], operand(rest[0]), rest[1]))
                elif op in ("call_is", "call_eq"):
                    program.append((_OPS[op], rest[0], rest[1]))
                elif op == "call_true":
                    program.append((_OPS[op], namespace[rest[0]]))
                elif op == "not_in":
                    program.append((_OPS[op], rest[0], operand(rest[1])))
                else:
                    return None
    except _NoNativeForm:
        return None
    pin_pairs = tuple((frame_info.arg_names.index(var[len("L_"):]), namespace[obj]) for var, obj in pins.items())
    return native.cpp_helpers.FastGuard(len(frame_info.arg_names), pin_pairs, memo, len(values), len(registers),
                                 tuple(program), tensors, fallback)


class _NoNativeForm(Exception):
    """A step names something the native program cannot hold."""



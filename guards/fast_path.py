"""The native fast path: the steps a guard's common call runs, as ``FastGuard`` ops.

The planner records each step twice, as Python text (what ``source`` shows and the generated
function runs) and as data (``Read.how``, ``Check.native``).  This module turns the data of the
steps the memo cannot vouch for (``memo.fast_path_steps``; every step when there is no memo) into
the op list of ``_tensor_match.FastGuard``, which runs them, then the tensor checks, in one call
without a Python frame.  A step without a native form (a block, a closure read, a length check,
...) means no FastGuard: the generated Python runs instead, with the same answers.

    ___guard(___func, L_self, L_x)       # generated: pins, memo.valid(), volatile steps, tensors
    FastGuard(...)(func, self, x)        # the same, natively; ___full(...) when a pin or the memo fails

A generated reader's reads become a ``Reader`` the same way (``native_reader``); and since a
passing fast path holds every tensor it checked in a register, ``hand_off`` lets it keep the
graph inputs for the reader that runs right after it (``HandOff``), which then reads nothing.
"""

from __future__ import annotations

from typing import Any, Sequence

from . import native
from .guard import WeakPin
from .planner import FUNC, Block, Read, local_var
from .source import FrameInfo

# FastGuard's op codes (the enum Op of _tensor_match.cpp, in order).
_OPS = {name: code for code, name in enumerate(
    ("attr", "item", "builtin", "const", "is", "type_is", "eq", "call_is", "call_eq", "call_true", "not_in",
     "shortcut", "lacks", "is_weak", "call_with", "generic_attr"))}


class _Program:
    """Ops over numbered registers: ``func``, the arguments, then ``given`` variables, then one
    register per read (constants are loaded into registers where an op needs them there)."""

    def __init__(self, frame_info: FrameInfo, namespace: dict, given: Sequence[str] = ()):
        self.namespace = namespace
        self.registers = {FUNC: 0, **{local_var(name): 1 + i for i, name in enumerate(frame_info.arg_names)}}
        for var in given:
            self.registers[var] = len(self.registers)
        self.ops: list[tuple] = []

    def _new_register(self, var: str) -> int:
        self.registers[var] = len(self.registers)
        return self.registers[var]

    def operand(self, name: str) -> int:
        """The register of a variable, or of a constant loaded from the namespace."""
        if name not in self.registers:
            if name not in self.namespace:
                raise _NoNativeForm(name)
            self.ops.append((_OPS["const"], self._new_register(name), self.namespace[name]))
        return self.registers[name]

    def read(self, step: Read) -> None:
        how = step.how or ("",)
        if how[0] in ("attr", "item", "generic_attr"):
            base = self.operand(how[1])
            self.ops.append((_OPS[how[0]], self._new_register(step.var), base, how[2]))
        elif how[0] == "builtin":
            g, b = self.operand(how[1]), self.operand(how[2])
            self.ops.append((_OPS["builtin"], self._new_register(step.var), g, b, how[3]))
        elif how[0] == "const":
            self.ops.append((_OPS["const"], self._new_register(step.var), self.namespace[how[1]]))
        elif how[0] == "shortcut" and type(how[2]) is str:
            holder, shadows, base = self.operand(how[1]), tuple(map(self.operand, how[3])), self.operand(how[4])
            self.ops.append((_OPS["shortcut"], self._new_register(step.var), holder, base, how[2], shadows))
        else:
            raise _NoNativeForm(step.expr)

    def check(self, check) -> None:
        if check.native is None:
            raise _NoNativeForm(check.test)
        op, *rest = check.native
        if op in ("is", "type_is", "eq", "is_weak"):
            self.ops.append((_OPS[op], self.operand(rest[0]), rest[1]))
        elif op in ("call_is", "call_eq"):
            self.ops.append((_OPS[op], rest[0], rest[1]))
        elif op == "call_true":
            self.ops.append((_OPS[op], self.namespace[rest[0]]))
        elif op == "call_with":
            self.ops.append((_OPS[op], self.namespace[rest[0]], tuple(map(self.operand, rest[1]))))
        elif op == "not_in":
            self.ops.append((_OPS[op], rest[0], self.operand(rest[1])))
        elif op == "lacks":
            self.ops.append((_OPS[op], self.operand(rest[0]), rest[1]))
        else:
            raise _NoNativeForm(op)


def fast_guard(steps: list, pins: dict, memo: Any, values: Sequence[str], fallback: Any,
               frame_info: FrameInfo, namespace: dict) -> Any:
    """A ``FastGuard`` running ``steps`` natively, or None when some step has no native form
    (or the helper is not built): the generated Python then runs instead.

    ``pins`` maps argument variables to the names of the objects they must be, ``memo`` is the
    DictMemo vouching for the rest (None: ``steps`` are all of the guard), ``values`` the memo's
    committed variables, ``fallback`` what runs when a pin or the memo fails."""
    if not native.compiled() or not hasattr(native.cpp_helpers, "FastGuard"):
        return None
    program = _Program(frame_info, namespace, values)
    tensors: list[tuple] = []
    try:
        for step in steps:
            if isinstance(step, Block):
                return None
            if isinstance(step, Read):
                program.read(step)
            elif step.batched is not None:
                tensors.append((program.operand(step.batched[0]), step.batched[1]))
            else:
                for check in step.checks:
                    program.check(check)
    except _NoNativeForm:
        return None
    pin_pairs = tuple((frame_info.arg_names.index(var[len("L_"):]), namespace[obj], type(namespace[obj]) is WeakPin)
                      for var, obj in pins.items())
    guard = native.cpp_helpers.FastGuard(len(frame_info.arg_names), pin_pairs, memo, len(values),
                                         len(program.registers), tuple(program.ops), tensors, fallback)
    guard.registers = dict(program.registers)   # variable -> register (for hand_off)
    return guard


def native_reader(steps: list, results: Sequence[str], frame_info: FrameInfo, namespace: dict) -> Any:
    """A ``Reader`` running a generated reader's ``steps`` (reads only) natively and returning the
    variables ``results``, or None when some read has no native form (or the helper is not built)."""
    if not native.compiled() or not hasattr(native.cpp_helpers, "Reader"):
        return None
    program = _Program(frame_info, namespace)
    try:
        for step in steps:
            if not isinstance(step, Read):
                return None
            program.read(step)
        outputs = tuple(program.operand(var) for var in results)
    except _NoNativeForm:
        return None
    return native.cpp_helpers.Reader(len(frame_info.arg_names), len(program.registers), tuple(program.ops), outputs)


def hand_off(guard_fn: Any, var_of: dict, sources: Sequence, reader: Any) -> Any:
    """A ``HandOff`` that answers ``reader``'s call with the values ``guard_fn`` (a FastGuard) read
    for ``sources`` when its fast path just passed for that very call, or None when the guard
    does not hold every source in a register (``var_of``: the guard planner's source -> variable)."""
    registers = getattr(guard_fn, "registers", None)
    if registers is None or not hasattr(native.cpp_helpers, "HandOff"):
        return None
    wanted = [registers.get(var_of.get(source)) for source in sources]
    if any(register is None for register in wanted):
        return None
    guard_fn.hand_off(tuple(wanted))
    return native.cpp_helpers.HandOff(guard_fn, reader)


class _NoNativeForm(Exception):
    """A step names something the native program cannot hold."""

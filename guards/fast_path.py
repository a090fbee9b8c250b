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

import ast
from typing import Any, Sequence

from . import native
from .guard import WeakPin
from .planner import FUNC, Block, Read, local_var
from .source import FrameInfo

# FastGuard's op codes (the enum Op of _tensor_match.cpp, in order).
_OPS = {name: code for code, name in enumerate(
    ("attr", "item", "builtin", "const", "is", "type_is", "eq", "call_is", "call_eq", "call_true", "not_in",
     "shortcut", "lacks", "is_weak", "call_with", "generic_attr", "same", "not_same", "distinct", "keys",
     "lookup_is", "getattr_is", "skip_if_is", "len_is", "call_read"))}
# LOOKUP_IS / GETATTR_IS flags (program.h)
_EXPECT_MISSING, _ON_TYPE = 1, 2


class _Program:
    """Ops over numbered registers: ``func``, the arguments, then ``given`` variables, then one
    register per read (constants are loaded into registers where an op needs them there)."""

    def __init__(self, frame_info: FrameInfo, namespace: dict, given: Sequence[str] = ()):
        self.namespace = namespace
        self.registers = {FUNC: 0, **{local_var(name): 1 + i for i, name in enumerate(frame_info.arg_names)}}
        for var in given:
            self.registers[var] = len(self.registers)
        self.n_registers = len(self.registers)
        self.ops: list[tuple] = []

    def _new_register(self, var: str) -> int:
        self.registers[var] = self.n_registers
        self.n_registers += 1
        return self.registers[var]

    def block(self, block: Block, emit) -> None:
        """A block as a forward jump: ``SKIP_IF_IS`` over its ops when its variable is the pinned
        constant.  What it reads stays private: a later op loads it again, never relying on a
        register the jump may have left empty."""
        if block.skip_if is None:
            raise _NoNativeForm(block.condition)
        var, constant = block.skip_if
        register, known = self.operand(var), set(self.registers)
        at = len(self.ops)
        self.ops.append(None)
        emit(block.steps)
        self.ops[at] = (_OPS["skip_if_is"], register, self.namespace[constant], len(self.ops) - at - 1)
        for name in set(self.registers) - known:
            del self.registers[name]

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
        else:                   # the generated expression itself, called from the program
            function, operands = self._as_function(step.expr)
            self.ops.append((_OPS["call_read"], self._new_register(step.var), function, operands))

    def _as_function(self, expr: str) -> tuple:
        """(a function of the registers ``expr`` names that evaluates it, those registers): the
        generated guard's own text, so the program decides exactly as the generated Python."""
        try:
            names = sorted({node.id for node in ast.walk(ast.parse(expr, mode="eval"))
                            if isinstance(node, ast.Name) and node.id in self.registers})
            function = eval(f"lambda {', '.join(names)}: ({expr})", self.namespace)   # noqa: S307 - our own text
        except SyntaxError:
            raise _NoNativeForm(expr) from None
        return function, tuple(self.registers[name] for name in names)

    def check(self, check) -> None:
        if check.native is None:   # a rare test: its text, called from the program
            function, operands = self._as_function(check.test)
            self.ops.append((_OPS["call_with"], function, operands))
            return
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
        elif op in ("same", "not_same"):
            self.ops.append((_OPS[op], self.operand(rest[0]), self.operand(rest[1])))
        elif op == "len_is":
            self.ops.append((_OPS[op], self.operand(rest[0]), rest[1]))
        elif op == "distinct":
            self.ops.append((_OPS[op], tuple(map(self.operand, rest[0]))))
        elif op == "keys":
            self.ops.append((_OPS[op], self.operand(rest[0]), self.namespace[rest[1]]))
        elif op in ("lookup_is", "getattr_is"):       # (src, name, expected or None, missing, on type)
            src, name, expected, missing, on_type = rest
            flags = (_EXPECT_MISSING if missing else 0) | (_ON_TYPE if on_type else 0)
            self.ops.append((_OPS[op], self.operand(src), name,
                             None if missing else self.namespace[expected], flags))
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

    def emit(steps, in_block=False):
        for step in steps:
            if isinstance(step, Block):
                program.block(step, lambda inner: emit(inner, True))
            elif isinstance(step, Read):
                program.read(step)
            elif step.batched is not None:
                if in_block:           # (the batch runs after the program, on every call)
                    raise _NoNativeForm("a batched tensor check inside a block")
                tensors.append((program.operand(step.batched[0]), step.batched[1]))
            else:
                for check in step.checks:
                    program.check(check)
    try:
        emit(steps)
    except _NoNativeForm:
        return None
    pin_pairs = tuple((frame_info.arg_names.index(var[len("L_"):]), namespace[obj], type(namespace[obj]) is WeakPin)
                      for var, obj in pins.items())
    guard = native.cpp_helpers.FastGuard(len(frame_info.arg_names), pin_pairs, memo, len(values),
                                         program.n_registers, tuple(program.ops), tensors, fallback)
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
    return native.cpp_helpers.Reader(len(frame_info.arg_names), program.n_registers, tuple(program.ops), outputs)


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

"""Python exceptions the traced code raises and its own ``try`` statement catches.

The tracer runs the frame's Python on this call's values.  Where that Python raises (a
missing key, an index out of range, ``1 // 0`` on constants) the variable raises
``exc.ProgramRaises`` carrying the exception CPython would raise.  If the raising instruction
lies in a ``try`` statement, CPython unwinds to the handler the exception table names: it pops
the stack to the handler's depth, pushes the exception (after the offset of the raising
instruction when the entry says so), and jumps.  ``unwind`` does the same, and the handler's
bytecode then runs like any other (the opcodes below):

    try:                                 d[k]          -> ProgramRaises(KeyError(k))
        v = d[k]                         unwind        -> stack[:depth] + [exc], jump
    except KeyError:                     PUSH_EXC_INFO; LOAD_GLOBAL KeyError; CHECK_EXC_MATCH
        v = 0                            POP_JUMP_FORWARD_IF_FALSE; POP_TOP ... POP_EXCEPT

An exception no handler of a frame catches leaves that frame: an inlined callee's passes to its
caller's ``CALL``, which unwinds in the caller; the root frame's reaches ``convert_frame``,
which runs the frame eagerly for calls that take the same path (``exc.ProgramRaises``).

Guards need nothing new: the exception followed from values the trace read and guarded (the
dict's keys, the list's length, the constants), so every call the guards pass raises it again
at the same instruction, and takes the same handler.

Not modelled (``Unsupported``; the frame runs eagerly as before): an exception reaching a
``with`` block's cleanup (its ``__exit__`` would run), a use of the exception object
(``except KeyError as e: print(e)``), a graph break inside a handler (``graph_break.stop_values``
refuses it).  An exception leaving a generator's body finishes the generator and propagates
to whoever pulled the item (variables/generators.py).
"""

from __future__ import annotations

import dis
import weakref

from ..exc import ProgramRaises, Unsupported
from .variables.base import VariableTracker
from .variables.constant import ConstantVariable

_entries: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()   # code -> exception_entries(code)


def exception_entries(code, instructions) -> list:
    """Per instruction of ``instructions`` (``translator.decode``'s, EXTENDED_ARG folded):
    ``(handler index, stack depth, push lasti)`` of the exception table entry covering it, or
    None where an exception leaves the frame.  (Read with ``dis``: the table's depths are
    CPython's own.)  All None if the two listings disagree: then nothing is caught."""
    if code not in _entries:
        listing = [i for i in dis.get_instructions(code) if i.opname != "EXTENDED_ARG"]
        if [i.opname for i in listing] != [inst.name for inst in instructions]:
            _entries[code] = [None] * len(instructions)
            return _entries[code]
        offsets = [i.offset for i in listing]
        index_at = {offset: i for i, offset in enumerate(offsets)}
        table = dis.Bytecode(code).exception_entries
        entries = []
        for offset in offsets:
            entry = next((e for e in table if e.start <= offset < e.end), None)
            entries.append(None if entry is None else (index_at[entry.target], entry.depth, entry.lasti))
        _entries[code] = entries
    return _entries[code]


class ExceptionVariable(VariableTracker):
    """An exception the traced code raised: only its class is used (``except`` matching)."""

    def __init__(self, exception: BaseException):
        super().__init__()
        self.exception = exception

    def python_type(self):
        return type(self.exception)

    def __repr__(self) -> str:
        return f"ExceptionVariable({type(self.exception).__name__})"


def unwind(tx, error: ProgramRaises, index: int) -> bool:
    """Send ``error``, raised by instruction ``index`` of ``tx``'s frame, to the handler that
    covers it (True), or say it leaves the frame (False)."""
    if error.exception is None:
        return False
    entry = exception_entries(tx.code, tx.instructions)[index]
    if entry is None:
        return False
    target, depth, push_lasti = entry
    if tx.instructions[target].name == "PUSH_EXC_INFO" and target + 1 < len(tx.instructions) \
            and tx.instructions[target + 1].name == "WITH_EXCEPT_START":
        raise Unsupported(f"{type(error.exception).__name__} raised inside a with block in "
                          f"{tx.code.co_qualname} (its __exit__ would see it)") from error
    del tx.stack[depth:]
    if push_lasti:
        tx.push(ConstantVariable(index))   # only RERAISE reads it (for the traceback's line)
    tx.push(ExceptionVariable(error.exception))
    tx.ip = target
    return True


def _caught_classes(vt) -> tuple:
    """The classes an ``except`` clause names (a class or a tuple of classes)."""
    try:
        value = vt.as_python_constant()
    except Unsupported:
        raise Unsupported(f"except clause over {vt}, not a class known at trace time")
    classes = value if isinstance(value, tuple) else (value,)
    if not all(isinstance(c, type) and issubclass(c, BaseException) for c in classes):
        raise Unsupported(f"except clause over {value!r} (CPython raises TypeError)")
    return classes


class ExceptionOpcodes:
    """The opcodes of ``try`` handlers, for ``InstructionTranslatorBase``: ``exc_info`` is the
    frame's stack of exceptions being handled (CPython's ``sys.exc_info()``)."""

    def PUSH_EXC_INFO(self, inst):
        raised = self.pop()
        self.push(self.exc_info[-1] if self.exc_info else ConstantVariable(None))
        self.exc_info.append(raised)
        self.push(raised)

    def POP_EXCEPT(self, inst):
        self.pop()                      # the exception handled before this one
        self.exc_info.pop()

    def CHECK_EXC_MATCH(self, inst):
        classes = _caught_classes(self.pop())
        raised = self.stack[-1]
        if not isinstance(raised, ExceptionVariable):
            raise Unsupported(f"except clause matching {raised}")
        self.push(ConstantVariable(isinstance(raised.exception, classes)))

    def RERAISE(self, inst):
        raised = self.pop()
        if not isinstance(raised, ExceptionVariable):
            raise Unsupported(f"re-raise of {raised}")
        raise ProgramRaises(f"{type(raised.exception).__name__} re-raised (an exception)", raised.exception)

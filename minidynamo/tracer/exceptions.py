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

An attribute the trace finds missing (``AttributeMissing``) at an instruction a handler covers
is raised the same way, as the AttributeError CPython raises there (its message, ``name`` and
``obj``: ``AttributeMissing.as_program_exception``), the absence guarded.

The program's own ``raise`` works the same way.  ``ValueError(f"bad size {n}")`` of a *plain*
exception class (a built-in one, or a program's class statement that adds nothing: no
``__init__``, no ``__str__``) runs no program code, so it is made at trace time from the
arguments' constants (``make_exception``); ``RAISE_VARARGS`` then raises ``ProgramRaises``
with it.  Inside the handler the exception object is a constant of the trace: ``str(e)``,
``e.args`` and ``isinstance(e, ...)`` fold.

A ``with`` block between the raise and the handler is left as its ``__exit__`` leaves it
(``WITH_EXCEPT_START``): grad mode, autocast and TorchFunctionMode blocks restore their mode;
a user's ``__exit__`` in Python is inlined, and may swallow the exception (``contextlib.suppress``).
It gets a stand-in for the traceback (``TracebackVariable``), which only ``is None`` may read.

The exception being handled is one per thread, as in CPython (``handled_exception``): an
inlined callee, or a generator, that handles none sees its caller's, and an exception raised
while one is handled takes it as ``__context__``.  The traced frame's own caller is guarded to
handle none (``exception_being_handled()``); a frame called inside an ``except`` block whose
trace meets a handler is refused there.

Not modelled (``Unsupported``; the frame runs eagerly as before): a user's ``__exit__`` that
reads its traceback or does what the trace cannot (a graph break at the raise then hands the
exception to the real one: breaks/entry.py), an exception object that leaves the trace
(returned, stored, printed).  A graph break inside a handler of an exception the trace
raised moves to the instruction that raised it (``translator.run``): its entry raises it for
real, and the handler's resume function handles that real exception
(``CaughtExceptionVariable``: its class is guarded, its fields are read through its source).
An exception leaving a generator's body finishes the generator and propagates
to whoever pulled the item (variables/generators.py).
"""

from __future__ import annotations

import dis
import weakref

import guards as G

from ..exc import ProgramRaises, Unsupported
from .try_blocks import is_with_cleanup
from .variables.constant import ConstantVariable
from .variables.exception_values import (CaughtExceptionVariable, ExceptionVariable, HandledBefore,
                                        TracebackVariable, make_exception, plain_exception_class)

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


def unwind(tx, error: ProgramRaises, index: int) -> bool:
    """Send ``error``, raised by instruction ``index`` of ``tx``'s frame, to the handler that
    covers it (True), or say it leaves the frame (False)."""
    if error.exception is None:
        return False
    entry = exception_entries(tx.code, tx.instructions)[index]
    if entry is None:
        return False
    target, depth, push_lasti = entry
    if is_with_cleanup(tx.instructions, target) and not _exit_traceable(tx.stack[depth - 1]):
        raise Unsupported(f"{type(error.exception).__name__} raised inside a with block in "
                          f"{tx.code.co_qualname} (its __exit__ would see it)") from error
    fields = error.fields
    if error.exception.__context__ is None and "__context__" not in fields:    # (else chained where raised)
        fields = _chained(error.exception, fields, tx.handled_exception())
    del tx.stack[depth:]
    if push_lasti:
        tx.push(ConstantVariable(index))   # only RERAISE reads it (for the traceback's line)
    caught = ExceptionVariable(error.exception, fields)
    caught.raised_at = getattr(tx.output, "root_position", None)   # the root instruction it came from
    tx.push(caught)
    tx.ip = target
    return True


def _chained(exception, fields: dict, handled) -> dict:
    """Eager makes the exception being handled (``handled``) the ``__context__`` of one raised
    meanwhile.  A real one (caught at run time) differs per call: it goes into the fields (a
    trace-time value, read through its source), not into the trace's exception object."""
    if handled is None or handled.exception is exception:
        return fields
    if isinstance(handled, CaughtExceptionVariable):
        return {**fields, "__context__": handled}
    _cut_context_cycle(handled.exception, exception)
    exception.__context__ = handled.exception
    return fields


def _cut_context_cycle(context, exception) -> None:
    """What CPython's raise does before chaining: if ``exception`` is already on ``context``'s own
    chain (``raise a`` while handling c, whose chain leads back to a), the link to it is cut, so
    that no chain loops (test_raise_does_not_create_context_chain_cycle).  A loop already in the
    chain ends the walk (Floyd's tortoise, as CPython's)."""
    node, slow, toggle = context, context, False
    while (nxt := node.__context__) is not None:
        if nxt is exception:
            node.__context__ = None
            return
        node = nxt
        if node is slow:
            return
        if toggle:
            slow = slow.__context__
        toggle = not toggle


def _restores_itself(exit_vt) -> bool:
    """A grad-mode, autocast or TorchFunctionMode block's ``__exit__``: it restores the mode,
    whatever the exception, and lets it pass (``WITH_EXCEPT_START`` below calls it)."""
    from .variables.ctx_managers import RestoredExit

    return isinstance(exit_vt, RestoredExit)


def _exit_traceable(exit_vt) -> bool:
    """A block's ``__exit__`` the trace can call with an exception: one that restores a mode, or
    a user's ``__exit__`` in Python (inlined; its traceback argument is ``TracebackVariable``).
    The slot below a with-block's cleanup holds the bound ``__exit__`` ``BEFORE_WITH`` looked up,
    whatever the function is called (``Tracked.__exit__ = Tracked.exit_quietly``)."""
    from .variables.functions import UserMethodVariable

    return _restores_itself(exit_vt) or isinstance(exit_vt, UserMethodVariable)


def _exception_of(tx, vt) -> BaseException:
    """What ``raise vt`` raises: the exception, or a new one of a plain class without arguments."""
    if isinstance(vt, CaughtExceptionVariable):
        raise Unsupported(f"raise of {vt} (the exception of this call, raised again: eager does it)")
    if isinstance(vt, ExceptionVariable):
        return vt.exception
    try:
        value = vt.as_python_constant()
    except Unsupported:
        value = None
    if plain_exception_class(value):
        return make_exception(tx, value, [], {}).exception
    raise Unsupported(f"raise of {vt}")


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

    def handled_exception(self):
        """The exception being handled where this frame runs (CPython keeps one per thread): its
        own handler's, else its caller's, up to the traced frame, whose caller handles none
        (guarded; a frame called inside a handler is refused here). None if none."""
        tx = self
        while tx is not None:
            if tx.exc_info:
                return tx.exc_info[-1]
            tx = tx.parent
        if self.output.caller_handling:
            raise Unsupported(f"{self.code.co_qualname} handles an exception while its caller handles "
                              "another (its __context__ and sys.exc_info() are the caller's)")
        if not self.output.guards_none_handled:
            self.output.guards_none_handled = True
            self.output.add_guard(G.torch_state_match("exception_being_handled", False))
        return None

    def PUSH_EXC_INFO(self, inst):
        raised = self.pop()
        self.push(HandledBefore(self.handled_exception(), raised))
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

    def WITH_EXCEPT_START(self, inst):
        """A with block's cleanup: ``__exit__(type, exception, traceback)`` (``unwind`` lets only
        the blocks ``_exit_traceable`` names get here)."""
        exit_vt, raised = self.stack[-4], self.stack[-1]
        if not _exit_traceable(exit_vt) or not isinstance(raised, ExceptionVariable):
            raise Unsupported(f"an exception reaching the __exit__ of {exit_vt}")
        exception = raised.exception
        traceback = ConstantVariable(None) if _restores_itself(exit_vt) else TracebackVariable()
        arguments = [ConstantVariable(type(exception)), raised, traceback]
        self.push(exit_vt.call_function(self, arguments, {}))

    def LOAD_ASSERTION_ERROR(self, inst):
        """A failed ``assert``: the class, called with the message if any, then raised."""
        from .variables.objects import ClassVariable

        self.push(ClassVariable(AssertionError))

    def RAISE_VARARGS(self, inst):
        """``raise`` (the exception being handled again), ``raise E``, ``raise E from C``."""
        where = f"in {self.code.co_qualname}, line {inst.lineno}"
        if inst.arg == 0:
            raised = self.handled_exception()
            if raised is None:
                raise Unsupported(f"bare raise with no exception being handled {where} (RuntimeError)")
            if isinstance(raised, CaughtExceptionVariable):
                raise Unsupported(f"bare raise of {raised} {where} (eager raises it again)")
            raise ProgramRaises(f"{type(raised.exception).__name__} re-raised {where}", raised.exception,
                                raised.fields)
        cause = self.pop() if inst.arg == 2 else None
        raised = self.pop()
        exception = _exception_of(self, raised)
        fields = raised.fields if isinstance(raised, ExceptionVariable) else {}
        if cause is not None:
            is_none = cause.as_python_constant() is None if isinstance(cause, ConstantVariable) else False
            exception.__cause__ = None if is_none else _exception_of(self, cause)
            exception.__suppress_context__ = True
        fields = _chained(exception, fields, self.handled_exception())
        raise ProgramRaises(f"{type(exception).__name__} raised {where}", exception, fields)

    def RERAISE(self, inst):
        raised = self.pop()
        if not isinstance(raised, ExceptionVariable) or isinstance(raised, CaughtExceptionVariable):
            raise Unsupported(f"re-raise of {raised}")
        raise ProgramRaises(f"{type(raised.exception).__name__} re-raised (an exception)", raised.exception,
                            raised.fields)

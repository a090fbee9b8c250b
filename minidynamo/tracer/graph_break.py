"""Graph breaks, the tracer's side: where a root frame may be split, and what its graph hands over.

A frame whose root translator meets an instruction it cannot trace is traced a second time and
stopped right before that instruction (``InstructionTranslator.stop_at``).  The graph then
outputs everything the rest of the frame needs: the live values on the Python stack and the
live locals.  The compiled entry (``minidynamo.breaks``) runs that graph, performs the one
instruction on real values, and calls a *resume function* that continues the original bytecode
after it (and is itself traced, guarded and cached like any frame).

Only instructions whose effect can be performed on real values by plain Python break:

    CALL, CALL_FUNCTION_EX         the call is made eagerly (an inlined callee that could not
                                   be traced then runs as its own watched frame)
    FORMAT_VALUE                   f"{tensor}" formats the real value
    BINARY_SUBSCR                  ``y[y > 0]`` indexes the real value (a boolean mask's result
                                   has a shape only the data decides)
    BEFORE_WITH                    a context manager the trace cannot enter (in C, or an
                                   ``__enter__`` it cannot run) is entered eagerly; the resume
                                   function starts inside the block, its ``__exit__`` on the stack
    POP_JUMP_*_IF_TRUE/FALSE,      the condition (``if x.sum() > 0``) is computed by the graph,
    JUMP_IF_*_OR_POP               its truth eagerly; each branch has its own resume function

Inside a loop body (``for``/``while``) every iteration breaks again: the for loop's iterator
is handed over as the rest of its items (``iterators.rest_of``, ``iter()`` again in the resume
prologue), the resume code keeps the loop from its head, and a resume function that breaks
again gets the original's resume code at the same offset (one code, one cache entry per
iteration).  The frame hook calls each resume function once its entry has returned (the
trampoline in ``_eval_frame.c``'s ``run_entry``), so iterations do not nest frames.

Inside an ``except`` clause the exception being handled is a real one (``CaughtExceptionVariable``,
a handler's resume function starts with it): the entry makes it ``sys.exc_info()``'s for the
eager instruction, and the resume function's prologue re-enters the handler by ``PUSH_EXC_INFO``
of it (the "handling" stack slot), so ``POP_EXCEPT`` puts back what it replaced.

Inside a ``try`` or ``with`` block (in a loop body too) the entry runs the eager instruction
under ``try``: an exception it raises goes to a resume function that starts at the handler the
frame's exception table names (``BreakState.raise_to``), so the frame's own ``except``,
``finally`` or ``__exit__`` sees it.  A grad-mode, autocast(False) or user's with-block open at
the break is re-entered by the resume function's prologue.

Refused (the frame runs eagerly, the reason says which):
  - a loop whose iterator reads something the rest of the frame or the caller can change
    (a dict with a source, a list or dict still held), or pulls from code (map, generators);
    over the caller's list (or enumerate of it) the real iterator is handed over instead
    (``iterators.hands_over_live``);
  - inside an ``except`` clause whose exception the trace made and cannot hand over (the
    program's own ``raise``: a break where the trace raised moves to that instruction,
    ``translator.run``), and inside a TorchFunctionMode block;
  - a cell variable still empty at the break that the rest of the frame may read before
    writing it (eager raises UnboundLocalError there, the resume function's free variable a
    NameError).

Cell variables (a nested function captures the frame's locals) are handed over like locals,
as cells: the entry makes one new cell per call for each, holding the value the trace knew at
the break, the very cell object every closure rebuilt at the break holds (``cell_template``),
and the resume function receives them as its first free variables, so writes after the break
through ``nonlocal`` or the frame itself are seen by both.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import torch
from bytecode import CellVar, Label

from guards.source import LocalSource

from ..breaks.instructions import BREAKABLE, JUMPS, eager_operands
from ..breaks.resume_code import in_prologue, uses_zero_arg_super
from ..exc import Unsupported
from .templates import Templates
from .exceptions import exception_entries
from .translator import decoded
from .variables.base import BoundMethodVariable, NullVariable, VariableTracker, describe
from .variables.containers import IteratorVariable
from .variables import iterator_rebuild
from .variables.iterators import hands_over_live, live_containers, rest_of
from .variables.containers import TupleVariable
from .variables.exception_values import CaughtExceptionVariable, HandledBefore
from .variables.ctx_managers import (AutocastVariable, InferenceModeVariable, GradModeVariable, SetGradEnabledVariable,
                                     _AutocastExitVariable, _ExitVariable, _InferenceModeExit)
from .variables.functions import CellVariable, UserMethodVariable, cell_template
from .variables.new_objects import BuiltinBaseMethod
from .variables.nn_module import ModuleCallVariable
from .variables.tensor import TensorMethodVariable, TensorVariable

BACKWARD_JUMPS = {"JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT", "POP_JUMP_BACKWARD_IF_TRUE",
                  "POP_JUMP_BACKWARD_IF_FALSE", "POP_JUMP_BACKWARD_IF_NONE", "POP_JUMP_BACKWARD_IF_NOT_NONE"}


@dataclasses.dataclass
class BreakState:
    """Where a frame breaks and how its graph's outputs map onto the stack and the locals.

    ``stack`` (bottom first): ``("null",)`` a NULL below a callable, ``("value", i)`` the i-th
    graph-built value, ``("ctx", factory, args)`` the ``__exit__`` of an open with-block, which
    the resume function re-creates by calling ``factory(*args)`` and entering it.  The live
    locals are the values after the stack's: ``locals[k]`` is value ``n_stack_values + k``."""
    code: object
    index: int                    # the instruction's index in the decoded bytecode
    inst: object                  # the bytecode.Instr
    stack: list
    n_stack_values: int
    locals: list
    kw_names: tuple = ()
    targets: dict = dataclasses.field(default_factory=dict)   # label -> index (jump targets)
    reason: str = ""              # why the instruction could not be traced (set by the caller)
    grad_enabled: bool = True     # grad mode at the frame's entry
    cells: list = dataclasses.field(default_factory=list)    # co_cellvars: values after the locals'
    loop_head: Optional[int] = None   # the break lies in a loop starting there (graph_break.loop_head)
    # (handler index, stack depth, push lasti): the exception-table entry covering the instruction,
    # where its exception goes (a resume function starting at that handler), or None
    raise_to: Optional[tuple] = None

    @property
    def where(self) -> str:
        return f"{self.code.co_filename}:{self.inst.lineno}"

    @property
    def jump_target(self) -> Optional[int]:
        return self.targets[self.inst.arg] if self.inst.name in JUMPS else None


# Attributes that read the frame calling them (``sys._getframe``, ``inspect.currentframe``), or
# change how frames started from then on run (``sys.settrace``, ``sys.setprofile``: the frame
# calling them was started before, so eager does not trace it).  With the builtins of
# ``builder.frame_readers``, read as globals: after a break the rest of the frame runs in a
# resume function, another frame (started later, holding only the live locals under other
# names), so a frame that uses one anywhere never breaks.
FRAME_READER_ATTRIBUTES = frozenset({"_getframe", "currentframe", "settrace", "setprofile"})


def frame_reader_in(code, f_globals: dict, f_builtins: dict) -> Optional[str]:
    """The name under which ``code`` reads a frame reader (a global or builtin that is one, or
    an attribute named like one), or None."""
    from .builder import frame_readers

    readers = frame_readers()
    for inst in decoded(code)[0]:
        if inst.name == "LOAD_GLOBAL":
            name = inst.arg[1]
            value = f_globals[name] if name in f_globals else f_builtins.get(name)
            if _is_reader(value, readers):
                return f"{name}()"
        elif inst.name in ("LOAD_ATTR", "LOAD_METHOD") and inst.arg in FRAME_READER_ATTRIBUTES:
            return f".{inst.arg}()"
    return None


def _is_reader(value, readers) -> bool:
    """Whether ``value`` reads the frame itself.  ``warnings.warn`` reads only where the frames
    are, which a resume function shows as the frame's (its caller is the frame's caller: the
    frame hook's trampoline), so a frame naming it may break like any other."""
    # by identity: hashing the program's global would run its __hash__, which eager never calls
    return any(value is reader and kind != "warn" for reader, kind in readers.items())


def refusal(code, index: int, f_globals: dict, f_builtins: dict) -> Optional[str]:
    """Why a break at this root instruction is refused, or None if it may break there.
    (Called only for the opcodes in BREAKABLE.)"""
    if in_prologue(code, index):
        return (f"graph break in the prologue of {code.co_qualname} (where it rebuilds the stack and re-enters "
                "the with-blocks: no place of the original code to resume at)")
    reader = frame_reader_in(code, f_globals, f_builtins)
    if reader is not None:
        return (f"graph break in {code.co_qualname}, which calls {reader}: the rest of the frame would "
                "run in a resume function, another frame")
    return None


def loop_head(code, index: int) -> Optional[int]:
    """The first instruction of the outermost loop whose body holds ``index`` (a backward
    jump's target at or before it, the jump at or after it), or None outside loops.  The
    resume function keeps the bytecode from there on, so its loops jump back as the
    original's did."""
    instructions, targets, _, _ = decoded(code)
    heads = [targets[inst.arg] for j, inst in enumerate(instructions)
             if inst.name in BACKWARD_JUMPS and targets[inst.arg] <= index <= j]
    return min(heads) if heads else None


def live_locals(code, index: int, names) -> list:
    """The locals the rest of the frame may read: a local is live if an instruction from
    ``index`` on, or from the head of the loop ``index`` lies in (the next iteration runs
    it again), reads (or deletes) it."""
    instructions = decoded(code)[0]
    head = loop_head(code, index)
    start = index if head is None else min(head, index)
    used = {inst.arg for inst in instructions[start:] if inst.name in ("LOAD_FAST", "DELETE_FAST")}
    live = sorted(name for name in names if name in used)   # sorted: a resume of a resume has the same
    if uses_zero_arg_super(code) and code.co_varnames[0] in names:
        # super() reads the first local implicitly: it stays live, first (resume_code.argument_names)
        first = code.co_varnames[0]
        live = [first] + [name for name in live if name != first]
    return live


def kept_alive(tx, live, handed) -> list:
    """Locals the rest of the frame never reads, but which hold an object the program has: an
    argument of the frame, a value an earlier break's instruction returned, or a value made in
    the trace that this break makes real anyway (``handed``: the stack's values, which the
    eager instruction receives, such as ``a`` in ``weakref.finalize(a, f)``).  Eager's frame
    keeps it until the frame ends or the name is rebound, so the resume function takes it too
    (unread, it costs no guard).  A ``memoryview`` kept in a local that is never read again
    still pins its ``bytearray``; a finalizer or weak reference of such an object must not fire
    early.  Other values made inside the trace have no holder to mimic: they stay behind."""
    made_real = {id(vt) for vt in handed} | {id(tx.locals[name]) for name in live if name in tx.locals}
    return sorted(name for name, vt in tx.locals.items()
                  if name not in live and not name.startswith("___")   # a resume function's stack parameters
                  and (isinstance(getattr(vt, "source", None), LocalSource) or id(vt) in made_real))


def _seen_by_program(tx, inst) -> set:
    """ids of the stack's values the program itself can reach after the break: the eager
    instruction's operands, and those a local or a cell holds (itself, or inside a container or
    an object).  Any other iterator on the stack is a ``for`` loop's own, which only the loop's
    ``FOR_ITER`` ever sees: it may be handed over as the rest of its items (``rest_of``), which
    the resume function's trace can still iterate."""
    operands = eager_operands(inst.name, inst.arg)
    held = _reachable([*tx.locals.values(), *tx.cells.values()])
    stack = tx.stack

    def shares_an_iterator(vt):        # itself, or one it walks (enumerate(it), zip(it, ...))
        inner = _reachable([vt])
        return held is None or inner is None or any(
            isinstance(x, IteratorVariable) and id(x) in held for x in inner.values())
    return {id(vt) for k, vt in enumerate(stack) if k >= len(stack) - operands or shares_an_iterator(vt)}


def _reachable(roots, limit=5000):
    """The trackers reachable from ``roots`` through the trackers they hold (attributes that
    are trackers, or lists, tuples and dicts of them), by id; None past ``limit`` (too many to
    tell: the caller assumes the worst)."""
    def tracker(value):        # by its type: isinstance would read a real value's __class__,
        return issubclass(type(value), VariableTracker)     # which may be the program's property

    found, todo = {}, [vt for vt in roots if tracker(vt)]
    while todo:
        vt = todo.pop()
        if id(vt) in found:
            continue
        found[id(vt)] = vt
        if len(found) > limit:
            return None
        for value in vars(vt).values():    # (exact containers: a real list subclass's own
            if tracker(value):                        # __iter__ is the program's code)
                todo.append(value)
            elif type(value) in (list, tuple):
                todo += [v for v in value if tracker(v)]
            elif type(value) is dict:
                todo += [v for v in value.values() if tracker(v)]
    return found


def _operand(tx, vt, inst) -> bool:
    """Is ``vt`` one of the operands the eager instruction takes off the stack?"""
    operands = eager_operands(inst.name, inst.arg)
    return any(item is vt for item in tx.stack[len(tx.stack) - operands:]) if operands else False


def _context_of(vt):
    """(factory, args) that re-creates the with-block whose ``__exit__`` is on the stack."""
    manager = vt.manager
    if isinstance(manager, GradModeVariable):
        return (torch.enable_grad if manager.enabled else torch.no_grad, ())
    if isinstance(manager, SetGradEnabledVariable):     # as a with-block, the same as these two
        return (torch.enable_grad if manager.enabled else torch.no_grad, ())
    if isinstance(manager, InferenceModeVariable):
        return (torch.inference_mode, (manager.mode,))
    if isinstance(manager, AutocastVariable):
        a = manager.arguments
        return (torch.autocast, (a.get("device_type"), a.get("dtype"), a.get("enabled", True), a.get("cache_enabled")))
    raise Unsupported(f"graph break inside a with-block over {manager}")


def stop_values(tx, stop_at) -> tuple:
    """At the break: (a tuple of the values the graph must output, the BreakState)."""
    code, index = tx.code, tx.ip
    inst = decoded(code)[0][index]
    if inst.name not in BREAKABLE:
        raise Unsupported(f"graph break at {inst.name} is not supported")
    why = refusal(code, index, tx.f_globals, tx.f_builtins)
    if why is not None:
        raise Unsupported(why)
    handled = tx.exc_info[-1] if tx.exc_info else None
    if handled is not None and not isinstance(handled, CaughtExceptionVariable):
        # made by the trace (raised by it, redirected: translator.run): the resume function
        # could not hold it as the exception being handled
        raise Unsupported(f"graph break inside an except block in {code.co_qualname}")
    if uses_zero_arg_super(code) and code.co_varnames[0] in code.co_cellvars:
        raise Unsupported(f"graph break in {code.co_qualname}, whose zero-argument super() reads its first "
                          "argument from a cell (the resume function could not hand it over)")
    head = loop_head(code, index)
    exits = decoded(code)[3][index]
    # Where an exception of the eager instruction goes: the handler the exception table names
    # (a try statement's, or a with block's cleanup, which calls its __exit__), as in the frame.
    raise_to = exception_entries(code, decoded(code)[0])[index]
    if raise_to is None and (decoded(code)[2][index] or exits):
        raise Unsupported(f"graph break inside a try or with block in {code.co_qualname} whose exception "
                          "table could not be read")
    values, stack, iterated = [], [], []
    seen_by_program = _seen_by_program(tx, inst)
    for vt in tx.stack:
        if isinstance(vt, IteratorVariable) and id(vt) in seen_by_program and iterator_rebuild.recipe(vt) is not None:
            stack.append(("value", len(values)))          # handed over as itself (iterator_rebuild.py)
            values.append(vt)
        elif isinstance(vt, IteratorVariable) and id(vt) in seen_by_program and not _operand(tx, vt, inst):
            raise Unsupported(f"graph break in a loop over an iterator the program also holds ({describe(vt)}), "
                              "which cannot be handed over as itself")
        elif isinstance(vt, IteratorVariable):             # a for loop's own: the rest of its items
            if not hands_over_live(vt):                    # (or itself, reading the caller's list)
                iterated += live_containers(vt)
            stack.append(("iter", len(values)))
            values.append(rest_of(vt, tx))
        elif isinstance(vt, NullVariable):
            stack.append(("null",))
        elif isinstance(vt, HandledBefore):        # re-made by PUSH_EXC_INFO of the exception
            if not isinstance(vt.handling, CaughtExceptionVariable):
                raise Unsupported(f"graph break inside an except block in {code.co_qualname} "
                                  "(its exception was made by the trace)")
            stack.append(("handling", len(values)))
            values.append(vt.handling)
        elif isinstance(vt, (_ExitVariable, _AutocastExitVariable, _InferenceModeExit)):
            stack.append(("ctx", *_context_of(vt)))
            if vt.manager in tx.output.open_grad_switches:     # left by the with-statement's end
                tx.output.open_grad_switches.remove(vt.manager)
        else:
            stack.append(("value", len(values)))
            values.append(vt)
    n_stack = len(values)
    names = live_locals(code, index, list(tx.locals))
    names += kept_alive(tx, names, values)
    values += [tx.locals[name] for name in names]
    for name in code.co_cellvars:
        if tx.cells[name].value is None and read_before_written(code, index, name):
            raise Unsupported(f"the cell variable {name!r} of {code.co_qualname} is empty at the graph break and "
                              "may be read before it is assigned (eager's UnboundLocalError would become a NameError)")
        if deleted_in(code, name):       # the rest of the frame may empty it, then read it
            raise Unsupported(f"the cell variable {name!r} of {code.co_qualname} is deleted in the frame (a read "
                              "after its del: eager's UnboundLocalError would become a NameError after the break)")
    values += [tx.cells[name] for name in code.co_cellvars]
    held = _reachable(values) if iterated else {}
    for container in iterated:           # a snapshot of a list is exact only if nothing else can change it
        if held is None or id(container) in held:
            raise Unsupported(f"graph break inside a for loop in {code.co_qualname} over a list the rest of the "
                              "frame can still change (its iterator reads it live)")
    state = BreakState(code, index, inst, stack, n_stack, names, tuple(tx.kw_names or ()), dict(decoded(code)[1]),
                       cells=list(code.co_cellvars), loop_head=head, raise_to=raise_to)
    return TupleVariable(values), state


CELL_READS = {"LOAD_DEREF", "LOAD_CLASSDEREF", "DELETE_DEREF"}
NO_FALL_THROUGH = {"RETURN_VALUE", "RAISE_VARARGS", "RERAISE", "JUMP_FORWARD", "JUMP_BACKWARD",
                   "JUMP_BACKWARD_NO_INTERRUPT"}


def deleted_in(code, name: str) -> bool:
    """Does ``code`` delete its cell ``name`` anywhere (``del x`` of a variable a closure reads)?"""
    instructions = decoded(code)[0]
    return any(inst.name == "DELETE_DEREF" and isinstance(inst.arg, CellVar) and inst.arg.name == name
               for inst in instructions)


def read_before_written(code, index: int, name: str) -> bool:
    """May some path from ``index`` read (or delete) the frame's cell ``name`` before a
    ``STORE_DEREF`` to it?  A walk over the control flow, exception edges included: an
    instruction inside a ``try`` or ``with`` block may also go to the handler the exception
    table names (if that table could not be read, such an instruction counts as a read)."""
    instructions, targets, try_handlers, _ = decoded(code)
    handlers = exception_entries(code, instructions)
    seen, todo = set(), [index]
    while todo:
        i = todo.pop()
        if i in seen or i >= len(instructions):
            continue
        seen.add(i)
        inst = instructions[i]
        named = isinstance(inst.arg, CellVar) and inst.arg.name == name
        if named and inst.name in CELL_READS:
            return True
        if try_handlers[i] and handlers[i] is None:
            return True
        if handlers[i] is not None:
            todo.append(handlers[i][0])
        if named and inst.name == "STORE_DEREF":
            continue
        if isinstance(inst.arg, Label):
            todo.append(targets[inst.arg])
        if inst.name not in NO_FALL_THROUGH:
            todo.append(i + 1)
    return False


class BreakTemplates(Templates):
    """Templates of the values handed over at a break: besides what a return value may be,
    any value with a source is re-read from the frame (the very same object, its pending
    attribute changes replayed), a graph input tensor is passed through as itself, a bound
    method is bound again to its rebuilt ``self`` (``x.item`` is read again from ``x``, and
    ``"{}".format`` from its string; a C
    slot of ``object``/``dict`` reached by ``super()`` is bound with ``types.MethodType``); a
    function the frame made is made again once per call, as for a return value."""

    def of(self, vt):
        if isinstance(vt, TensorVariable) and vt.is_input and vt.source is not None:
            return ("real", self.read(vt.source))
        if isinstance(vt, UserMethodVariable):               # self.helper (LOAD_METHOD), bound anew
            return ("method", self.of(vt.fn), self.of(vt.self_vt))
        if isinstance(vt, TensorMethodVariable):             # x.item, x.tolist before the call
            return ("getattr", self.of(vt.tensor), vt.name)
        if getattr(getattr(vt, "obj", None), "rebuilt_by_call", False) and isinstance(getattr(vt, "name", None), str):
            return ("getattr", self.of(vt.obj), vt.name)     # m.eval of a module made in the frame
        if isinstance(vt, CellVariable):                     # the frame's own cell (stop_values)
            return cell_template(self, vt)
        if isinstance(vt, ModuleCallVariable):               # super().__call__ of a module: nn.Module.__call__
            return ("method", ("const", torch.nn.Module.__call__), self.of(vt.module_vt))
        if isinstance(vt, BoundMethodVariable):              # log.append before log.append(t.item())
            return ("getattr", self.of(vt.obj), vt.name)
        if isinstance(vt, IteratorVariable) and iterator_rebuild.recipe(vt) is not None:
            return self.once(vt, lambda: iterator_rebuild.template(self, vt))   # iter(e) is e
        if isinstance(vt, BuiltinBaseMethod):                # super().__getattribute__, object.__setattr__
            slot = ("const", getattr(vt.owner, vt.name))     # the C slot wrapper itself
            return slot if vt.self_vt is None else ("method", slot, self.of(vt.self_vt))
        try:
            return super().of(vt)
        except Unsupported as why:
            if getattr(vt, "source", None) is not None:
                return ("real", self.read(vt.source))
            raise Unsupported(f"graph break: {vt} cannot be rebuilt for the eager instruction and the resume "
                              f"function ({why})") from why

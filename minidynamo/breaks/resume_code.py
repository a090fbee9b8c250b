"""Resume functions: the rest of a frame after a graph break, as a new code object.

The resume code is the original bytecode, whole, behind a short prologue:

    [COPY_FREE_VARS n]  RESUME 0          as any 3.11 function starts
    PUSH_NULL | LOAD_FAST ___stack<k>     rebuild the Python stack, bottom first (a for loop's
    LOAD_FAST ___iter<k>  GET_ITER          own iterator: the rest of it, iter() again); an open
    PUSH_NULL LOAD_FAST ___ctx<k>         with-block is re-entered by calling its factory and
      LOAD_CONST args  PRECALL CALL         BEFORE_WITH, which leaves its __exit__ exactly where
      BEFORE_WITH POP_TOP                   the original's was (the with's cleanup finds it)
    LOAD_CONST None  STORE_FAST ___stack<k>   the stack values live on the stack only, as they
                                          did in the frame (a parameter would keep them alive)
    <the original bytecode from the instruction after the break on>

Its arguments are the stack values, the with-blocks' factories, then the live locals under
their own names, so the original instructions read them unchanged.  The frame's cell variables
become free variables of the resume code, placed before the original free variables: the
entry passes the cells themselves in the closure (``make_function``), so a closure the frame
made before the break and the rest of the frame share one cell, and a write through either is
seen by the other.  (MAKE_CELL lies before the resume point and is dropped with it.)  What precedes the resume
point is dropped, except for a break inside a loop: the code is then kept from the head of the
outermost loop holding it and the prologue ends with a ``JUMP_FORWARD`` to the resume point,
so the loop's backward jumps land where they did (a for loop's iterator comes as the rest of
its items: ``LOAD_FAST ___iter<k>; GET_ITER``).  A resume code that breaks again maps back
to its original code and offset (``_origins``), so every iteration shares one resume code.
Every jump target, the exception table (``bytecode`` rebuilds it from TryBegin/TryEnd; a
try or with region the resume point lies in restarts right after the prologue, or inside a
loop is split at the landing of the jump in, at the stack depth the prologue rebuilt) and the
line numbers stay valid without rewriting anything.

A resume code object is made once per (code, instruction, stack layout, live locals) and
kept as long as the original code lives: a new code object per call would never hit a cache.
"""

from __future__ import annotations

import inspect
import types
import weakref

from bytecode import Bytecode, CellVar, FreeVar, Instr, Label, TryBegin, TryEnd

from ..code_sets import ByCodeIdentity

# By identity (``code_sets``): an equal code (the same text run again) gets resume codes of its
# own, so entries compiled for one never meet the other's calls.
_made = ByCodeIdentity()         # code -> {key: resume code}
_origins = ByCodeIdentity()      # resume code -> (weakref to its code, prologue length, first kept
                                 # instruction); weak both ways: _made holds the resume code while the code lives


def resume_code(code: types.CodeType, index: int, stack: list, local_names: list,
                loop_head=None) -> types.CodeType:
    """The code that continues ``code`` at instruction ``index`` (an index into its decoded
    instructions) with ``stack`` (slots as in ``graph_break.BreakState.stack``, "value" slots
    in order) and ``local_names`` live; ``loop_head``: the break lies in a loop starting at
    that instruction, kept so the loop can jump back to it."""
    origin = _origins.get(code)
    original = origin[0]() if origin is not None else None
    if original is not None and index >= origin[1] and (loop_head is None or loop_head >= origin[1]):
        code, shift = original, origin[2] - origin[1]   # a resume function breaking again (the next
        index += shift                                     # iteration of a loop): the original's resume
        loop_head = None if loop_head is None else loop_head + shift
    if loop_head is not None and loop_head >= index:
        loop_head = None      # nothing of the loop lies before the resume point: the same code as
                              # without it (equal code objects share one resume code)
    key = (index, tuple(_slot_key(s) for s in stack), tuple(local_names), loop_head)
    per_code = _made.setdefault(code, {})
    if key not in per_code:
        per_code[key] = _build(code, index, stack, local_names, loop_head)
    return per_code[key]


def in_prologue(code: types.CodeType, index: int) -> bool:
    """Is instruction ``index`` part of a resume code's prologue (which rebuilds the stack and
    re-enters with-blocks: no position of the original code, so no place to break)?"""
    origin = _origins.get(code)
    return origin is not None and index < origin[1]


def uses_zero_arg_super(code: types.CodeType) -> bool:
    """Whether ``super()`` without arguments may run in ``code``: CPython then reads the
    ``__class__`` cell and the frame's *first local*, whatever its name."""
    return "__class__" in code.co_freevars and code.co_argcount > 0


def first_argument_leads(code: types.CodeType, local_names) -> bool:
    """Whether the resume function takes the original first argument as its own first
    parameter (before the stack values), so that a zero-argument ``super()`` in the rest of
    the frame finds it where CPython looks.  ``graph_break.live_locals`` lists it first then."""
    return uses_zero_arg_super(code) and bool(local_names) and local_names[0] == code.co_varnames[0]


def argument_names(stack: list, local_names: list, code: types.CodeType = None) -> list:
    """The resume function's parameters, in order."""
    names = []
    for k, slot in enumerate(stack):
        if slot[0] in ("value", "handling"):
            names.append(f"___stack{k}")
        elif slot[0] == "iter":          # (builder._handed_over: the trace may walk it itself)
            names.append(f"___iter{k}")
        elif slot[0] == "ctx":
            names.append(f"___ctx{k}")
    if code is not None and first_argument_leads(code, local_names):
        return [local_names[0]] + names + list(local_names[1:])
    return names + list(local_names)


def _slot_key(slot):
    return slot[0] if slot[0] != "ctx" else ("ctx", slot[1], tuple(slot[2]))


def _build(code, index, stack, local_names, loop_head=None):
    # Each exception-table entry keeps the original's stack depth: the resume code's stack at every
    # kept instruction is the original's.  (Recomputing them walks only the code reachable from
    # the start; a region that now opens in a cut-off handler got a junk depth: fuzz seed 332 i692.)
    items = list(Bytecode.from_code(code, conserve_exception_block_stackdepth=True))
    position, seen, open_try, head, open_at_head = None, -1, None, None, None
    for p, item in enumerate(items):
        if isinstance(item, Instr) and seen + 1 == loop_head and head is None:
            head, open_at_head = p, open_try
        if isinstance(item, TryBegin):
            open_try = item
        elif isinstance(item, TryEnd):
            open_try = None
        elif isinstance(item, Instr):
            seen += 1
            if seen == index:
                position = p
                break
    if position is None:
        raise ValueError(f"{code.co_qualname} has no instruction {index}")
    lineno = items[position].lineno

    def instr(name, *arg):
        return Instr(name, *arg, lineno=lineno)

    freevars = list(code.co_cellvars) + list(code.co_freevars)   # the cells come in the closure
    prologue = []
    if freevars:
        prologue.append(instr("COPY_FREE_VARS", len(freevars)))
    prologue.append(instr("RESUME", 0))
    for k, slot in enumerate(stack):
        if slot[0] == "null":
            prologue.append(instr("PUSH_NULL"))
        elif slot[0] == "value":
            prologue.append(instr("LOAD_FAST", f"___stack{k}"))
        elif slot[0] == "iter":           # the rest of a for loop's iterator: iter() of it again
            prologue += [instr("LOAD_FAST", f"___iter{k}"), instr("GET_ITER")]
        elif slot[0] == "handling":       # inside an except clause: the exception handled before
            prologue += [instr("LOAD_FAST", f"___stack{k}"), instr("PUSH_EXC_INFO"),   # (as the
                         instr("POP_TOP")]   # frame's PUSH_EXC_INFO left it), this one handled now
        else:
            _, _, args = slot
            prologue += [instr("PUSH_NULL"), instr("LOAD_FAST", f"___ctx{k}")]
            prologue += [instr("LOAD_CONST", a) for a in args]
            prologue += [instr("PRECALL", len(args)), instr("CALL", len(args)), instr("BEFORE_WITH"), instr("POP_TOP")]
    # The stack's values now live on the stack only, as in the original frame: a parameter
    # would keep them (and what they hold) alive until the function returns.
    for k, slot in enumerate(stack):
        if slot[0] != "null":
            kind = {"ctx": "ctx", "iter": "iter"}.get(slot[0], "stack")
            prologue += [instr("LOAD_CONST", None), instr("STORE_FAST", f"___{kind}{k}")]
    inside_loop = head is not None and head < position
    if open_try is not None and not inside_loop:   # the target lies in a try or with region:
        prologue.append(open_try)                   # it starts here now
    labels = []                       # the labels of the resume point itself (a loop's head)
    p = position - 1
    while p >= 0 and not isinstance(items[p], Instr):
        if isinstance(items[p], Label):
            labels.append(items[p])
        p -= 1
    start = position
    if inside_loop:                   # inside a loop: keep it from its head, jump in
        entry = Label()
        prologue.append(instr("JUMP_FORWARD", entry))
        landing, rest = [entry], items[position:]
        if open_try is not None:      # the jump lands inside a region: split it there, so the
            again = TryBegin(open_try.target, open_try.push_lasti, open_try.stack_depth)
            landing = [TryEnd(open_try), entry, again]  # flow into it passes a beginning
            rest = [TryEnd(again) if isinstance(item, TryEnd) and item.entry is open_try else item
                    for item in rest]
        items = items[:position] + landing + rest
        start = head
        p = head - 1
        labels = []
        while p >= 0 and not isinstance(items[p], Instr):
            if isinstance(items[p], Label):
                labels.append(items[p])
            p -= 1
    # A region open at the loop's head (a try or with block around the loop) covers the kept
    # code from there, as it did the original's; one opening later is kept whole.  The jump in
    # lands inside whichever region holds the resume point, at the depth the prologue rebuilt.
    items = labels + ([open_at_head] if start != position and open_at_head is not None else []) + items[start:]
    for item in items:
        if isinstance(item, Instr) and isinstance(item.arg, CellVar):
            item.arg = FreeVar(item.arg.name)
    resumed = Bytecode(prologue + items)
    resumed.name = code.co_name            # what tracebacks, logging and inspect show: the frame's own
    resumed.qualname = f"{code.co_qualname}__resume_at_{index}"   # ours tell the pieces apart
    resumed.filename = code.co_filename
    resumed.first_lineno = code.co_firstlineno
    resumed.freevars = freevars
    resumed.cellvars = []
    resumed.argnames = argument_names(stack, local_names, code)
    resumed.argcount = len(resumed.argnames)
    resumed.posonlyargcount = 0
    resumed.kwonlyargcount = 0
    resumed.flags = code.co_flags & ~(inspect.CO_VARARGS | inspect.CO_VARKEYWORDS)
    made = resumed.to_code(compute_exception_stack_depths=False)
    first = loop_head if start != position else index      # the original index of the first kept instruction
    _origins[made] = (weakref.ref(code), sum(1 for item in prologue if isinstance(item, Instr)), first)
    return made


def make_function(code: types.CodeType, func, cells: tuple = ()) -> types.FunctionType:
    """The resume code as a function of this call's ``func``: its globals, and as its closure
    the frame's own cells (``cells``, rebuilt by the entry) then ``func``'s closure cells."""
    closure = tuple(cells) + (func.__closure__ or ())
    return types.FunctionType(code, func.__globals__, code.co_name, None, closure or None)

"""The compiled entry of a frame that breaks: graph, rebuilt state, one eager instruction, resume.

Generated as Python source (readable with ``MINIDYNAMO_LOG=output_code``), with the frame's
exact argument names, e.g. for ``y = x.sin(); print(y.shape); return y.cos()``:

    def break_f(___func, a0):
        ___rerun = False
        try:
            ___outputs = compiled_graph(*read_inputs(___func, a0))
        except BaseException as ___error:
            if not graph_raised(___error):
                raise
            ___rerun = True
        if ___rerun:                                  # (outside the handler: eager's error has
            return rerun(___func, a0)                 # no __context__ of the graph's)
        ___values = build_output(___outputs)          # stack values, then live locals
        leave_graph_state()                           # grad mode / autocast as at the break
        ___stack1 = ___values[0]
        ___stack2 = ___values[1]
        ___l_y = ___values[2]
        del a0, ___outputs, ___values                 # what the frame no longer holds
        ___result = unpaused(___stack1, ___stack2)    # the instruction itself: print(...)
        ___resume = make_function(resume_0, ___func)
        ___box = [___result, ___l_y]
        del ___stack1, ___stack2, ___l_y, ___result
        return hand_over(___resume, ___box)           # the resume function, sole holder of its values

A frame with cell variables also gets its cells back (``___c_<name> = ___values[...]``, each
a new cell per call holding the value the trace knew at the break, the same cell object that
every closure rebuilt at the break holds) and passes them on: ``make_function(resume_0,
___func, (___c_n,))`` makes them the resume function's first free variables.

``build_output`` also replays the Python side effects the graph's part of the frame made, so
the eager instruction and the resume function see them, once.  ``hand_over`` calls the resume
function as ``unpaused`` does, and lets go of the values once its frame holds them: this frame
has deleted its own names, so a local the rest of the frame deletes or rebinds is freed there,
as in eager (a weak reference to it dies, its memory is back).  ``unpaused`` runs a call with
the hook watching again (the hook is paused while an entry runs): a callee the tracer could
not inline runs as its own watched frame, and the resume function is traced, guarded and
cached like any frame.  Open ``with`` blocks (grad mode, autocast off) are re-entered around
the eager instruction and, by the resume function's prologue, around the rest; the innermost
grad-mode block there in the grad mode the instruction left (``live_grad_block``), the innermost
autocast block of each device in the autocast state it left (``live_autocast_block``).

Inside a ``try`` body or a ``with`` block the instruction runs as ``try: ... except BaseException
as ___error: ___raised = ___error``, and a raised exception takes the first branch: the resume
function that starts at the handler the frame's exception table names for the instruction
(``_to_the_handler``), so the frame's own bytecode handles it (``except``, ``finally``, a with
block's ``__exit__``).
"""

from __future__ import annotations

import __future__
import builtins
import ctypes
import dis
import functools
import io
import linecache
import operator
import textwrap
import types

import bytecode
from bytecode.instr import InstrLocation
import torch

from .. import _eval_frame
from .instructions import JUMPS, UNARY, eager_operands
from .resume_code import first_argument_leads, make_function, resume_code


# The code flags a `from __future__ import ...` sets (what compile() inherits from its caller).
FUTURE_FLAGS = functools.reduce(operator.or_, (getattr(__future__, name).compiler_flag
                                               for name in __future__.all_feature_names))


def make_break_fn(capture, compiled_graph, read_inputs, graph_raised, rerun):
    """The entry's ``compiled_fn(func, *slots)``; ``.source``, ``.resume_codes`` for the logs."""
    from ..tracer.variables.ctx_managers import unwind_open_blocks

    state = capture.break_state
    code = state.code
    arg_names = ", ".join(["___func", *(f"a{i}" for i in range(len(capture.frame.arg_names)))])
    build_output = capture.build_output
    if getattr(build_output, "needs_frame", False):
        build = f"build_output(___outputs, {arg_names})"
    else:
        build_output = getattr(build_output, "specialized", lambda: build_output)()
        build = "build_output(___outputs)"
    grad_enabled = capture.grad_enabled
    set_grad_enabled = torch._C._set_grad_enabled

    def leave_graph_state():
        unwind_open_blocks()                 # autocast blocks the graph entered and left open
        set_grad_enabled(grad_enabled)       # the with-blocks still open are re-entered below

    namespace = {"compiled_graph": compiled_graph, "read_inputs": read_inputs, "build_output": build_output,
                 "graph_raised": graph_raised, "rerun": rerun, "leave_graph_state": leave_graph_state,
                 "unpaused": _eval_frame.unpaused, "unpaused_call": _eval_frame.unpaused_call,
                 "hand_over": _eval_frame.hand_over, "before_with": before_with,
                 "make_function": make_function}
    lines = [f"def break_{_identifier(code.co_qualname.rpartition('.')[2])}({arg_names}):",
             "    if ___func.__globals__ is not ___home:    # (the eager instruction reads these globals)",
             f"        return rerun({arg_names})",
             "    ___rerun = False",
             "    try:",
             f"        ___outputs = compiled_graph(*read_inputs({arg_names}))",
             "    except BaseException as ___error:",
             "        if not graph_raised(___error):",
             "            raise",
             "        ___rerun = True",
             "    if ___rerun:",
             f"        return rerun({arg_names})",
             f"    ___values = {build}",
             "    leave_graph_state()"]
    refs = _Refs()                            # stack position -> the variable holding its value
    for k, slot in enumerate(state.stack):
        if slot[0] in ("value", "handling"):
            refs[k] = f"___stack{k}"
            lines.append(f"    ___stack{k} = ___values[{slot[1]}]")
        elif slot[0] == "iter":                # the rest of an iterator (a tuple): the resume
            refs[k] = f"___iter{k}"            # function's prologue calls iter() on it
            refs.iters.add(k)
            lines.append(f"    ___iter{k} = ___values[{slot[1]}]")
        elif slot[0] == "ctx":
            refs[k] = f"___ctx{k}"
            namespace[f"___ctx{k}"] = slot[1]
    local_refs = []
    for j, name in enumerate(state.locals):
        local_refs.append(f"___l_{name}")
        lines.append(f"    ___l_{name} = ___values[{state.n_stack_values + j}]")
    cell_refs = []                            # the frame's cells: the resume function's closure
    for j, name in enumerate(state.cells):
        cell_refs.append(f"___c_{name}")
        lines.append(f"    ___c_{name} = ___values[{state.n_stack_values + len(state.locals) + j}]")
    cells = f", ({''.join(ref + ', ' for ref in cell_refs)})" if cell_refs else ""
    handling = [k for k, slot in enumerate(state.stack) if slot[0] == "handling"]
    if handling:                # inside an except clause: its exception (the innermost handler's)
        namespace["set_handled"] = set_handled      # is sys.exc_info()'s for the eager instruction
        lines.append(f"    set_handled({refs[handling[-1]]})")
    # What the frame no longer holds at the instruction: its arguments (a local the frame has
    # rebound is dead by now, in eager too) and the graph's outputs as a whole.
    lines.append(f"    del {', '.join([*(f'a{i}' for i in range(len(capture.frame.arg_names))), '___outputs', '___values'])}")

    contexts = [(slot[1], slot[2]) for slot in state.stack if slot[0] == "ctx"]
    eager, branches = _EAGER[_kind(state.inst.name, JUMPS)](state, refs, JUMPS)
    reason = " ".join(str(state.reason).split())
    lines.append(f"    # the eager instruction, {state.inst.name} at {state.where}: {reason}")
    # An exception of the instruction goes to the frame's own handler, if one covers it: the
    # resume function that starts there (its branch first: it returns before the others ask).
    caught = "raise"
    if state.raise_to is not None:
        branches = [_to_the_handler(state, refs)] + branches
        caught = "___raised = ___error"
        lines.append("    ___raised = None")
    if contexts:
        namespace["enter_contexts"], namespace["exit_contexts"] = _context_helpers(contexts)
        before, after, rechosen = _live_blocks(state.stack, namespace)
        # (the handler's resume function re-enters those blocks with the factories they had)
        as_entered = []
        for k in rechosen:
            namespace[f"___ctx{k}_as_entered"] = state.stack[k][1]
            as_entered.append(f"        ___ctx{k} = ___ctx{k}_as_entered")
        lines += ["    ___managers = enter_contexts()", "    try:", *before, f"        {eager}", *after,
                  "    except BaseException as ___error:",
                  "        exit_contexts(___managers, ___error)",
                  *(as_entered if state.raise_to is not None else []),
                  f"        {caught}",
                  "    else:",
                  "        exit_contexts(___managers, None)"]
    elif state.raise_to is not None:
        lines += ["    try:", f"        {eager}", "    except BaseException as ___error:", f"        {caught}"]
    else:
        lines.append(f"    {eager}")
    if handling:           # (the caller's, guarded to be none: each resume prologue re-enters it)
        lines.append("    set_handled(None)")

    resume_codes = []
    for test, index, stack in branches:
        slots = [("null",) if s[0] == "null" else ("ctx", s[1], s[2]) if s[0] == "ctx" else (s[0], None)
                 for s, _ in stack]
        resumed = resume_code(code, index, slots, state.locals, state.loop_head)
        name = f"resume_{len(resume_codes)}"
        namespace[name] = resumed
        resume_codes.append(resumed)
        call_args = [ref for s, ref in stack if s[0] != "null"] + local_refs
        if first_argument_leads(code, state.locals):      # zero-argument super() reads it
            call_args.insert(0, call_args.pop(len(call_args) - len(local_refs)))
        # The resume function must be the only holder of what it gets (a local it deletes is
        # freed then, as in eager): this frame forgets its own names, and hand_over the rest.
        stack_refs = sorted({ref for ref in refs.values() if not ref.startswith("___ctx")})
        results = [ref for _, ref in stack if ref in RESULTS]
        held = [*stack_refs, *local_refs, *cell_refs, *results]
        call = [f"___resume = make_function({name}, ___func{cells})",
                f"___box = [{', '.join(call_args)}]",
                f"del {', '.join(held)}",
                "return hand_over(___resume, ___box)"]
        if test is None:
            lines += [f"    {line}" for line in call]
        else:
            lines += [f"    if {test}:", *(f"        {line}" for line in call)]
    source = "\n".join(lines) + "\n"
    namespace["___home"] = capture.frame.f_globals
    fn = _with_the_frames_globals(source, lines[0][4:lines[0].index("(")], namespace, code)
    fn.__code__ = seen_as_the_frame(fn.__code__, code, state.inst.lineno)
    fn.source = source
    fn.resume_codes = resume_codes
    fn.compiled_graph = compiled_graph
    fn.read_inputs = read_inputs
    return fn


def _with_the_frames_globals(source: str, name: str, namespace: dict, code) -> types.FunctionType:
    """The entry function ``name`` of ``source``, whose globals are the frame's own: the eager
    instruction runs in the entry's frame, and what reads its caller's globals
    (``type(name, bases, ns)``'s ``__module__``, ``warnings.warn``'s module and registry) reads
    eager's.  Everything the generated code itself names (``namespace``'s helpers and the
    builtins it uses) reaches it as closure cells, so the frame's globals are never written and
    a global of the program with a helper's name changes nothing."""
    # The eager instruction runs in this function's frame, and compile(), exec() and eval() called
    # there take their __future__ flags from it: the program's flags, not this module's.
    flags = code.co_flags & FUTURE_FLAGS
    first = compile(source, "<entry>", "exec", flags=flags, dont_inherit=True)
    inner = next(c for c in first.co_consts if isinstance(c, types.CodeType))
    names = sorted({i.argval for i in dis.get_instructions(inner) if i.opname == "LOAD_GLOBAL"} | set(namespace))
    values = {n: namespace[n] if n in namespace else getattr(builtins, n) for n in names}
    wrapped = f"def ___make({', '.join(names)}):\n" + textwrap.indent(source, "    ") + f"    return {name}\n"
    scope: dict = {"__builtins__": builtins}
    exec(compile(wrapped, f"<minidynamo graph break in {code.co_qualname}>", "exec", flags=flags, dont_inherit=True),
         scope)
    made = scope["___make"](**values)
    return types.FunctionType(made.__code__, namespace["___home"], made.__name__, made.__defaults__, made.__closure__)


ENTRY_SUFFIX = "__graph_break_entry"   # an entry's co_qualname: the frame's, and this


def seen_as_the_frame(entry_code, code, lineno):
    """The entry's code as tracebacks, ``logging`` and ``inspect`` see its frame: where eager's
    frame is while the instruction runs (the frame's name, file, and the instruction's line on
    every instruction), so a record's ``funcName``/``lineno`` or a traceback line is eager's.
    Its qualified name still tells an entry apart (``ENTRY_SUFFIX``); its source is ``fn.source``."""
    entry = bytecode.Bytecode.from_code(entry_code, conserve_exception_block_stackdepth=True)
    line = lineno if lineno is not None else code.co_firstlineno
    for instr in entry:
        if isinstance(instr, bytecode.Instr):
            instr.location = InstrLocation(line, line, None, None)
    entry.name, entry.qualname = code.co_name, code.co_qualname + ENTRY_SUFFIX
    entry.filename, entry.first_lineno = code.co_filename, line
    return entry.to_code(compute_exception_stack_depths=False)   # only the lines changed


RESULTS = ("___result", "___exit", "___raised")     # the names the eager instructions below bind


def _identifier(name: str) -> str:
    return "".join(c if c.isalnum() or c == "_" else "_" for c in name)


def _kind(opname, jumps):
    return "jump" if opname in jumps else opname


class _Refs(dict):
    """Stack position -> the name of the variable holding its value; ``iters``: the positions
    that hold the rest of an iterator as a tuple."""

    def __init__(self):
        super().__init__()
        self.iters = set()


def _value(refs, k, what):
    """An operand of the eager instruction: an iterator's rest becomes an iterator again (the
    instruction may consume it: a call of a comprehension's function, ``next``)."""
    if k not in refs or refs[k].startswith("___ctx"):
        raise ValueError(f"the {what} of a graph break is not a value")
    return f"iter({refs[k]})" if k in refs.iters else refs[k]


def _call(state, refs, jumps):
    """CALL n: [NULL, fn, args...] or [fn, self, args...]; the last len(kw_names) are keywords."""
    n = state.inst.arg
    base = len(state.stack) - eager_operands("CALL", n)
    if state.stack[base][0] == "null":
        fn, args = _value(refs, base + 1, "callable"), [_value(refs, k, "argument") for k in range(base + 2, base + n + 2)]
    else:
        fn, args = _value(refs, base, "callable"), [_value(refs, k, "argument") for k in range(base + 1, base + n + 2)]
    kw = state.kw_names
    positional, keywords = args[:len(args) - len(kw)], args[len(args) - len(kw):]
    parts = [fn, *positional]
    if kw:
        parts.append("**{" + ", ".join(f"{k!r}: {v}" for k, v in zip(kw, keywords)) + "}")
    return f"___result = unpaused({', '.join(parts)})", _after(state, refs, base, "___result")


def _call_ex(state, refs, jumps):
    """CALL_FUNCTION_EX: [NULL?, fn, args, kwargs?]."""
    m = eager_operands("CALL_FUNCTION_EX", state.inst.arg) - 1   # (the NULL below is optional)
    top = len(state.stack) - m
    fn, args = _value(refs, top, "callable"), _value(refs, top + 1, "arguments")
    kwargs = _value(refs, top + 2, "keywords") if m == 3 else "None"
    base = top - 1 if top > 0 and state.stack[top - 1][0] == "null" else top
    return f"___result = unpaused_call({fn}, {args}, {kwargs})", _after(state, refs, base, "___result")


CONVERSIONS = {0: "", 1: "str", 2: "repr", 3: "ascii"}


def _format(state, refs, jumps):
    """FORMAT_VALUE: value [spec] -> format(conversion(value), spec)."""
    flags = state.inst.arg
    top = len(state.stack) - eager_operands("FORMAT_VALUE", flags)
    value = _value(refs, top, "value")
    spec = _value(refs, top + 1, "format spec") if flags & 0x04 else "''"
    return f"___result = format({CONVERSIONS[flags & 0x03]}({value}), {spec})", _after(state, refs, top, "___result")


def _subscript(state, refs, jumps):
    """BINARY_SUBSCR: container key -> container[key] (``y[y > 0]``: a shape the data decides)."""
    top = len(state.stack) - eager_operands("BINARY_SUBSCR", 0)
    container, key = _value(refs, top, "container"), _value(refs, top + 1, "key")
    return f"___result = {container}[{key}]", _after(state, refs, top, "___result")


def _store_subscript(state, refs, jumps):
    """STORE_SUBSCR: value container key -> ``container[key] = value`` (a write the trace cannot
    make, or that eager refuses: a view of a leaf that requires grad), nothing pushed."""
    top = len(state.stack) - eager_operands("STORE_SUBSCR", 0)
    value, container, key = (_value(refs, top + k, what) for k, what in enumerate(("value", "container", "key")))
    below = _below(state, refs, top)
    return f"{container}[{key}] = {value}", [(None, state.index + 1, below)]


def _binary_op(state, refs, jumps):
    """BINARY_OP: a b -> ``a op b``, or for ``op=`` the in-place form on a copy of the name
    (``x += t`` of a tensor eager refuses to write in place), then its value pushed."""
    top = len(state.stack) - eager_operands("BINARY_OP", 0)
    a, b = _value(refs, top, "operand"), _value(refs, top + 1, "operand")
    symbol = dis._nb_ops[int(state.inst.arg)][1]
    if symbol.endswith("="):
        return f"___result = {a}; ___result {symbol} {b}", _after(state, refs, top, "___result")
    return f"___result = {a} {symbol} {b}", _after(state, refs, top, "___result")


def _store_attr(state, refs, jumps):
    """STORE_ATTR: value obj -> ``obj.name = value`` (a ``__setattr__`` or property setter the trace
    cannot run), nothing pushed."""
    top = len(state.stack) - eager_operands("STORE_ATTR", 0)
    value, obj = _value(refs, top, "value"), _value(refs, top + 1, "object")
    below = _below(state, refs, top)
    return f"setattr({obj}, {str(state.inst.arg)!r}, {value})", [(None, state.index + 1, below)]


def _load_attr(state, refs, jumps):
    """LOAD_ATTR: obj -> ``obj.name`` (a property or ``__getattr__`` whose code broke: it runs
    eagerly, its own frame watched by the hook)."""
    top = len(state.stack) - eager_operands("LOAD_ATTR", 0)
    obj = _value(refs, top, "object")
    return f"___result = unpaused(getattr, {obj}, {str(state.inst.arg)!r})", _after(state, refs, top, "___result")


def _load_method(state, refs, jumps):
    """LOAD_METHOD: obj -> NULL, ``obj.name``: the attribute read as LOAD_ATTR reads it, then the
    CALL after it calls it (the form CPython itself uses when no plain method is found)."""
    top = len(state.stack) - eager_operands("LOAD_METHOD", 0)
    obj = _value(refs, top, "object")
    stack = _below(state, refs, top) + [(("null",), None), (("value",), "___result")]
    return f"___result = unpaused(getattr, {obj}, {str(state.inst.arg)!r})", [(None, state.index + 1, stack)]


def _delete_subscript(state, refs, jumps):
    """DELETE_SUBSCR: container key -> ``del container[key]``, nothing pushed."""
    top = len(state.stack) - eager_operands("DELETE_SUBSCR", 0)
    container, key = _value(refs, top, "container"), _value(refs, top + 1, "key")
    return f"del {container}[{key}]", [(None, state.index + 1, _below(state, refs, top))]


def _delete_attr(state, refs, jumps):
    """DELETE_ATTR: obj -> ``del obj.name``, nothing pushed."""
    top = len(state.stack) - eager_operands("DELETE_ATTR", 0)
    return (f"delattr({_value(refs, top, 'object')}, {str(state.inst.arg)!r})",
            [(None, state.index + 1, _below(state, refs, top))])


def _unary(state, refs, jumps):
    """UNARY_NEGATIVE / POSITIVE / INVERT / NOT: a -> ``-a`` ... (``not t`` of a tensor: its data)."""
    top = len(state.stack) - eager_operands(state.inst.name, 0)
    return f"___result = {UNARY[state.inst.name]}{_value(refs, top, 'operand')}", _after(state, refs, top, "___result")


def _below(state, refs, top):
    """The stack under position ``top``, as a resume function takes it."""
    return [(s, refs.get(k)) for k, s in enumerate(state.stack[:top])]


def _compare(state, refs, jumps):
    """COMPARE_OP: a b -> ``a < b`` (and the others): an ``__eq__`` or ``__lt__`` the trace
    cannot run, a truth the data decides."""
    top = len(state.stack) - eager_operands("COMPARE_OP", 0)
    a, b = _value(refs, top, "operand"), _value(refs, top + 1, "operand")
    return f"___result = {a} {dis.cmp_op[int(state.inst.arg)]} {b}", _after(state, refs, top, "___result")


def _contains(state, refs, jumps):
    """CONTAINS_OP: item container -> ``item in container`` (``not in`` when flagged)."""
    top = len(state.stack) - eager_operands("CONTAINS_OP", 0)
    item, container = _value(refs, top, "item"), _value(refs, top + 1, "container")
    test = "not in" if state.inst.arg else "in"
    return f"___result = {item} {test} {container}", _after(state, refs, top, "___result")


def _before_with(state, refs, jumps):
    """BEFORE_WITH: manager -> its bound ``__exit__``, what its ``__enter__`` returned (a manager
    the trace could not enter: one in C, or an ``__enter__`` doing what the trace cannot).  The
    resume function starts inside the block with that ``__exit__`` on its stack."""
    top = len(state.stack) - eager_operands("BEFORE_WITH", 0)
    manager = _value(refs, top, "context manager")
    below = _below(state, refs, top)
    return (f"___exit, ___result = before_with({manager})",
            [(None, state.index + 1, below + [(("value",), "___exit"), (("value",), "___result")])])


def before_with(manager):
    """What CPython's BEFORE_WITH does: ``__enter__`` and ``__exit__`` looked up on the class (bound
    through their descriptors), then ``__enter__()`` called with the hook watching."""
    enter = _special(manager, "__enter__", "")
    exit_method = _special(manager, "__exit__", " (missed __exit__ method)")
    return exit_method, _eval_frame.unpaused(enter)


def _special(obj, name, missing):
    """``type(obj).name`` bound to ``obj``.  A function or a C method is bound as a plain method
    object, whose ``__func__`` keeps its identity from call to call (C's own binding makes a new
    object each time, which a resume function receiving it could not guard)."""
    for klass in type(obj).__mro__:
        if name in klass.__dict__:
            attr = klass.__dict__[name]
            if isinstance(attr, (types.FunctionType, types.MethodDescriptorType, types.WrapperDescriptorType)):
                return types.MethodType(attr, obj)
            bind = getattr(type(attr), "__get__", None)
            return bind(attr, obj, type(obj)) if bind is not None else attr
    raise TypeError(f"'{type(obj).__name__}' object does not support the context manager protocol{missing}")


def _jump(state, refs, jumps):
    """POP_JUMP_*_IF_TRUE/FALSE, JUMP_IF_*_OR_POP: the truth eagerly, one resume per branch."""
    jumps_when, keeps = jumps[state.inst.name]
    top = len(state.stack) - eager_operands(state.inst.name, 0)
    cond = _value(refs, top, "condition")
    below = _below(state, refs, top)
    taken = below + [(("value",), cond)] if keeps else below
    test = "___truth" if jumps_when else "not ___truth"
    return f"___truth = bool({cond})", [(test, state.jump_target, taken), (None, state.index + 1, below)]


def _after(state, refs, base, result):
    """The stack after an instruction that consumed everything from ``base`` and pushed one value."""
    return [(None, state.index + 1, _below(state, refs, base) + [(("value",), result)])]


_EAGER = {"CALL": _call, "CALL_FUNCTION_EX": _call_ex, "FORMAT_VALUE": _format, "BINARY_SUBSCR": _subscript,
          "STORE_SUBSCR": _store_subscript, "STORE_ATTR": _store_attr, "BINARY_OP": _binary_op,
          "COMPARE_OP": _compare, "CONTAINS_OP": _contains, "BEFORE_WITH": _before_with, "jump": _jump,
          "DELETE_SUBSCR": _delete_subscript, "DELETE_ATTR": _delete_attr, "LOAD_ATTR": _load_attr,
          "LOAD_METHOD": _load_method,
          **{name: _unary for name in UNARY}}


GRAD_BLOCKS = (torch.no_grad, torch.enable_grad)   # graph_break._context_of's grad-mode factories


# ``set_handled(e)``: make ``e`` the exception being handled (``sys.exc_info()``), as the frame's
# ``PUSH_EXC_INFO`` did; the resume function's ``POP_EXCEPT`` puts back the one before it.
set_handled = ctypes.pythonapi.PyErr_SetHandledException    # (CPython 3.11+)
set_handled.argtypes = [ctypes.py_object]
set_handled.restype = None


def _to_the_handler(state, refs) -> tuple:
    """The branch taken when the eager instruction raised: the resume function that starts at the
    handler the exception table names for it (a ``try``'s, or a ``with`` block's cleanup, which
    calls the real ``__exit__``), with that entry's stack: the slots below its depth, the
    instruction's offset where the entry asks for it (for ``RERAISE``'s traceback line: the
    resume code's own first instruction), then the exception.  The frame's own bytecode does
    the rest, as in eager."""
    target, depth, lasti = state.raise_to
    stack = [(s, refs.get(k)) for k, s in enumerate(state.stack[:depth])]
    if lasti:
        stack.append((("value",), "0"))
    stack.append((("value",), "___raised"))
    return "___raised is not None", target, stack


def _live_blocks(stack, namespace) -> tuple[list[str], list[str], list[int]]:
    """Lines before and after the eager instruction that pick the factories re-entering the
    innermost grad-mode block and the innermost autocast block of each device: the instruction
    may have switched that state inside them, and eager keeps the switch until the block ends.
    Also the stack positions whose ``___ctxK`` the lines after rebind (locals of the entry, then)."""
    before, after, rechosen = [], [], []
    grad_blocks = [k for k, slot in enumerate(stack) if slot[0] == "ctx" and slot[1] in GRAD_BLOCKS]
    if grad_blocks:
        namespace["live_grad_block"] = live_grad_block
        after.append(f"        ___ctx{grad_blocks[-1]} = live_grad_block()")
        rechosen.append(grad_blocks[-1])
    innermost = {}     # device -> the innermost autocast block's stack position
    for k, slot in enumerate(stack):
        if slot[0] == "ctx" and slot[1] is torch.autocast:
            innermost[slot[2][0]] = k
    if innermost:
        namespace["live_autocast_block"], namespace["autocast_state"] = live_autocast_block, autocast_state
        before.append(f"        ___autocast_set = {{d: autocast_state(d) for d in {tuple(innermost)!r}}}")
    for device, k in innermost.items():
        after.append(f"        ___ctx{k} = live_autocast_block({device!r}, ___autocast_set[{device!r}])")
        rechosen.append(k)
    return before, after, rechosen


def autocast_state(device: str) -> tuple:
    """What an autocast block sets for ``device``: enabled, dtype, cache."""
    return (torch.is_autocast_enabled(device), torch.get_autocast_dtype(device), torch.is_autocast_cache_enabled())


_AUTOCAST_AS_LEFT: dict = {}    # state -> its factory: one object per state, so guards on it hold


def live_autocast_block(device: str, state_set: tuple):
    """The factory that re-enters an autocast block in the resume function: ``torch.autocast``
    itself (with the block's own arguments) while the eager instruction left the state the block
    set, else one that enters the state the instruction left (a callee's
    ``torch.set_autocast_enabled``).  The tracer refuses the latter's enabled autocast, so that
    rest of the frame runs eagerly, in the right state."""
    left = autocast_state(device)
    if left == state_set:
        return torch.autocast
    key = (device, *left)
    if key not in _AUTOCAST_AS_LEFT:
        enabled, dtype, cache = left

        def enter_as_left(*_block_arguments):
            return torch.autocast(device, dtype=dtype, enabled=enabled, cache_enabled=cache)
        _AUTOCAST_AS_LEFT[key] = enter_as_left
    return _AUTOCAST_AS_LEFT[key]


def live_grad_block():
    """The factory that re-enters the innermost open grad-mode block in the resume function:
    the eager instruction may have switched grad mode inside it (``torch.set_grad_enabled(True)``
    in a callee), and eager keeps that mode until the block ends.  The block's ``__exit__``
    still restores the mode from before it.  (The resume function guards the factory it gets.)"""
    return torch.enable_grad if torch.is_grad_enabled() else torch.no_grad


def _context_helpers(contexts):
    def enter_contexts():
        managers = []
        for factory, args in contexts:
            manager = factory(*args)
            manager.__enter__()
            managers.append(manager)
        return managers

    def exit_contexts(managers, error):
        for manager in reversed(managers):
            if error is None:
                manager.__exit__(None, None, None)
            else:
                manager.__exit__(type(error), error, error.__traceback__)

    return enter_contexts, exit_contexts


def render(fn) -> str:
    """What ``MINIDYNAMO_LOG=output_code`` prints: the entry's source and disassembly, and each
    resume function's disassembly."""
    out = io.StringIO()
    out.write(fn.source)
    out.write("\n# disassembled:\n")
    dis.dis(fn.__code__, file=out)
    for resumed in fn.resume_codes:
        params = ", ".join(resumed.co_varnames[:resumed.co_argcount])
        out.write(f"\n# resume function: def {resumed.co_qualname.rpartition('.')[2]}({params})  (continues {resumed.co_filename}:"
                  f"{_first_line(resumed)})\n")
        for line in sorted({n for _, _, n in resumed.co_lines() if n is not None}):
            text = linecache.getline(resumed.co_filename, line).rstrip()
            if text:
                out.write(f"#   {line:4d} | {text}\n")
        dis.dis(resumed, file=out)
    return out.getvalue()


def _first_line(code) -> int:
    lines = [line for _, _, line in code.co_lines() if line is not None]
    return lines[0] if lines else code.co_firstlineno

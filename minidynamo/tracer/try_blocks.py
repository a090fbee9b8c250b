"""``try`` statements around graph ops: what if a kernel raises when the graph runs?

An exception the traced Python raises at trace time (a missing key, ``1 // 0``) is modelled:
``exceptions.py`` sends it to its handler, and on a later call the guards make the same code
take the same path.  What the trace cannot see are the tensor ops the body put in the graph:
they run again at call time, and kernels can raise there for reasons the meta example values
cannot show (out of memory, an index out of range in the data, ...).  They raise
``RuntimeError`` (and subclasses), ``IndexError``, ``ValueError``, ``TypeError``,
``ArithmeticError``, ``MemoryError``; ``KeyboardInterrupt`` can arrive anywhere; and any
``Warning`` a torch function in the graph emits at call time raises when the program's filters
turn warnings into errors (``warnings.simplefilter("error")``: the filters are not guarded).

Rule: if an instruction inside a try body adds graph nodes (directly or through an inlined
call), every ``try`` handler that would see an exception from that instruction must either

- catch only classes disjoint from those (``except KeyError``, ``except AttributeError``), or
- catch only errors an op raises for what it is called with (``NotImplementedError``: a kernel
  missing for the backend, dtype or layout; ``TypeError``), which the guards pin, around ops
  that each ran once on stand-ins on the real device (``kernel_probe.py``), or
- be reproduced by a re-run: the finished graph must be free to run twice
  (``capture.graph_effects`` is None).  When such a graph raises an ``Exception`` at call time
  the compiled code re-runs the whole frame eagerly (``convert_frame.make_compiled_fn``), so
  the handler runs exactly as Python runs it: the trace never has to guess what the handler
  does.  ``output.needs_rerun`` records the requirement and ``capture._trace`` refuses a graph
  that changes its inputs in place or draws random numbers.  (transformers'
  ``check_model_inputs`` wraps the whole forward in ``try: ... except TypeError``.)

This covers every handler, a bare ``except``, ``finally`` and ``except BaseException``
included.  The one exception not re-run is ``KeyboardInterrupt`` (re-running would ignore the
user's Ctrl-C).  It propagates from the graph, and what the program sees is still a run eager
could have had: a graph free to run twice changed nothing, and the frame's Python side effects
are replayed only after the graph, so the state is the one of an interrupt that arrived just
before the frame (or the resume function) began, before any handler was entered.  (A graph
break inside a try body is refused, so a graph never starts inside one.)

A ``with`` block over a user's context manager (``ctx_managers.enter_user_context``) is such a
handler too: its ``__exit__`` would see the error.  Grad-mode, autocast and TorchFunctionMode
blocks are not: the compiled code unwinds those itself (``check_with_exits``).

In 3.11 bytecode a try statement is an exception-table entry whose handler starts with
``PUSH_EXC_INFO`` (a ``with`` block's cleanup continues with ``WITH_EXCEPT_START``).  An
instruction names only its innermost handler; the outer ones are found by following the
table from handler to handler (the handler's own code is covered by a cleanup entry, whose
code is covered by the enclosing try's entry).
"""

from __future__ import annotations

import builtins


KERNEL_ERRORS = (RuntimeError, IndexError, ValueError, TypeError, ArithmeticError, MemoryError, KeyboardInterrupt,
                 Warning)


def handler_chains(instructions, handler_of: list) -> list:
    """For each instruction: the indexes of the try-statement handlers that would see an
    exception it raises, innermost first (empty outside any try statement)."""
    return _chains(handler_of, lambda at: at if is_try_statement(instructions, at) else None)


def with_exit_slots(instructions, handler_of: list, depth_of: dict) -> list:
    """For each instruction: the stack slots holding the ``__exit__`` of each with-block whose
    body holds it, innermost first.  A with-block's cleanup handler (``PUSH_EXC_INFO;
    WITH_EXCEPT_START``) covers its body at the depth just above the ``__exit__`` BEFORE_WITH
    left, so that ``__exit__`` is at ``stack[depth - 1]`` all through the body.  ``depth_of``:
    handler -> its depth in the exception table; a slot is -1 where that is unknown (then
    the block counts as a user's: ``restored_exit``)."""
    def slot(at):
        if not is_with_cleanup(instructions, at):
            return None
        return depth_of[at] - 1 if depth_of.get(at) else -1
    return _chains(handler_of, slot)


def _chains(handler_of: list, pick) -> list:
    """For each instruction, ``pick(handler)`` of each handler that would see its exception,
    innermost first (the handler's own code is covered by the next one out), where not None."""
    chains = []
    for index in range(len(handler_of)):
        chain, seen, at = [], set(), handler_of[index]
        while at is not None and at not in seen:
            seen.add(at)
            picked = pick(at)
            if picked is not None:
                chain.append(picked)
            at = handler_of[at]
        chains.append(tuple(chain))
    return chains


def is_with_cleanup(instructions, handler: int) -> bool:
    """The handler is a with block's cleanup: ``PUSH_EXC_INFO; WITH_EXCEPT_START``."""
    return instructions[handler].name == "PUSH_EXC_INFO" and handler + 1 < len(instructions) and \
        instructions[handler + 1].name == "WITH_EXCEPT_START"


def is_try_statement(instructions, handler: int) -> bool:
    first = instructions[handler].name
    following = instructions[handler + 1].name if handler + 1 < len(instructions) else ""
    return first == "PUSH_EXC_INFO" and following != "WITH_EXCEPT_START"


def caught_classes(instructions, targets: dict, handler: int, f_globals: dict, f_builtins: dict):
    """The exception classes the handler's ``except`` clauses test, or None when it catches
    everything (bare ``except``, ``finally``) or a clause is not a plain builtin class name
    (or a tuple of them)."""
    classes = []
    i = handler + 1
    while i < len(instructions):
        names = []
        while instructions[i].name == "LOAD_GLOBAL":
            names.append(instructions[i].arg[1] if isinstance(instructions[i].arg, tuple) else instructions[i].arg)
            i += 1
        if instructions[i].name == "BUILD_TUPLE" and instructions[i].arg == len(names) and names:
            i += 1
        if not names or len(names) > 1 and instructions[i - 1].name != "BUILD_TUPLE":
            return None              # bare except / finally / an expression we do not read
        if instructions[i].name != "CHECK_EXC_MATCH" or instructions[i + 1].name != "POP_JUMP_FORWARD_IF_FALSE":
            return None
        for name in names:
            value = f_builtins.get(name) if name not in f_globals else None
            if not (isinstance(value, type) and issubclass(value, BaseException) and getattr(builtins, name, None) is value):
                return None          # a user global or a shadowed name: not resolved statically
            classes.append(value)
        # the clause's body ends at the jump target: the next clause (or the re-raise)
        i = targets[instructions[i + 1].arg]
        if instructions[i].name == "RERAISE":
            return tuple(classes)
    return None


def may_catch_kernel_errors(classes) -> bool:
    return classes is None or any(issubclass(k, c) or issubclass(c, k) for c in classes for k in KERNEL_ERRORS)


# What an op raises for what it is called with (a kernel missing for the backend, dtype or
# layout; an argument of the wrong type), never for the values in its tensors: the guards pin
# all of that, so on every call an entry serves, such an error comes from the graph either
# always or never.  kernel_probe.py finds which, once, on stand-ins.
CALL_ERRORS = (NotImplementedError, TypeError)


def catches_only_call_errors(classes) -> bool:
    return classes is not None and all(issubclass(c, CALL_ERRORS) for c in classes)


def ops_after(graph, last) -> list:
    """The op nodes added to ``graph`` after ``last`` (its last node before; None: it was empty).
    New nodes are appended, but for placeholders, which go after the last placeholder."""
    node = last.next if last is not None else next(iter(graph.nodes), None)
    added = []
    while node is not None and node.op != "root":
        if node.op != "placeholder":
            added.append(node)
        node = node.next
    return added


def check_handlers(tx, chain, ops: list) -> None:
    """Graph ops (``ops``, see ops_after) were added inside these try bodies: unless no handler
    could catch what those ops may raise at call time, the graph must be free to be re-run (see
    the module docstring).  A handler of CALL_ERRORS alone need not be, if those very ops run on
    stand-ins (``settle_kernel_handlers``, when the graph is done: only a graph that cannot be
    re-run pays for the stand-ins)."""
    if not ops:                          # only graph inputs: reading them is not the graph's work
        return
    for handler in chain:
        classes = caught_classes(tx.instructions, tx.targets, handler, tx.f_globals, tx.f_builtins)
        if not may_catch_kernel_errors(classes):
            continue
        what = "everything (bare except/finally, or a class not resolved statically)" if classes is None else ", ".join(c.__name__ for c in classes)
        reason = (f"tensor ops inside a try block in {tx.code.co_qualname} whose handler catches {what}: "
                  "it could catch an error the compiled ops raise at run time")
        if catches_only_call_errors(classes):
            tx.output.kernel_handlers.append((reason, ops))
        elif reason not in tx.output.needs_rerun:
            tx.output.needs_rerun.append(reason)


def settle_kernel_handlers(output) -> None:
    """The graph cannot be re-run: a handler of CALL_ERRORS alone is left out of the account
    when every op it covers ran on stand-ins on its real device (kernel_probe.py); one that did
    not joins ``needs_rerun``, with the op that failed."""
    from . import kernel_probe

    refused, answers = set(), {}
    for reason, ops in output.kernel_handlers:
        failed = None if reason in refused else kernel_probe.unprobed(ops, answers)
        if failed is not None:
            refused.add(reason)
            output.needs_rerun.append(f"{reason} ({failed})")
    output.kernel_handlers = []


def check_with_exits(tx, slots) -> None:
    """Graph ops were added inside these with-blocks.  The blocks the compiled code unwinds
    itself (grad mode, autocast, TorchFunctionModes: ``ctx_managers.RestoredExit``) need nothing;
    a user's ``__exit__`` would see an error those ops raise at call time (it may log it, undo
    state, or suppress it), which only a re-run reproduces: the rule of a bare ``finally``."""
    for slot in slots:
        if restored_exit(tx, slot):
            continue
        reason = (f"tensor ops inside a with block in {tx.code.co_qualname} over a context manager whose "
                  "__exit__ is Python: it would see an error the compiled ops raise at run time")
        if reason not in tx.output.needs_rerun:
            tx.output.needs_rerun.append(reason)


def restored_exit(tx, slot) -> bool:
    """Is the ``__exit__`` at this stack slot (``with_exit_slots``) one the compiled code restores
    itself?  False for a user's, and where the slot is unknown (-1)."""
    from .variables.ctx_managers import RestoredExit

    return 0 <= slot < len(tx.stack) and isinstance(tx.stack[slot], RestoredExit)

"""Turn guards into a generated Python guard function (and graph-input readers).

The guards' sources form a tree (``L['self']`` -> ``L['self'].conv1`` -> ``...weight``).
Codegen walks it parent first, so each expression is read once into a local variable and
a parent's type check runs before any of its attributes is read:

    def ___guard(___func, L_self, L_x):
        try:
            if not (L_self is ___Net_1 and type(L_self) is ___Net_2): return False  # L['self'] is ...
            v0 = L_self.__dict__  # L['self'].__dict__
            if not (v0['training'] is True and not v0['_forward_hooks'] ...): return False
            v1 = v0['_modules']  # L['self']._modules
            ...
            if not ___tensor_match_9(v7, L_x): return False  # every tensor, one C call
        except Exception:
            return False
        return True

What makes a hit cheap, each kept exact:
- nn.Module attributes are read from ``__dict__`` / ``_parameters`` / ``_buffers`` /
  ``_modules`` (never through the slow ``__getattr__``), with the checks that make that read
  the one ``module.attr`` would give (see ``module_facts``);
- a tuple identical to the constant seen at trace time skips its item checks;
- tensor checks run in one call of the compiled helper (``native``: C++ reading at::Tensor);
- with a pinned argument (``L['self'] is <the model>``) the dict memo lets a split-off fast path
  (``___guard``) skip what no dict change can have changed; ``___full`` runs everything, and the
  fast path's steps run natively as a ``FastGuard`` (``fast_path``) where each has a native form.
The same plan, interpreted step by step, is the slow path that says which guard failed.
Classes may change after tracing: one check per module class (``native.class_lacks``, a type
version tag in C) verifies that no class of its MRO defines an attribute read past it.
"""

from __future__ import annotations

import itertools
import linecache
import weakref
from functools import partial
from typing import Any, Iterable, Optional, Protocol, Sequence, runtime_checkable

import networkx as nx

from . import fast_path, memo, native
from .checks import describe_guard, show
from .guard import (
    ALIAS_MATCH, AUTOGRAD_VIEW_MATCH, DISTINCT_MATCH, STORAGE_MATCH, EQUALS_MATCH, KIND_ORDER, LENGTH_MATCH, TYPE_MATCH, Guard, WeakPin, hinted_value,
    is_immutable_constant, merged_class_matches,
)
from .planner import FUNC, Block, ConstPool, Planner, Read, local_var
from .slow_path import Explainer
from .source import FrameInfo, ItemSource, Source, chain_of


@runtime_checkable
class GuardFunction(Protocol):
    """What ``build_guard_function`` returns: a plain generated function (fastest to call)
    carrying its text and its slow path as attributes."""

    source: str
    guard_strings: list[str]
    guards: list[Guard]
    weak_pins: tuple          # the WeakPins of its identity guards (their listeners hear of a death)

    def release(self) -> None: ...   # forget its constants: it never passes again

    def __call__(self, func: Any, *args: Any) -> bool: ...

    def failure_reason(self, func: Any, *args: Any) -> Optional[str]: ...


def source_tree(guards: Sequence[Guard]) -> nx.DiGraph:
    """Sources as a tree under a virtual root; each node lists its own guards."""
    tree = nx.DiGraph()
    root = "<frame>"
    tree.add_node(root)
    for guard in guards:
        chain = [root] + chain_of(guard.source)
        for parent, child in zip(chain, chain[1:]):
            if child not in tree:
                tree.add_node(child, guards=[])
                tree.add_edge(parent, child)
        tree.nodes[guard.source]["guards"].append(guard)
    return tree


# Guard kinds that hold for every value identical to an immutable constant seen at trace time.
_PINNED_BY_IDENTITY = {TYPE_MATCH, LENGTH_MATCH, EQUALS_MATCH}


def pinned_constant(tree: nx.DiGraph, node: Source) -> Any:
    """The immutable constant (a tuple, say) whose identity implies every guard in ``node``'s
    subtree, or None.  ``node is constant`` then replaces all those checks."""
    own = tree.nodes[node]["guards"]
    constant = next((hinted_value(g.obj) for g in own if g.kind in (TYPE_MATCH, EQUALS_MATCH)), None)
    if not isinstance(constant, tuple) or not is_immutable_constant(constant):
        return None   # a single number or string is one check anyway
    subtree = nx.descendants(tree, node) | {node}
    if all(g.kind in _PINNED_BY_IDENTITY for n in subtree for g in tree.nodes[n]["guards"]) \
            and all(isinstance(n, ItemSource) for n in subtree - {node}):
        return constant
    return None


_RELATIONS = (ALIAS_MATCH, DISTINCT_MATCH, STORAGE_MATCH, AUTOGRAD_VIEW_MATCH)


def plan_guards(guards: Iterable[Guard], frame_info: FrameInfo) -> tuple[Planner, list[Guard]]:
    """Deduplicate, order parent-first, and plan the reads and checks."""
    unique = merged_class_matches(list(dict.fromkeys(guards)))
    planner = Planner(frame_info, ConstPool(), mode="guard")
    planner.learn(unique)
    # Relations between sources run last, once every source they relate is checked.
    relations = [g for g in unique if g.kind in _RELATIONS]
    unique = [g for g in unique if g.kind not in _RELATIONS]
    tree = source_tree(unique)
    ordered: list[Guard] = []
    done: set[Source] = set()

    def emit(node: Source) -> None:
        if node in done:
            return
        done.add(node)
        own = sorted(tree.nodes[node]["guards"], key=lambda g: KIND_ORDER[g.kind])
        if own:
            planner.add_guards(node, own)
            ordered.extend(own)

    def visit(node: Source) -> None:
        constant = pinned_constant(tree, node)
        if constant is None:
            emit(node)
            for child in tree.successors(node):
                visit(child)
            return
        var = planner.value_of(node)
        name = planner.consts.name_for(constant, "const")
        with planner.block(f"{var} is not {name}", f"{node.name()} is the constant {show(constant)}",
                           frozenset({var}), skip_if=(var, name)):
            emit(node)
            for child in tree.successors(node):
                visit(child)

    planner.before_read = lambda source: emit(source) if source in tree else None
    for root in list(tree.successors("<frame>")):
        visit(root)
    for guard in relations:
        planner.add_guards(guard.source, [guard])
        ordered.append(guard)
    planner.finish()
    return planner, ordered


_counter = itertools.count()


def _parenthesize(test: str) -> str:
    return f"({test})" if " and " in test or " if " in test else test


def signature(frame_info: FrameInfo) -> str:
    return ", ".join([FUNC] + [local_var(name) for name in frame_info.arg_names])


def render_guard(planner: Planner, frame_info: FrameInfo, memo_plan: Optional[memo.MemoPlan] = None) -> str:
    """The guard function's text.  Tensor checks go to one compiled call at the end where the
    helper is built (else each is inline Python).  With a ``memo_plan`` it is two
    functions: ``___guard``, the fast path that skips what the memo vouches for (see ``memo``),
    and ``___full``, every check, noting for the memo; the fast path calls ``___full`` when a pin
    or the memo fails.  (Kept apart so the common call's frame stays small: a frame holds every
    local of its function, thousands for a big model.)"""
    if memo_plan is None:
        lines = [f"def ___guard({signature(frame_info)}):", "    try:"]
        _render_body(planner, True, None, planner.steps, lines, " " * 8)
        lines += ["    except Exception:", "        return False", "    return True"]
        return "\n".join(lines) + "\n"
    lines = [f"def ___guard({signature(frame_info)}):", "    try:"]
    lines += memo.render_fast_path(memo_plan, planner, partial(_render_body, planner, True, None))
    lines += ["    except Exception:", "        return False",
              f"    return {FULL}({signature(frame_info)})", "",
              f"def {FULL}({signature(frame_info)}):", "    try:", memo.begin_line(memo_plan, planner)]
    _render_body(planner, True, partial(memo.slow_path_notes, memo_plan), planner.steps,
                 lines, " " * 8)
    lines += [memo.commit_line(memo_plan), "    except Exception:", "        return False", "    return True"]
    return "\n".join(lines) + "\n"


FULL = "___full"


def _render_body(planner: Planner, batch_tensors: bool, note, steps: list, lines: list[str],
                 indent: str) -> None:
    """Steps, then (if ``batch_tensors``) one C call for the tensors they check."""
    batch: Optional[list] = [] if batch_tensors else None
    _render_steps(steps, lines, batch, indent, note)
    if batch:
        check = planner.consts.name_for(native.tensor_match([spec for _, spec in batch]), "tensor_match")
        args = ", ".join(var for var, _ in batch)
        lines.append(f"{indent}if not {check}({args}): return False  "
                     f"# tensors above ({len(batch)}): type, dtype, device, shape, strides, requires_grad, no lazy conj/neg bit")


def _render_steps(steps: list, lines: list[str], batch: Optional[list], indent: str, note=None) -> None:
    for step in steps:
        if isinstance(step, Read):
            lines.append(f"{indent}{step.var} = {step.expr}  # {step.label}")
            noted = note(step) if note is not None else None
            if noted:
                lines.append(f"{indent}{noted}")
            continue
        comment = " ".join(step.comment.split())
        if isinstance(step, Block):
            lines.append(f"{indent}if {step.condition}:  # unless {comment}")
            _render_steps(step.steps, lines, batch, indent + "    ", note)
            continue
        if step.batched is not None and batch is not None:   # checked at the end, in C
            batch.append(step.batched)
            lines.append(f"{indent}# {comment}")
            continue
        noted = note(step) if note is not None else None
        if noted:
            lines.append(f"{indent}{noted}")
        condition = " and ".join(_parenthesize(check.test) for check in step.checks)
        lines.append(f"{indent}if not ({condition}): return False  # {comment}")


def exec_generated(text: str, namespace: dict, name: str, kind: str) -> Any:
    """Compile generated text under a unique filename that tracebacks can show.

    The text is registered in ``linecache`` for exactly as long as the function lives (a
    finalizer removes it), so compiling and dropping entries over and over (``reset()``, a
    recompile) does not grow ``linecache``.  The function is taken out of ``namespace`` (its
    ``__globals__``), so no cycle keeps it alive: it dies with the last cache entry holding it.
    """
    filename = f"<minidynamo {kind} {next(_counter)}>"
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    try:
        exec(compile(text, filename, "exec"), namespace)
        fn = namespace.pop(name)
    except BaseException:
        linecache.cache.pop(filename, None)
        raise
    weakref.finalize(fn, linecache.cache.pop, filename, None).atexit = False
    return fn


def build_guard_function(guards: Iterable[Guard], frame_info: FrameInfo) -> GuardFunction:
    """One guard function ``(func, *args) -> bool`` checking every guard, cheapest first
    per source, parents before children; with ``.source``, ``.guard_strings``,
    ``.guards`` and ``.failure_reason(func, *args)``.

    The function is the generated Python, or, where the compiled helper is built and can
    express every step the common path runs, a ``FastGuard`` running those steps natively
    (falling back to the generated ``___full`` when a pin or the memo fails)."""
    planner, ordered = plan_guards(guards, frame_info)
    memo_plan = memo.plan_memo(planner, ordered)
    text = render_guard(planner, frame_info, memo_plan=memo_plan)
    namespace = planner.consts.namespace
    python_fn = exec_generated(text, namespace, "___guard", "guards")
    if memo_plan is None:
        guard_fn = fast_path.fast_guard(planner.steps, {}, None, [], None, frame_info, namespace)
    else:
        volatile, values = memo.fast_path_steps(memo_plan, planner)
        guard_fn = fast_path.fast_guard(volatile, memo_plan.pins, namespace[memo_plan.memo], values,
                                     namespace[FULL], frame_info, namespace)
    if guard_fn is not None:
        text = (f"# Runs natively ({type(guard_fn).__module__}.FastGuard): the steps of ___guard below "
                f"as {len(guard_fn.program)} ops{', then ___full when a pin or the memo fails' if memo_plan else ''}\n"
                + text)
        guard_fn.python = python_fn
        guard_fn.var_of = dict(planner.var_of)   # source -> variable (fast_path.hand_off)
    else:
        guard_fn = python_fn
    guard_fn.source = text
    guard_fn.guards = ordered
    # The objects it holds weakly (``guard.pin``): once one is gone, no call passes it again, and
    # ``release`` lets what it holds go at once (the generated functions and their globals form a
    # reference cycle, which would hold the memo's dicts and values until the next collection).
    guard_fn.weak_pins = tuple({id(g.obj): g.obj for g in ordered if type(g.obj) is WeakPin}.values())
    guard_fn.release = namespace.clear
    guard_fn.guard_strings = [describe_guard(guard) for guard in ordered]
    guard_fn.failure_reason = Explainer(planner, frame_info)
    return guard_fn

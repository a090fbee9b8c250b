"""Turn guards into one generated Python function (and graph-input readers).

The guards' sources form a tree (``L['self']`` -> ``L['self'].conv1`` -> ``...weight``).
Codegen walks it parent first, so each expression is read once into a local variable and
a parent's type check runs before any of its attributes is read:

    def ___guard(___func, L_self, L_x):
        try:
            if not (type(L_x) is ___Tensor_0 and L_x.dtype is ___dtype_1 and ...): return False  # L['x'] tensor ...
            if not (L_self is ___Net_3 and type(L_self) is ___Net_4): return False  # L['self'] is Net(...)
            v0 = L_self.__dict__                    # L['self'].__dict__
            ...
        except Exception:
            return False
        return True

The same plan, interpreted step by step, is the slow path that says which guard failed.
"""

from __future__ import annotations

import builtins
import contextlib
import itertools
import keyword
import linecache
import re
from typing import Any, Iterable, NamedTuple, Optional, Protocol, Sequence, runtime_checkable

import networkx as nx
import torch

from . import module_facts
from .checks import (
    CHECK_BUILDERS, Check, contiguity_pins_strides, describe_guard, module_state_checks, show,
)
from .guard import EQUALS_MATCH, LENGTH_MATCH, hinted_value, is_immutable_constant
from .guard import (
    GRAD_MODE_MATCH, DICT_KEYS_MATCH, ID_MATCH, KIND_ORDER, MODULE_STATE_MATCH, TENSOR_MATCH, TYPE_MATCH, Guard,
)
from .source import (
    AttrSource, BuiltinSource, ClosureSource, FrameInfo, GlobalModuleHooksSource,
    GlobalSource, GradModeSource, ItemSource, LocalSource, Source,
)

try:  # optional C helper (guards/_guard_helpers.c); everything works without it
    from ._guard_helpers import ArgumentGuard, ArgumentReader, TensorMatch
except ImportError:  # pragma: no cover - depends on the build
    ArgumentGuard = ArgumentReader = TensorMatch = None

# Checks many tensors in one C call when the helper is built; False forces pure Python.
use_c_helpers = TensorMatch is not None

# Generated code resolves builtins in a private snapshot: a user rebinding builtins.len
# must not change what a guard means.
_BUILTINS_SNAPSHOT = dict(builtins.__dict__)
_is_grad_enabled = torch.is_grad_enabled
FUNC = "___func"


class Read(NamedTuple):
    var: str
    expr: str
    label: str


class Test(NamedTuple):
    checks: tuple[Check, ...]
    comment: str
    # (variable, spec) when the fast function checks this tensor in the C batch instead
    batched: Optional[tuple] = None


class Block(NamedTuple):
    """Steps that run only when ``condition`` holds (a shortcut skips them otherwise)."""

    condition: str
    steps: list
    comment: str


@runtime_checkable
class GuardFunction(Protocol):
    """What ``build_guard_function`` returns: a plain generated function (fastest to call)
    carrying its text and its slow path as attributes."""

    source: str
    guard_strings: list[str]
    guards: list[Guard]

    def __call__(self, func: Any, *args: Any) -> bool: ...

    def failure_reason(self, func: Any, *args: Any) -> Optional[str]: ...


class ConstPool:
    """Objects the generated code refers to, interned by identity as its globals."""

    def __init__(self) -> None:
        self.namespace: dict[str, Any] = {"__builtins__": _BUILTINS_SNAPSHOT}
        self._names: dict[int, str] = {}
        self._counter = itertools.count()

    def name_for(self, obj: Any, hint: str) -> str:
        if id(obj) not in self._names:
            name = f"___{re.sub(r'[^0-9a-zA-Z_]', '_', hint)[:24]}_{next(self._counter)}"
            self._names[id(obj)] = name
            self.namespace[name] = obj
        return self._names[id(obj)]


def local_var(arg_name: str) -> str:
    """The generated parameter for argument ``arg_name`` (prefixed: never clashes)."""
    return f"L_{arg_name}"


class Planner:
    """Decides how each source is read and records the steps, in order.

    ``mode`` is "guard" (a failed structural assumption is a failed guard) or "reader"
    (the guards have passed; fall back to the plain read when a shortcut does not apply).
    """

    def __init__(self, frame_info: FrameInfo, consts: ConstPool, mode: str):
        self.frame_info = frame_info
        self.consts = consts
        self.mode = mode
        self.steps: list[Read | Test] = []
        self.var_of: dict[Source, str] = {}
        self._cse: dict[str, str] = {}
        self._tests_done: set[str] = set()
        self._counter = itertools.count()
        # Per source: (exact type verified at run time, the object seen at trace time).
        self.known: dict[Source, tuple[type, Any]] = {}
        # Per source: the dict keys a DICT_KEYS_MATCH guard verifies.
        self.dict_keys: dict[Source, tuple] = {}
        # Called with a source whose guards must be emitted before a read relies on them.
        self.before_read = lambda source: None

    # --------------------------------------------------------------------- facts

    def learn(self, guards: Iterable[Guard]) -> None:
        """Record exact types the guards verify (only ID/TYPE guards on modules matter)."""
        for guard in guards:
            if guard.kind == TYPE_MATCH:
                self.known[guard.source] = (guard.expected, hinted_value(guard.obj))
            elif guard.kind == ID_MATCH and _wants_type_check(guard):
                self.known[guard.source] = (type(guard.obj), guard.obj)
            elif guard.kind == DICT_KEYS_MATCH:
                self.dict_keys[guard.source] = guard.expected[1]

    # --------------------------------------------------------------------- reads

    def value_of(self, source: Source) -> str:
        """A variable (or parameter) holding ``source``'s value, emitting reads once."""
        if source in self.var_of:
            return self.var_of[source]
        if isinstance(source, LocalSource):
            if source.local_name not in self.frame_info.arg_names:
                raise ValueError(f"{source.name()} is not an argument of the frame "
                                 f"(arguments: {self.frame_info.arg_names})")
            var = local_var(source.local_name)
        elif isinstance(source, (GradModeSource, GlobalModuleHooksSource)):
            var = "None"  # global state: its checks call torch directly
        else:
            var = self._emit_read(self._read_expr(source), source.name())
        self.var_of[source] = var
        return var

    def _cached(self, expr: str, label: str) -> str:
        if expr not in self._cse:
            self._cse[expr] = self._emit_read(expr, label)
        return self._cse[expr]

    def _emit_read(self, expr: str, label: str) -> str:
        var = f"v{next(self._counter)}"
        self.steps.append(Read(var, expr, label))
        return var

    def _read_expr(self, source: Source) -> str:
        if isinstance(source, GlobalSource):
            return f"{self._cached(f'{FUNC}.__globals__', 'G')}[{source.global_name!r}]"
        if isinstance(source, BuiltinSource):
            return f"{self._cached(f'{FUNC}.__builtins__', 'B')}[{source.builtin_name!r}]"
        if isinstance(source, ClosureSource):
            return f"{FUNC}.__closure__[{source.index}].cell_contents"
        if isinstance(source, AttrSource):
            return self._attr_expr(source, self.value_of(source.base_source))
        if isinstance(source, ItemSource):
            return self._item_expr(source, self.value_of(source.base_source))
        raise TypeError(f"no way to read a {type(source).__name__}")

    def _key_literal(self, key: Any) -> str:
        if type(key) in (int, str, bool) or key is None:
            return repr(key)
        return self.consts.name_for(key, "key")

    def _attr_expr(self, source: AttrSource, base: str) -> str:
        plain = (f"{base}.{source.attr}" if source.attr.isidentifier()
                 and not keyword.iskeyword(source.attr) else f"getattr({base}, {source.attr!r})")
        traced = self._traced_module(source.base_source)
        holder_name = module_facts.attr_dict_of(traced, source.attr) if traced is not None else None
        if holder_name is None:
            return plain
        attr, base_name = source.attr, source.base_source.name()
        instance_dict = self._cached(f"{base}.__dict__", f"{base_name}.__dict__")
        if holder_name == "__dict__":   # no class attribute by that name: the instance dict wins
            if self.mode == "reader":
                return f"{instance_dict}[{attr!r}] if {attr!r} in {instance_dict} else {plain}"
            return f"{instance_dict}[{attr!r}]"
        holder = self._module_dict(source.base_source, base, holder_name)
        earlier = module_facts.MODULE_ATTR_DICTS[:module_facts.MODULE_ATTR_DICTS.index(holder_name)]
        # nn.Module.__getattr__ runs only if the instance dict lacks attr, then looks in
        # _parameters, _buffers, _modules in that order: mirror exactly that.
        not_shadowed = [f"{attr!r} not in {instance_dict}"] + [
            f"{attr!r} not in {self._module_dict(source.base_source, base, name)}" for name in earlier]
        if self.mode == "reader":
            conditions = " and ".join([f"{attr!r} in {holder}"] + not_shadowed)
            return f"{holder}[{attr!r}] if {conditions} else {plain}"
        where = self.consts.name_for(module_facts.where_attr_lives, "where_attr_lives")
        self._emit_test(Test(tuple(
            Check(test, source.name(), f"found in {holder_name}", f"{where}({base}, {attr!r})")
            for test in not_shadowed), f"{source.name()} is read from {holder_name}"))
        return f"{holder}[{attr!r}]"

    def _item_expr(self, source: ItemSource, base: str) -> str:
        plain = f"{base}[{self._key_literal(source.key)}]"
        traced = self._traced_module(source.base_source)
        if traced is None:
            return plain
        modules_source = AttrSource(source.base_source, "_modules")
        keys = self.dict_keys.get(modules_source)
        key = module_facts.submodule_key(traced, source.key, keys)
        if key is None:
            return plain
        if keys is not None and self.mode == "guard":
            self.before_read(modules_source)   # its keys guard must hold before we rely on it
        holder = self._module_dict(source.base_source, base, "_modules")
        return f"{holder}[{key!r}]"

    def _module_dict(self, module_source: Source, base: str, dict_name: str) -> str:
        """The variable holding ``module.__dict__[dict_name]`` (read once)."""
        instance_dict = self._cached(f"{base}.__dict__", f"{module_source.name()}.__dict__")
        return self._cached(f"{instance_dict}[{dict_name!r}]", f"{module_source.name()}.{dict_name}")

    def _traced_module(self, source: Source) -> Any:
        """The module seen at trace time at ``source``, if its exact type is verified at run
        time and it finds attributes the nn.Module way; else None."""
        known = self.known.get(source)
        if known is None:
            return None
        cls, traced = known
        if traced is None or type(traced) is not cls or not module_facts.uses_module_getattr(cls):
            return None
        return traced

    # --------------------------------------------------------------------- checks

    def add_guards(self, source: Source, guards: Sequence[Guard]) -> None:
        var = self.value_of(source)
        for guard in sorted(guards, key=lambda g: KIND_ORDER[g.kind]):
            if guard.kind == MODULE_STATE_MATCH and self._state_in_instance_dict(source):
                instance_dict = self._cached(f"{var}.__dict__", f"{source.name()}.__dict__")
                checks = module_state_checks(guard, var, self.consts, instance_dict)
            else:
                checks = list(CHECK_BUILDERS[guard.kind](guard, var, self.consts))
            if guard.kind == ID_MATCH and _wants_type_check(guard):
                checks += CHECK_BUILDERS[TYPE_MATCH](
                    Guard(source, TYPE_MATCH, type(guard.obj)), var, self.consts)
            batched = None
            if guard.kind == TENSOR_MATCH and _c_tensor_spec(guard.expected) is not None:
                batched = (var, _c_tensor_spec(guard.expected))
            self._emit_test(Test(tuple(checks), describe_guard(guard), batched))

    def _state_in_instance_dict(self, source: Source) -> bool:
        """True when the module's training flag and hook dicts are plain instance attributes."""
        traced = self._traced_module(source)
        return traced is not None and all(
            module_facts.attr_dict_of(traced, attr) == "__dict__"
            for attr in ("training",) + module_facts.MODULE_HOOK_DICTS)

    @contextlib.contextmanager
    def block(self, condition: str, comment: str):
        """Steps emitted inside run only if ``condition``; reads made there stay private to it."""
        outer_steps, outer_cse = self.steps, dict(self._cse)
        outer_vars, outer_tests = dict(self.var_of), set(self._tests_done)
        self.steps = []
        try:
            yield
        finally:
            inner, self.steps = self.steps, outer_steps
            self._cse, self.var_of, self._tests_done = outer_cse, outer_vars, outer_tests
            if inner:
                self.steps.append(Block(condition, inner, comment))

    def _emit_test(self, test: Test) -> None:
        fresh = tuple(check for check in test.checks if check.test not in self._tests_done)
        self._tests_done.update(check.test for check in fresh)
        if fresh:
            self.steps.append(test._replace(checks=fresh))


def _c_tensor_spec(spec) -> Optional[tuple]:
    """The C helper's spec for a TensorSpec, or None (no helper, or a tensor type whose
    metadata getters are overridden in Python: those stay Python checks)."""
    if not use_c_helpers:
        return None
    c_spec = (spec.type, spec.dtype, spec.device, spec.shape, spec.stride, spec.requires_grad,
              contiguity_pins_strides(spec))
    try:
        TensorMatch([c_spec])
    except TypeError:
        return None
    return c_spec


def _wants_type_check(guard: Guard) -> bool:
    """Identity-matched modules also get an exact type check, so attribute shortcuts
    stay valid even if someone assigned ``obj.__class__``."""
    return module_facts.uses_module_getattr(type(guard.obj))


# ------------------------------------------------------------------------- ordering


def source_tree(guards: Sequence[Guard]) -> nx.DiGraph:
    """Sources as a tree under a virtual root; each node lists its own guards."""
    tree = nx.DiGraph()
    root = "<frame>"
    tree.add_node(root)
    for guard in guards:
        chain = [root] + _chain(guard.source)
        for parent, child in zip(chain, chain[1:]):
            if child not in tree:
                tree.add_node(child, guards=[])
                tree.add_edge(parent, child)
        tree.nodes[guard.source]["guards"].append(guard)
    return tree


def _chain(source: Source) -> list[Source]:
    chain = []
    node: Optional[Source] = source
    while node is not None:
        chain.append(node)
        node = node.base
    return chain[::-1]


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


def plan_guards(guards: Iterable[Guard], frame_info: FrameInfo) -> tuple[Planner, list[Guard]]:
    """Deduplicate, order parent-first, and plan the reads and checks."""
    unique = list(dict.fromkeys(guards))
    planner = Planner(frame_info, ConstPool(), mode="guard")
    planner.learn(unique)
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
        with planner.block(f"{var} is not {name}", f"{node.name()} is the constant {show(constant)}"):
            emit(node)
            for child in tree.successors(node):
                visit(child)

    planner.before_read = lambda source: emit(source) if source in tree else None
    for root in list(tree.successors("<frame>")):
        visit(root)
    return planner, ordered


# ------------------------------------------------------------------------- rendering

_counter = itertools.count()


def _parenthesize(test: str) -> str:
    return f"({test})" if " and " in test or " if " in test else test


def _signature(frame_info: FrameInfo) -> str:
    return ", ".join([FUNC] + [local_var(name) for name in frame_info.arg_names])


def render_guard(planner: Planner, frame_info: FrameInfo, inline_tensors: bool = False) -> str:
    """The guard function's text; tensor checks go to one C call at the end unless
    ``inline_tensors`` (the pure-Python equivalent, for reading)."""
    lines = [f"def ___guard({_signature(frame_info)}):", "    try:"]
    batch: list[tuple] = []
    _render_steps(planner.steps, lines, None if inline_tensors else batch, indent=" " * 8)
    if batch:
        check = planner.consts.name_for(TensorMatch([spec for _, spec in batch]), "tensor_match")
        args = ", ".join(var for var, _ in batch)
        lines.append(f"        if not {check}({args}): return False  "
                     f"# tensors above ({len(batch)}): type, dtype, device, shape, strides, requires_grad")
    lines += ["    except Exception:", "        return False", "    return True"]
    return "\n".join(lines) + "\n"


def _render_steps(steps: list, lines: list[str], batch: list[tuple], indent: str) -> None:
    for step in steps:
        if isinstance(step, Read):
            lines.append(f"{indent}{step.var} = {step.expr}  # {step.label}")
            continue
        comment = " ".join(step.comment.split())
        if isinstance(step, Block):
            lines.append(f"{indent}if {step.condition}:  # unless {comment}")
            _render_steps(step.steps, lines, batch, indent + "    ")
            continue
        if step.batched is not None and batch is not None:   # checked at the end, in C
            batch.append(step.batched)
            lines.append(f"{indent}# {comment}")
            continue
        condition = " and ".join(_parenthesize(check.test) for check in step.checks)
        lines.append(f"{indent}if not ({condition}): return False  # {comment}")


def _flatten(steps: list) -> list:
    """Every Read and Test, blocks opened (the slow path checks everything)."""
    flat = []
    for step in steps:
        flat += _flatten(step.steps) if isinstance(step, Block) else [step]
    return flat


def exec_generated(text: str, namespace: dict, name: str, kind: str) -> Any:
    """Compile generated text under a unique filename that tracebacks can show."""
    filename = f"<minidynamo {kind} {next(_counter)}>"
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    exec(compile(text, filename, "exec"), namespace)
    return namespace[name]


# ------------------------------------------------------------------------- slow path


class Explainer:
    """Runs the planned steps one by one and names the first one that fails."""

    def __init__(self, planner: Planner, frame_info: FrameInfo):
        self.steps = _flatten(planner.steps)
        self.namespace = planner.consts.namespace
        self.arg_names = frame_info.arg_names
        self._code: dict[str, Any] = {}

    def _eval(self, expr: str, env: dict) -> Any:
        if expr not in self._code:
            self._code[expr] = compile(expr, "<guard slow path>", "eval")
        return eval(self._code[expr], self.namespace, env)

    def __call__(self, func: Any, *args: Any) -> Optional[str]:
        if len(args) != len(self.arg_names):
            return f"expected {len(self.arg_names)} argument slots, got {len(args)}"
        env = {FUNC: func, **{local_var(n): a for n, a in zip(self.arg_names, args)}}
        for step in self.steps:
            if isinstance(step, Read):
                try:
                    env[step.var] = self._eval(step.expr, env)
                except Exception as error:
                    return f"{step.label}: could not read it ({type(error).__name__}: {error})"
                continue
            for check in step.checks:
                try:
                    if self._eval(check.test, env):
                        continue
                    actual = show(self._eval(check.actual, env))
                except Exception as error:
                    actual = f"an error ({type(error).__name__}: {error})"
                return f"{check.label}: expected {check.expected}, got {actual}"
        return None


# ------------------------------------------------------------------------- public


def build_guard_function(guards: Iterable[Guard], frame_info: FrameInfo) -> GuardFunction:
    """One generated function ``(func, *args) -> bool`` checking every guard, cheapest first
    per source, parents before children; with ``.source``, ``.guard_strings``,
    ``.guards`` and ``.failure_reason(func, *args)``."""
    planner, ordered = plan_guards(guards, frame_info)
    text = render_guard(planner, frame_info)
    guard_fn = _argument_guard(ordered, frame_info)
    if guard_fn is not None:
        text = ("# Runs in C (guards._guard_helpers.ArgumentGuard); the same checks in Python:\n"
                + render_guard(planner, frame_info, inline_tensors=True))
    else:
        guard_fn = exec_generated(text, planner.consts.namespace, "___guard", "guards")
    guard_fn.source = text
    guard_fn.guards = ordered
    guard_fn.guard_strings = [describe_guard(guard) for guard in ordered]
    guard_fn.failure_reason = Explainer(planner, frame_info)
    return guard_fn


def _argument_guard(guards: list[Guard], frame_info: FrameInfo) -> Any:
    """The whole guard function as one C object, when every guard is a tensor match on an
    argument or the grad mode (the common case of a function of tensors); else None."""
    if not use_c_helpers or ArgumentGuard is None:
        return None
    checks, grad_mode = [], None
    for guard in guards:
        if guard.kind == GRAD_MODE_MATCH:
            grad_mode = guard.expected
        elif guard.kind == TENSOR_MATCH and isinstance(guard.source, LocalSource) \
                and _c_tensor_spec(guard.expected) is not None:
            checks.append((frame_info.arg_names.index(guard.source.local_name),
                           _c_tensor_spec(guard.expected)))
        else:
            return None
    return ArgumentGuard(len(frame_info.arg_names), checks,
                         None if grad_mode is None else _is_grad_enabled, bool(grad_mode))


def compile_reader(sources: Sequence[Source], frame_info: FrameInfo,
                   guards: Iterable[Guard] = ()) -> Any:
    """A generated ``reader(func, *args) -> list`` that re-reads ``sources`` in order.

    Pass the entry's ``guards`` to let it read module parameters, buffers and submodules
    straight from ``_parameters``/``_buffers``/``_modules`` where the guards verify the
    module's exact type (with a plain-getattr fallback, so the read is always what
    ``module.attr`` gives).  Meant to run right after those guards passed.
    """
    planner = Planner(frame_info, ConstPool(), mode="reader")
    planner.learn(guards)
    results = [planner.value_of(source) for source in sources]
    if use_c_helpers and ArgumentReader is not None and all(isinstance(s, LocalSource) for s in sources):
        reader = ArgumentReader([frame_info.arg_names.index(s.local_name) for s in sources])
        reader.source = (f"# Runs in C (guards._guard_helpers.ArgumentReader), like:\n"
                         f"def ___reader({_signature(frame_info)}):\n    return [{', '.join(results)}]\n")
        return reader
    lines = [f"def ___reader({_signature(frame_info)}):"]
    lines += [f"    {step.var} = {step.expr}  # {step.label}" for step in planner.steps]
    lines.append(f"    return [{', '.join(results)}]")
    text = "\n".join(lines) + "\n"
    reader = exec_generated(text, planner.consts.namespace, "___reader", "reader")
    reader.source = text
    return reader

"""The planner: how each source is read (once, fast, exactly) and which checks follow.

It records ``Read`` steps (``v3 = v1['conv1']``) and ``Test`` steps (``if not (...): return
False``) in order; ``codegen`` renders them as Python and ``slow_path`` interprets them.
"""

from __future__ import annotations

import builtins
import contextlib
import itertools
import keyword
import re
import types
from typing import Any, Iterable, NamedTuple, Optional, Sequence

from . import module_facts, native
from .checks import (CHECK_BUILDERS, Check, alias_checks, describe_guard, distinct_checks, module_call_checks,
                     module_state_checks, storage_checks, autograd_view_checks)
from .guard import (
    ALIAS_MATCH, AUTOGRAD_VIEW_MATCH, DISTINCT_MATCH, COMPARE_MATCH, DICT_KEYS_MATCH, EQUALS_MATCH, GLOBAL_HOOKS_EMPTY, ID_MATCH, KIND_ORDER, LENGTH_MATCH,
    MODULE_STATE_MATCH, STORAGE_MATCH, TENSOR_MATCH, TYPE_MATCH, Guard, UnguardableValue, WeakPin, hinted_value, pinned,
)
from .source import (
    AttrSource, BuiltinSource, ClassSource, ClosureSource, FrameInfo, GenericAttrSource, GlobalModuleHooksSource,
    AutocastSource, CallSource, GlobalSource, GradModeSource, HeldSource, ItemSource, LocalSource, NamespaceSource,
    namespace_builtins,
    Source, TorchStateSource,
)

# Generated code resolves builtins in a private snapshot: a user rebinding builtins.len
# must not change what a guard means.
_BUILTINS_SNAPSHOT = dict(builtins.__dict__)
FUNC = "___func"
STRUCTURE = "STRUCTURE"   # the kind of the checks that make a module attribute shortcut exact
CLASS_LACKS = "CLASS_LACKS"   # no class of a module's MRO defines an attribute read past it (runs every call)


class Read(NamedTuple):
    var: str
    expr: str
    label: str
    # The read as data, for the fast layer (memo, native program): ("attr", base, name),
    # ("generic_attr", base, name) for ``object.__getattribute__(base, name)``, ("item", base, key), ("builtin", globals, builtins, name), ("const", name),
    # ("shortcut", holder, name, shadows, base) for ``holder[name] if name in holder and name not
    # in each shadow else base.name`` (a reader's module attribute), or None for a read only the
    # Python text expresses.  Operands are variables or constant names.
    how: Optional[tuple] = None


class Test(NamedTuple):
    checks: tuple[Check, ...]
    comment: str
    # (variable, spec) when the fast function checks this tensor in the C batch instead
    batched: Optional[tuple] = None
    # True when the outcome depends only on which objects the variables hold (identity,
    # immutable constants, static types) and on the contents of the dicts among them.
    by_identity: bool = False
    # The guard kind (or STRUCTURE for the checks that make a module shortcut exact).
    kind: str = ""
    # The variables the checks read (their text names them too; this is the structured copy).
    uses: frozenset = frozenset()


class Block(NamedTuple):
    """Steps that run only when ``condition`` holds (a shortcut skips them otherwise)."""

    condition: str
    steps: list
    comment: str
    uses: frozenset = frozenset()   # the variables ``condition`` reads
    skip_if: Optional[tuple] = None  # (variable, constant name): skipped when the one is the other


class ConstPool:
    """Objects the generated code refers to, interned by identity as its globals."""

    def __init__(self) -> None:
        self.namespace: dict[str, Any] = {"__builtins__": _BUILTINS_SNAPSHOT}
        self._names: dict[int, str] = {}
        self._counter = itertools.count()

    def name_for(self, obj: Any, hint: str) -> str:
        # Weak pins of one object share a name, so that checks of it read the same (and are
        # done once); each object named is held by the namespace, so no other takes its id.
        key = ("pin", id(obj())) if type(obj) is WeakPin and obj() is not None else id(obj)
        if key not in self._names:
            name = f"___{re.sub(r'[^0-9a-zA-Z_]', '_', hint)[:24]}_{next(self._counter)}"
            self._names[key] = name
            self.namespace[name] = obj
        return self._names[key]


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
        # Per source: (exact type verified at run time, the object seen at trace time: weakly held
        # where it is a module, so that a guard does not keep the program's objects alive).
        self.known: dict[Source, tuple[type, Any]] = {}
        # Per source: the dict keys a DICT_KEYS_MATCH guard verifies.
        self.dict_keys: dict[Source, tuple] = {}
        # Per module class read past (attribute shortcuts): (its check's name, the names read).
        self.class_lacks: dict[type, tuple[set, dict]] = {}
        self._lacks_name: Optional[str] = None
        self._lacks_placeholder = object()   # kept alive: its id names the check until finish()
        # Called with a source whose guards must be emitted before a read relies on them.
        self.before_read = lambda source: None

    # --------------------------------------------------------------------- facts

    def learn(self, guards: Iterable[Guard]) -> None:
        """Record exact types the guards verify (only ID/TYPE guards on modules matter)."""
        for guard in guards:
            if guard.kind == TYPE_MATCH:
                self.known[guard.source] = (guard.expected, guard.obj)     # a hint: weak for modules
            elif guard.kind == ID_MATCH and _wants_type_check(guard):
                self.known[guard.source] = (type(pinned(guard.obj)), guard.obj)
            elif guard.kind == DICT_KEYS_MATCH:
                self.dict_keys[guard.source] = guard.expected[1]

    # --------------------------------------------------------------------- reads

    def value_of(self, source: Source) -> str:
        """A variable (or parameter) holding ``source``'s value, emitting reads once."""
        if source in self.var_of:
            return self.var_of[source]
        if isinstance(source, LocalSource):
            if source.local_name not in self.frame_info.arg_names:
                raise UnguardableValue(f"{source.name()} is not an argument of the frame "
                                       f"(arguments: {self.frame_info.arg_names})")
            var = local_var(source.local_name)
        elif isinstance(source, (GradModeSource, AutocastSource, GlobalModuleHooksSource, TorchStateSource,
                                 ClassSource)):
            var = "None"  # global state (a class is one): its checks name what they read directly
        elif isinstance(source, NamespaceSource):
            var = self.consts.name_for(source.namespace, "globals")   # the dict itself, read each call
        elif isinstance(source, HeldSource):
            var = self.consts.name_for(source.obj, "held")    # the object itself: its fields are read
        else:
            var = self._cached(*self._read_expr(source), source.name())
        self.var_of[source] = var
        return var

    def _cached(self, expr: str, how: Optional[tuple], label: str) -> str:
        if expr not in self._cse:
            self._cse[expr] = self._emit_read(expr, how, label)
        return self._cse[expr]

    def _emit_read(self, expr: str, how: Optional[tuple], label: str) -> str:
        var = f"v{next(self._counter)}"
        self.steps.append(Read(var, expr, label, how))
        return var

    def _read_attr(self, base: str, name: str, label: str) -> str:
        """The variable holding ``base.name`` (read once)."""
        return self._cached(*_attr(base, name), label)

    def _read_item(self, base: str, key: Any, label: str) -> str:
        """The variable holding ``base[key]`` (read once)."""
        return self._cached(*self._item(base, key), label)

    def _item(self, base: str, key: Any) -> tuple[str, tuple]:
        return f"{base}[{self._key_literal(key)}]", ("item", base, key)

    def _read_expr(self, source: Source) -> tuple[str, Optional[tuple]]:
        """How to read ``source``: its Python expression and the same as data (``Read.how``)."""
        if isinstance(source, GlobalSource):
            return self._item(self._read_attr(FUNC, "__globals__", "G"), source.global_name)
        if isinstance(source, BuiltinSource):   # as the function sees it: a global shadows a builtin
            key = repr(source.builtin_name)
            if source.namespace is None:
                g, b = self._read_attr(FUNC, "__globals__", "G"), self._read_attr(FUNC, "__builtins__", "B")
            else:
                g = self.value_of(source.namespace)
                b = self.consts.name_for(namespace_builtins(source.namespace.namespace), "builtins")
            return f"({g}[{key}] if {key} in {g} else {b}[{key}])", ("builtin", g, b, source.builtin_name)
        if isinstance(source, ClosureSource):
            return f"{FUNC}.__closure__[{source.index}].cell_contents", ("closure", source.index)
        if isinstance(source, AttrSource):
            method = self._method_function(source)
            if method is not None:
                return method, ("const", method)
            return self._attr_expr(source, self.value_of(source.base_source))
        if isinstance(source, ItemSource):
            return self._item_expr(source, self.value_of(source.base_source))
        if isinstance(source, GenericAttrSource):
            base, lookup = self.value_of(source.base_source), self.consts.name_for(object.__getattribute__, "generic_getattr")
            return f"{lookup}({base}, {source.attr!r})", ("generic_attr", base, source.attr)
        if isinstance(source, CallSource):
            base = self.value_of(source.base_source)
            return f"type({base}).{source.method}({base})", ("call", base, source.method)
        raise UnguardableValue(f"no way to read a {type(source).__name__}")

    def _method_function(self, source: AttrSource) -> Optional[str]:
        """``module.name.__func__`` as the constant function itself, when that is exact: the
        module's exact type is verified, its class finds attributes the nn.Module way, ``name``
        is a plain function found on the class (``_class_finds`` re-checks that on every call)
        and absent from the instance dict (a structure test); then ``module.name`` is a bound
        method of that very function.  Saves building a bound method per call (guard mode)."""
        if self.mode != "guard" or source.attr != "__func__" or not isinstance(source.base_source, AttrSource):
            return None
        method_source = source.base_source
        traced = self._traced_module(method_source.base_source)
        name = method_source.attr
        if traced is None or name in vars(traced):
            return None
        found = _NOT_FOUND
        for klass in type(traced).__mro__:
            if name in vars(klass):
                found = vars(klass)[name]
                break
        if type(found) is not types.FunctionType:
            return None
        base = self.value_of(method_source.base_source)
        instance_dict = self._read_attr(base, "__dict__", f"{method_source.base_source.name()}.__dict__")
        where = self.consts.name_for(module_facts.where_attr_lives, "where_attr_lives")
        self._emit_test(Test((Check(f"{name!r} not in {instance_dict}", method_source.name(),
                                    "a method of the class", f"{where}({base}, {name!r})",
                                    ("not_in", name, instance_dict)),),
                             f"{method_source.name()} is a method of the class", by_identity=True,
                             kind=STRUCTURE, uses=frozenset({instance_dict})))
        self._class_finds(traced, name)
        return self.consts.name_for(found, name)

    def _key_literal(self, key: Any) -> str:
        if type(key) in (int, str, bool) or key is None:
            return repr(key)
        return self.consts.name_for(key, "key")

    def _attr_expr(self, source: AttrSource, base: str) -> str:
        plain, plain_how = _attr(base, source.attr)
        if self._in_python_module_dict(source):
            # a plain module finds its attributes in its __dict__ (its class, ModuleType, defines
            # none of that name): read through the dict, the memo can vouch for the read
            attr, instance_dict = source.attr, self._read_attr(base, "__dict__", f"{source.base_source.name()}.__dict__")
            if self.mode == "reader":
                return (f"{instance_dict}[{attr!r}] if {attr!r} in {instance_dict} else {plain}",
                        ("shortcut", instance_dict, attr, (), base))
            return self._item(instance_dict, attr)
        traced = self._traced_module(source.base_source)
        holder_name = module_facts.attr_dict_of(traced, source.attr) if traced is not None else None
        if holder_name is None:
            return plain, plain_how
        attr, base_name = source.attr, source.base_source.name()
        instance_dict = self._read_attr(base, "__dict__", f"{base_name}.__dict__")
        if holder_name == "__dict__":   # no class attribute by that name: the instance dict wins
            if self.mode == "guard":
                self._class_lacks(traced, source.attr)
            if self.mode == "reader":
                return (f"{instance_dict}[{attr!r}] if {attr!r} in {instance_dict} else {plain}",
                        ("shortcut", instance_dict, attr, (), base))
            return self._item(instance_dict, attr)
        if self.mode == "guard":
            self._class_lacks(traced, attr)
        holder = self._module_dict(source.base_source, base, holder_name)
        earlier = module_facts.MODULE_ATTR_DICTS[:module_facts.MODULE_ATTR_DICTS.index(holder_name)]
        # nn.Module.__getattr__ runs only if the instance dict lacks attr, then looks in
        # _parameters, _buffers, _modules in that order: mirror exactly that.
        shadows = [instance_dict] + [self._module_dict(source.base_source, base, name) for name in earlier]
        not_shadowed = [f"{attr!r} not in {shadow}" for shadow in shadows]
        if self.mode == "reader":
            conditions = " and ".join([f"{attr!r} in {holder}"] + not_shadowed)
            return (f"{holder}[{attr!r}] if {conditions} else {plain}",
                    ("shortcut", holder, attr, tuple(shadows), base))
        where = self.consts.name_for(module_facts.where_attr_lives, "where_attr_lives")
        self._emit_test(Test(tuple(
            Check(f"{attr!r} not in {shadow}", source.name(), f"found in {holder_name}", f"{where}({base}, {attr!r})",
                  ("not_in", attr, shadow))
            for shadow in shadows), f"{source.name()} is read from {holder_name}", by_identity=True,
            kind=STRUCTURE, uses=frozenset(shadows)))
        return self._item(holder, attr)

    def _class_lacks(self, module: Any, attr: str) -> None:
        """The shortcut read of ``module.attr`` holds only while no class of the module's MRO
        defines ``attr`` (a class attribute, or a property, would win).  One check covers every
        class and name the plan relies on (filled in by ``finish``), emitted where the first
        shortcut is taken; it runs on every call (a class can change behind any dict's back)."""
        if self._lacks_name is None:
            self._lacks_name = self.consts.name_for(self._lacks_placeholder, "classes_lack")
        if self._lacks_name not in self._tests_done:
            name = self._lacks_name
            self._emit_test(Test((Check(f"{name}()", "module classes (and their bases)",
                                        "define none of the attributes read from instance dicts",
                                        f"[(c.__qualname__, n) for c, n, _ in {name}.pairs]",
                                        ("call_true", name)),),
                                 "no module class defines an attribute read past it", kind=CLASS_LACKS))
        names, found = self.class_lacks.setdefault(type(module), (set(), {}))
        if attr is not None:
            names.add(attr)
        cls = type(module)   # and it still finds attributes the nn.Module way
        found.setdefault("__getattr__", cls.__getattr__)
        found.setdefault("__getattribute__", cls.__getattribute__)

    def _class_finds(self, module: Any, name: str) -> None:
        """``type(module).name`` must stay the object it is now (``__getitem__`` of a container
        whose items a guard reads from ``_modules``)."""
        self._class_lacks(module, None)
        self.class_lacks[type(module)][1].setdefault(name, getattr(type(module), name))

    def finish(self) -> None:
        """Build the class check with every class and name the plan relied on."""
        if self._lacks_name is not None:
            self.consts.namespace[self._lacks_name] = native.class_lacks(
                [(cls, names, found) for cls, (names, found) in self.class_lacks.items()])

    def _item_expr(self, source: ItemSource, base: str) -> tuple[str, tuple]:
        plain = self._item(base, source.key)
        traced = self._traced_module(source.base_source)
        if traced is None:
            return plain
        modules_source = AttrSource(source.base_source, "_modules")
        keys = self.dict_keys.get(modules_source)
        key = module_facts.submodule_key(traced, source.key, keys)
        if key is None:
            return plain
        if self.mode == "guard":
            self._class_finds(traced, "__getitem__")   # the container's own indexing, still
        if keys is not None and self.mode == "guard":
            self.before_read(modules_source)   # its keys guard must hold before we rely on it
        holder = self._module_dict(source.base_source, base, "_modules")
        return self._item(holder, key)

    def _in_python_module_dict(self, source: AttrSource) -> bool:
        """Whether ``source`` reads a name of a Python module's own ``__dict__``: the module's
        exact type is verified at run time (``types.ModuleType``, whose instances find their
        attributes there first) and the name was in its dict at trace time."""
        known = self.known.get(source.base_source)
        if known is None or known[0] is not types.ModuleType:
            return False
        module = hinted_value(known[1])
        return (type(module) is types.ModuleType and source.attr in vars(module)
                and not module_facts.defined_on_class(types.ModuleType, source.attr))

    def _module_dict(self, module_source: Source, base: str, dict_name: str) -> str:
        """The variable holding ``module.__dict__[dict_name]`` (read once)."""
        instance_dict = self._read_attr(base, "__dict__", f"{module_source.name()}.__dict__")
        return self._read_item(instance_dict, dict_name, f"{module_source.name()}.{dict_name}")

    def _traced_module(self, source: Source) -> Any:
        """The module seen at trace time at ``source``, if its exact type is verified at run
        time and it finds attributes the nn.Module way; else None."""
        known = self.known.get(source)
        if known is None:
            return None
        cls, traced = known
        traced = hinted_value(traced)
        if traced is None or type(traced) is not cls or not module_facts.uses_module_getattr(cls):
            return None
        return traced

    # --------------------------------------------------------------------- checks

    def add_guards(self, source: Source, guards: Sequence[Guard]) -> None:
        var = self.value_of(source)
        own = frozenset({var}) if _is_variable(var) else frozenset()
        for guard in sorted(guards, key=lambda g: KIND_ORDER[g.kind]):
            uses = own
            if guard.kind == ALIAS_MATCH:
                others = [self.value_of(other) for other, _ in guard.expected]
                checks = alias_checks(guard, var, others)
                uses = own | {w for w in others if _is_variable(w)}
            elif guard.kind == DISTINCT_MATCH:
                others = [self.value_of(other) for other in guard.expected]
                checks = distinct_checks(guard, var, others)
                uses = own | {w for w in others if _is_variable(w)}
            elif guard.kind == STORAGE_MATCH:
                others = [self.value_of(other) for other in guard.expected[0]]
                checks = storage_checks(guard, var, others, self.consts, native.storage_groups(guard.expected[1]))
                uses = own | {w for w in others if _is_variable(w)}
            elif guard.kind == AUTOGRAD_VIEW_MATCH:
                others = [self.value_of(other) for other in guard.expected[0]]
                checks = autograd_view_checks(guard, var, others, self.consts, native.autograd_views(guard.expected[1]))
                uses = own | {w for w in others if _is_variable(w)}
            elif guard.kind == MODULE_STATE_MATCH and self._state_in_instance_dict(source):
                read_vars: set[str] = set()
                checks = module_state_checks(guard, var, self.consts, self._instance_reader(source, var, read_vars))
                uses = frozenset(read_vars)
                for name, _ in guard.obj:    # the class check (every call) covers the class's call
                    self._class_finds(self._traced_module(source), name)
            elif guard.kind == MODULE_STATE_MATCH:   # what the class's call finds: every call
                checks = module_state_checks(guard, var, self.consts)
                self._emit_test(Test(tuple(module_call_checks(guard, var, self.consts)),
                                     f"{source.name()}'s class calls as traced", None, False, guard.kind, own))
            else:
                checks = list(CHECK_BUILDERS[guard.kind](guard, var, self.consts))
            batched = None
            if guard.kind == TENSOR_MATCH and native.tensor_spec(guard.expected) is not None:
                batched = (var, native.tensor_spec(guard.expected))
            origin = f"  (from {guard.origin})" if guard.origin else ""
            self._emit_test(Test(tuple(checks), describe_guard(guard) + origin, batched,
                                 decided_by_identity(guard), guard.kind, uses))
            if guard.kind == ID_MATCH and _wants_type_check(guard):
                exact_type = Guard(source, TYPE_MATCH, type(pinned(guard.obj)))
                self._emit_test(Test(tuple(CHECK_BUILDERS[TYPE_MATCH](exact_type, var, self.consts)),
                                     describe_guard(exact_type), None,
                                     decided_by_identity(exact_type), TYPE_MATCH, own))

    def _instance_reader(self, source: Source, var: str, read_vars: set):
        """``read(attr)`` for module state: the flag inline, each hook dict read once (the
        variables its expressions use are added to ``read_vars``)."""
        instance_dict = self._read_attr(var, "__dict__", f"{source.name()}.__dict__")
        read_vars.add(instance_dict)
        traced = self._traced_module(source)
        if self.mode == "guard" and traced is not None:
            for attr in ("training",) + module_facts.MODULE_HOOK_DICTS:
                self._class_lacks(traced, attr)      # no class attribute hides the instance's
            self._class_finds(traced, "_compiled_call_impl")   # nn.Module's None, unless the instance's

        def read(attr: str) -> str:
            if attr == "training":
                return f"{instance_dict}['training']"
            if attr == "__dict__":
                return instance_dict
            if attr == "_compiled_call_impl":   # the instance's, else the class's (guarded above)
                default = self.consts.name_for(getattr(type(traced), attr, None), "class_value")
                return f"{instance_dict}.get({attr!r}, {default})"
            hooks = self._read_item(instance_dict, attr, f"{source.name()}.{attr}")
            read_vars.add(hooks)
            return hooks

        return read

    def _state_in_instance_dict(self, source: Source) -> bool:
        """True when the module's training flag and hook dicts are plain instance attributes."""
        traced = self._traced_module(source)
        return traced is not None and all(
            module_facts.attr_dict_of(traced, attr) == "__dict__"
            for attr in ("training",) + module_facts.MODULE_HOOK_DICTS)

    @contextlib.contextmanager
    def block(self, condition: str, comment: str, uses: frozenset = frozenset(), skip_if: Optional[tuple] = None):
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
                self.steps.append(Block(condition, inner, comment, uses, skip_if))

    def _emit_test(self, test: Test) -> None:
        fresh = tuple(check for check in test.checks if check.test not in self._tests_done)
        self._tests_done.update(check.test for check in fresh)
        if fresh:
            self.steps.append(test._replace(checks=fresh))


def read_uses(read: Read) -> frozenset:
    """The variables a read reads from (from ``how``; a read without one uses none)."""
    how = read.how or ("",)
    operands = {"attr": how[1:2], "generic_attr": how[1:2], "item": how[1:2], "call": how[1:2], "builtin": how[1:3],
                "shortcut": (how[1:2] + how[3] + how[4:5]) if how[0] == "shortcut" else ()}.get(how[0], ())
    return frozenset(w for w in operands if _is_variable(w))


def _is_variable(name: str) -> bool:
    """True for a generated variable or argument (``v3``, ``L_x``), False for a constant's name
    (``___torch_2``) or the ``None`` that global-state sources use."""
    return name.startswith(("v", "L_"))


def _attr(base: str, name: str) -> tuple[str, tuple]:
    """``base.name`` as Python (``getattr`` for a name that is no identifier) and as data."""
    expr = (f"{base}.{name}" if name.isidentifier() and not keyword.iskeyword(name)
            else f"getattr({base}, {name!r})")
    return expr, ("attr", base, name)


_NOT_FOUND = object()


def decided_by_identity(guard: Guard) -> bool:
    """True when the guard's outcome cannot change while the objects it looks at (and the
    contents of the dicts among them) stay the same: what dict version tags can vouch for."""
    if guard.kind in (ID_MATCH, EQUALS_MATCH, COMPARE_MATCH, MODULE_STATE_MATCH, GLOBAL_HOOKS_EMPTY, ALIAS_MATCH,
                      DISTINCT_MATCH):
        return True
    if guard.kind == TYPE_MATCH:   # only a heap type's instance can change class
        return not guard.expected.__flags__ & _HEAPTYPE
    if guard.kind == LENGTH_MATCH:
        return guard.expected[0] in (tuple, dict)
    if guard.kind == DICT_KEYS_MATCH:   # OrderedDict.move_to_end reorders without a new tag
        return guard.expected[0] is dict
    return False   # tensors (metadata changes in place), grad mode, lists


_HEAPTYPE = 1 << 9


def _wants_type_check(guard: Guard) -> bool:
    """Identity-matched modules (nn.Modules and Python modules) also get an exact type check, so
    attribute shortcuts stay valid even if someone assigned ``obj.__class__``."""
    kind = type(pinned(guard.obj))
    return kind is types.ModuleType or module_facts.uses_module_getattr(kind)

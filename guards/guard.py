"""Guards: predicates over a source, built from the real value seen at trace time.

A ``Guard`` is data: its source, its kind and the hashable facts it expects, so the
tracer may add the same guard many times and a set keeps one.  What a guard *checks*
lives in ``checks.py`` (one builder per kind), which turns a guard into lines of Python.

    type_match(LocalSource("n"), 3)          # type(L['n']) is int
    equals_match(LocalSource("n"), 3)        # L['n'] == 3 (and it is an int)
    tensor_match(LocalSource("x"), x)        # dtype, device, shape, strides, requires_grad, type, no conj/neg bit
"""

from __future__ import annotations

import abc
import collections
import dataclasses
import math
import operator
import types
import weakref
from typing import Any, Hashable, Optional, Sequence

import torch

from . import module_facts
from .source import (AutocastSource, ClassSource, GlobalModuleHooksSource, GradModeSource, Source, TorchStateSource,
                     torch_state_function)


class UnguardableValue(ValueError):
    """The value cannot be guarded this way (e.g. equality on a non-constant)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


# Kinds, in the order their checks run on one source: identity and type first, because
# the other checks read attributes that only exist on the right type.
ID_MATCH = "ID_MATCH"
TYPE_MATCH = "TYPE_MATCH"
EQUALS_MATCH = "EQUALS_MATCH"
COMPARE_MATCH = "COMPARE_MATCH"
TENSOR_MATCH = "TENSOR_MATCH"
LENGTH_MATCH = "LENGTH_MATCH"
DICT_KEYS_MATCH = "DICT_KEYS_MATCH"
MODULE_STATE_MATCH = "MODULE_STATE_MATCH"
GLOBAL_HOOKS_EMPTY = "GLOBAL_HOOKS_EMPTY"
GRAD_MODE_MATCH = "GRAD_MODE_MATCH"
AUTOCAST_MATCH = "AUTOCAST_MATCH"
TORCH_STATE_MATCH = "TORCH_STATE_MATCH"
CLASS_MATCH = "CLASS_MATCH"
ABSENT_MATCH = "ABSENT_MATCH"
ALIAS_MATCH = "ALIAS_MATCH"
DISTINCT_MATCH = "DISTINCT_MATCH"
STORAGE_MATCH = "STORAGE_MATCH"
AUTOGRAD_VIEW_MATCH = "AUTOGRAD_VIEW_MATCH"

KIND_ORDER = {
    kind: rank
    for rank, kind in enumerate(
        (ID_MATCH, TYPE_MATCH, EQUALS_MATCH, COMPARE_MATCH, TENSOR_MATCH, LENGTH_MATCH, DICT_KEYS_MATCH,
         MODULE_STATE_MATCH, GLOBAL_HOOKS_EMPTY, GRAD_MODE_MATCH, AUTOCAST_MATCH, TORCH_STATE_MATCH,
         CLASS_MATCH, ABSENT_MATCH, ALIAS_MATCH, DISTINCT_MATCH, STORAGE_MATCH, AUTOGRAD_VIEW_MATCH)
    )
}


@dataclasses.dataclass(frozen=True)
class Guard:
    """``source`` must satisfy ``kind`` with the facts in ``expected``.

    ``obj`` is, for an identity guard, its pin (``pin``: a weak reference to the object where it
    takes one, else the object itself), for a type guard a hint of the traced value for codegen
    (``value_hint``), else the expected value; ``origin`` says which line of user code needed the
    guard.  Neither takes part in equality or hashing.
    """

    source: Source
    kind: str
    expected: Hashable
    obj: Any = dataclasses.field(default=None, compare=False, repr=False)
    origin: str = dataclasses.field(default="", compare=False, repr=False)   # the line that needed it ("f.py:4 in f")

    def __str__(self) -> str:
        from .checks import describe_guard

        return describe_guard(self)


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    """Everything a graph specialises on about one tensor."""

    type: type
    dtype: torch.dtype
    device: torch.device
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    requires_grad: bool


def type_match(source: Source, value: Any) -> Guard:
    """``type(source) is type(value)`` (exact: a subclass is a different type).

    Keeps a hint of the value for codegen (never trusted, only used to pick a faster way to
    read): a weak reference, or for an immutable constant (a tuple of numbers, say) the value
    itself, so that ``source is value`` can stand for all the checks of its items.
    """
    return Guard(source, TYPE_MATCH, type(value), value_hint(value))


def id_match(source: Source, value: Any) -> Guard:
    """``source is value``: the very object seen at trace time (held by ``pin``)."""
    return Guard(source, ID_MATCH, id(value), pin(value))


def pin(value: Any) -> Any:
    """How an identity guard holds its object: weakly where the object takes a weak reference.

    A guard that held its object strongly would keep alive what the program dropped (a model
    passed as an argument, a helper rebound) for as long as the cache entry lives, where eager
    frees it at the ``del``.  A ``WeakPin`` dies with its object: an identity check against it
    then fails (``pinned``), and it tells its listeners, so the cache can drop the entry.  Objects
    that take no weak reference (lists, dicts, ints, ``None``) are held themselves, so that their
    address cannot be reused by another object while the guard compares with it."""
    try:
        return WeakPin(value)
    except TypeError:
        return value


class WeakPin(weakref.ref):
    """A weak reference an identity guard holds, calling its ``listeners`` when the object dies."""

    __slots__ = ("listeners",)

    def __new__(cls, value: Any):
        return super().__new__(cls, value, WeakPin._died)

    def __init__(self, value: Any):
        super().__init__(value, WeakPin._died)
        self.listeners: list = []

    @staticmethod
    def _died(self) -> None:
        for listener in self.listeners:
            listener()


class _Gone:
    """What a dead pin stands for: no object is it."""

    def __repr__(self) -> str:
        return "<an object that no longer exists>"


GONE = _Gone()


def pinned(pin_: Any) -> Any:
    """The object an identity guard's pin holds, or ``GONE`` once a weakly pinned object died."""
    if type(pin_) is WeakPin:
        value = pin_()
        return GONE if value is None else value
    return pin_


def equals_match(source: Source, value: Any) -> Guard:
    """``source == value`` for a constant, with its type (``1``, ``1.0`` and ``True`` differ)."""
    return Guard(source, EQUALS_MATCH, constant_key(value), value)


# The comparisons a number's guard may ask instead of its value, and their mirrors (``3 < n`` is ``n > 3``).
COMPARISONS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
               "==": operator.eq, "!=": operator.ne}
MIRRORED = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}


def compare_match(source: Source, symbol: str, constant: Any, outcome: bool) -> Guard:
    """``(source <symbol> constant) is outcome`` for an int or float ``source`` (its type guarded
    apart) and a number: what a trace that only compared the number depends on, which holds for
    a whole range of values where ``equals_match`` holds for one."""
    return Guard(source, COMPARE_MATCH, (symbol, constant_key(constant), outcome), constant)


def tensor_match(source: Source, tensor: torch.Tensor) -> Guard:
    """dtype, device, shape, strides, requires_grad, exact type (Parameter vs Tensor), and no lazy
    conjugate or negative bit."""
    if not isinstance(tensor, torch.Tensor):
        raise UnguardableValue(f"{source.name()}: tensor_match on a {type(tensor).__name__}")
    if tensor.layout is not torch.strided:
        raise UnguardableValue(f"{source.name()}: tensors with layout {tensor.layout}")
    spec = TensorSpec(
        type=type(tensor),
        dtype=tensor.dtype,
        device=tensor.device,
        shape=tuple(tensor.shape),
        stride=tuple(torch.Tensor.stride(tensor)),   # not an attribute set on the instance
        requires_grad=tensor.requires_grad,
    )
    return Guard(source, TENSOR_MATCH, spec)


def value_hint(value: Any) -> Any:
    """What a guard keeps of a traced value it does not need: an immutable constant itself, a
    weak reference to a module the planner may read the nn.Module way (``planner._traced_module``),
    else nothing.  A weak reference is visible to the program (``weakref.getweakrefcount``,
    ``getweakrefs``; ``weakref.ref(x)`` returns it again instead of a new one), so none is made
    to the values nothing here would read."""
    if is_immutable_constant(value):
        return value
    if not module_facts.uses_module_getattr(type(value)):
        return None
    try:
        return weakref.ref(value)
    except TypeError:
        return None


def hinted_value(hint: Any) -> Any:
    """The value behind ``value_hint`` (None if it is gone)."""
    return hint() if isinstance(hint, weakref.ref) else hint


def is_immutable_constant(value: Any) -> bool:
    """True for constants whose identity pins their whole content (ints, strs, tuples of them)."""
    try:
        constant_key(value)
    except UnguardableValue:
        return False
    return True


def container_base(cls: type) -> Optional[type]:
    """The builtin container ``cls`` is or derives from (tuple, list, dict, deque), or None: its
    own length and walk, which a subclass's ``__len__`` / ``__iter__`` (the program's) may hide."""
    return next((base for base in (tuple, list, dict, collections.deque) if issubclass(cls, base)), None)


def length_match(source: Source, value: Any) -> Guard:
    """``type(source) is type(value) and len(source) == len(value)`` (lists, tuples, dicts, deques)."""
    if not isinstance(value, (list, tuple, dict, collections.deque)):
        raise UnguardableValue(f"{source.name()}: length_match on a {type(value).__name__}")
    measure = container_base(type(value)).__len__
    return Guard(source, LENGTH_MATCH, (type(value), measure(value)), type(value))


def dict_keys_match(source: Source, d: dict) -> Guard:
    """Same dict type and the same keys in the same order (iteration order is traced)."""
    if not isinstance(d, dict):
        raise UnguardableValue(f"{source.name()}: dict_keys_match on a {type(d).__name__}")
    keys = tuple(d)
    try:
        hash(keys)
    except TypeError:
        raise UnguardableValue(f"{source.name()}: dict keys are not hashable constants")
    return Guard(source, DICT_KEYS_MATCH, (type(d), keys, tuple(map(type, keys))), type(d))


def module_state_match(source: Source, module: torch.nn.Module) -> Guard:
    """Training flag as at trace time, as many hooks in each of the module's hook dicts as then
    (almost always none: a trace that calls the module guards the hooks it ran one by one), no
    global module hooks, and nothing else replaces what its call runs
    (``module_facts.CALL_OVERRIDES``).

    Raises ``UnguardableValue`` if global hooks or such a replacement are present now: a trace
    that inlined ``forward`` without them would be wrong from its very first call.
    """
    if not isinstance(module, torch.nn.Module):
        raise UnguardableValue(f"{source.name()}: module_state_match on a {type(module).__name__}")
    global_hooks = [name for name, hooks in module_facts.global_hook_dicts().items() if hooks]
    if global_hooks:
        raise UnguardableValue(f"{source.name()}: global module hooks are registered ({', '.join(global_hooks)})")
    overrides = module_facts.call_overrides(module)
    if overrides:
        raise UnguardableValue(f"{source.name()}: module's call is replaced ({', '.join(overrides)})")
    calls = tuple((name, class_lookup(type(module), name)) for name in module_facts.CALL_LOOKUPS)
    hook_counts = module_facts.hook_counts(module)
    return Guard(source, MODULE_STATE_MATCH, (bool(module.training), hook_counts), calls)   # obj: what its class's call finds


def global_hooks_empty() -> Guard:
    """No global nn.Module hooks (added by every ``module_state_match``)."""
    return Guard(GlobalModuleHooksSource(), GLOBAL_HOOKS_EMPTY, None)


def grad_mode_match(enabled: bool | None = None) -> Guard:
    """``torch.is_grad_enabled()`` as at trace time (or as given)."""
    if enabled is None:
        enabled = torch.is_grad_enabled()
    return Guard(GradModeSource(), GRAD_MODE_MATCH, bool(enabled))


def autocast_match(enabled: bool | None = None) -> Guard:
    """Autocast on for some device, or on for none, as at trace time (or as given)."""
    if enabled is None:
        enabled = torch._C._is_any_autocast_enabled()
    return Guard(AutocastSource(), AUTOCAST_MATCH, bool(enabled))


def torch_state_match(function: str, value: Any = None) -> Guard:
    """``torch.<function>()`` as at trace time (or ``value``): global torch state the trace relied
    on, e.g. ``get_default_dtype`` (factories and int -> float promotion use it)."""
    if value is None:
        value = torch_state_function(function)()
    if not isinstance(value, (bool, torch.dtype, torch.device, str)):
        raise UnguardableValue(f"torch.{function}() returned a {type(value).__name__}")
    return Guard(TorchStateSource(function), TORCH_STATE_MATCH, value, value)


def default_dtype_match(dtype: torch.dtype | None = None) -> Guard:
    """``torch.get_default_dtype()`` as at trace time."""
    return torch_state_match("get_default_dtype", dtype)


# ``cls.__mro__`` and ``cls.__dict__`` through type's own descriptors: a metaclass never answers them.
mro_of = type.__dict__["__mro__"].__get__
_dict_of = type.__dict__["__dict__"].__get__


class _NotFound:
    """What ``class_lookup`` gives for a name no class of the MRO defines."""

    def __repr__(self) -> str:
        return "<not found>"


NOT_FOUND = _NotFound()


def class_lookup(cls: type, name: str) -> Any:
    """What the MRO lookup of ``name`` on ``cls`` finds (each class's own ``__dict__``, in MRO order),
    as CPython's ``_PyType_Lookup`` does: no descriptor is run, no metaclass is asked."""
    return next((_dict_of(klass)[name] for klass in mro_of(cls) if name in _dict_of(klass)), NOT_FOUND)


@dataclasses.dataclass(frozen=True, eq=False)
class ClassFacts:
    """What an answer read from a class relied on (the guard keeps these objects alive)."""

    mro_tuple: Optional[tuple]     # the very ``__mro__`` tuple, or None when not relied on
    lookups: tuple                 # ((name, what class_lookup finds, maybe NOT_FOUND), ...)
    abc_token: Optional[int]       # ``abc.get_cache_token()``, when an ABC registry answered


def class_match(cls: type, *, mro: bool = False, lookups: Sequence[str] = (), registry: bool = False) -> Guard:
    """What ``isinstance`` / ``issubclass`` / ``callable`` answered from ``cls`` relied on, still so:
    its MRO is the very tuple seen (assigning ``__bases__`` to it or to a base makes a new one),
    each name of ``lookups`` still resolves along it to the same object (or to none), and with
    ``registry`` no ABC has registered a class since (``abc.get_cache_token()`` moves on every
    ``register``).  Reads only type's own slots and class dicts: no program code runs."""
    facts = ClassFacts(mro_of(cls) if mro else None,
                       tuple((name, class_lookup(cls, name)) for name in sorted(set(lookups))),
                       abc.get_cache_token() if registry else None)
    expected = (id(facts.mro_tuple) if mro else None, tuple((name, id(found)) for name, found in facts.lookups),
                facts.abc_token)
    return Guard(ClassSource.of(cls), CLASS_MATCH, expected, facts)


def merged_class_matches(guards: Sequence[Guard]) -> list:
    """The guards with every ``CLASS_MATCH`` of one class folded into the first: what each
    relied on, together (one check of the class's version tag instead of one per use: each
    tensor method or operator a frame uses adds one).  Two that saw the class differently (it
    changed while the frame was traced) stay apart."""
    out: list = []
    first: dict = {}
    for guard in guards:
        at = first.get(guard.source) if guard.kind == CLASS_MATCH else None
        merged = _merged_facts(out[at].obj, guard.obj) if at is not None else None
        if merged is None:
            if guard.kind == CLASS_MATCH and guard.source not in first:
                first[guard.source] = len(out)
            out.append(guard)
            continue
        expected = (id(merged.mro_tuple) if merged.mro_tuple is not None else None,
                    tuple((name, id(found)) for name, found in merged.lookups), merged.abc_token)
        out[at] = dataclasses.replace(out[at], expected=expected, obj=merged)
    return out


def _merged_facts(a: ClassFacts, b: ClassFacts) -> Optional[ClassFacts]:
    def either(x, y):
        return x if y is None else y if x is None else x if x is y or x == y else _CLASH

    lookups = dict(a.lookups)
    for name, found in b.lookups:
        if lookups.setdefault(name, found) is not found:
            return None
    mro, token = either(a.mro_tuple, b.mro_tuple), either(a.abc_token, b.abc_token)
    if mro is _CLASH or token is _CLASH:
        return None
    return ClassFacts(mro, tuple(sorted(lookups.items())), token)


_CLASH = object()


def absent_match(source: Source, value: Any, attr: str, instance_only: bool = False) -> Guard:
    """``source`` has no attribute ``attr``: neither its class (through the MRO) nor, for an
    object with an instance ``__dict__``, the instance defines it, and the class still answers a
    missing name as it did (``MISSING_NAME_HOOKS``: one added later would answer ``attr``).  For
    a class, ``attr`` is not found on it (``getattr(cls, attr)`` would fail).  ``instance_only``:
    the class does define ``attr`` (a method), and the instance must not hide it with an
    attribute of its own.  ``obj`` keeps what the hooks' lookups found (``expected``: their ids)."""
    descriptor, hooks = None, ()
    if instance_only:
        mode = "instance"
    elif isinstance(value, type):
        mode = "class"
    else:
        mode = "object" if isinstance(_instance_dict(value), dict) else "slots"
        found = next((k.__dict__[attr] for k in type(value).__mro__ if attr in k.__dict__), None)
        if isinstance(found, types.MemberDescriptorType):    # an unset __slots__ entry
            mode, descriptor = "slot", found
        else:    # (an unset slot is read with getattr itself: the hooks run there)
            hooks = tuple((name, class_lookup(type(value), name)) for name in MISSING_NAME_HOOKS)
    # by the class's MRO, not ``getattr`` on it, where its metaclass is not ``type``: a metaclass's
    # attributes or ``__getattr__`` (the program's code) play no part in an instance's lookup
    by_mro = mode != "class" and type(type(value)) is not type
    expected = (attr, mode, descriptor, tuple((name, id(found)) for name, found in hooks), by_mro)
    return Guard(source, ABSENT_MATCH, expected, hooks)


# What ``getattr(obj, name)`` runs for a name that neither the instance nor its class defines.
MISSING_NAME_HOOKS = ("__getattr__", "__getattribute__")


def _instance_dict(value: Any):
    """``value.__dict__``, or None when it has none (a user ``__getattr__`` asked for it may
    raise anything, not only AttributeError)."""
    try:
        return value.__dict__
    except Exception:
        return None


def alias_match(source: Source, relations: tuple) -> Guard:
    """Which objects ``source`` is and is not: ``relations`` is ``((other_source, same), ...)``
    with ``same`` True for ``source is other`` and False for ``source is not other``."""
    return Guard(source, ALIAS_MATCH, tuple((other, bool(same)) for other, same in relations))


def distinct_match(sources: tuple) -> Guard:
    """The sources hold pairwise distinct objects (one set of ids, for many of them)."""
    sources = tuple(sources)
    if len(sources) < 2:
        raise UnguardableValue("distinct_match needs two sources or more")
    return Guard(sources[-1], DISTINCT_MATCH, sources[:-1])


def storage_match(sources: tuple, tensors: Sequence[torch.Tensor]) -> Guard:
    """Which of the tensors at ``sources`` share one storage, as among ``tensors`` now.  The
    trace modelled that sharing (inputs in one storage got meta examples in one storage), and
    what an in-place write reaches, or whether it raises for overlap, follows from it."""
    sources = tuple(sources)
    if len(sources) < 2 or len(sources) != len(tensors):
        raise UnguardableValue("storage_match needs one tensor per source, two or more")
    return Guard(sources[-1], STORAGE_MATCH, (sources[:-1], storage_groups(tensors)))


def storage_key(tensor: Any) -> Optional[int]:
    """The address of ``tensor``'s storage, or None when it has none to share (a sparse
    tensor, a wrapper whose storage is not there to read).  Torch function modes and
    subclasses are not asked: the storage is the TensorImpl's own."""
    with torch._C.DisableTorchFunction():
        try:
            return torch.Tensor.untyped_storage(tensor)._cdata or None
        except Exception:   # noqa: BLE001 - no storage: it shares memory with nothing
            return None


def storage_groups(tensors: Sequence[Any]) -> tuple:
    """For each tensor, the position of the first tensor in the same storage (its own
    position when none before it shares it): equal tuples mean the same sharing."""
    first: dict = {}
    groups = []
    for i, tensor in enumerate(tensors):
        key = storage_key(tensor)
        groups.append(i if key is None else first.setdefault(key, i))
    return tuple(groups)


class PyStorageGroups:
    """``PyStorageGroups(groups)(*tensors)``: they are tensors and ``storage_groups(tensors) ==
    groups`` (the compiled ``StorageGroups`` answers the same from the TensorImpls)."""

    def __init__(self, groups: tuple):
        self.groups = tuple(groups)

    def __call__(self, *tensors) -> bool:
        return all(isinstance(t, torch.Tensor) for t in tensors) and storage_groups(tensors) == self.groups


def autograd_views_match(sources: tuple, tensors: Sequence[torch.Tensor]) -> Guard:
    """Each tensor at ``sources`` is, for autograd, the kind of view it is now
    (``autograd_view``).  Whether eager lets a write in place through a tensor depends on it (a
    view of a leaf that requires grad, a view made under no_grad, one of several views an op
    returned), and so does whether autograd can read its history at all; the trace wrote inputs
    in place, and recorded ops on inputs that require grad, through examples of the same kind."""
    sources = tuple(sources)
    if not sources or len(sources) != len(tensors):
        raise UnguardableValue("autograd_views_match needs one tensor per source")
    return Guard(sources[-1], AUTOGRAD_VIEW_MATCH, (sources[:-1], tuple(map(autograd_view, tensors))))


def autograd_view(tensor: Any) -> tuple:
    """``()`` for a tensor autograd does not know as a view, else ``(its base is a leaf, its base
    requires grad, the name of its CreationMeta, its history can be read)``: with
    ``requires_grad``, what decides whether eager allows an in-place op on it, and whether an op
    that records it raises (a view made under no_grad, or one of several, written in place
    since: autograd refuses to rebuild its grad_fn)."""
    if not torch.Tensor._is_view(tensor):
        return ()
    try:
        creation = torch._C._autograd._get_creation_meta(tensor).name
    except RuntimeError:     # a view autograd does not differentiate through keeps none
        creation = ""
    try:
        torch._C.TensorBase.grad_fn.__get__(tensor)
        readable = True
    except RuntimeError:
        readable = False
    base = torch._C.TensorBase._base.__get__(tensor)
    return (base.is_leaf, base.requires_grad, creation, readable)


class PyAutogradViews:
    """``PyAutogradViews(kinds)(*tensors)``: they are tensors and ``autograd_view`` of each is
    its kind in ``kinds`` (the compiled ``AutogradViews`` answers a tensor that is no view from
    its TensorImpl and asks this module's ``autograd_view`` of the others)."""

    def __init__(self, kinds: tuple):
        self.kinds = tuple(kinds)

    def __call__(self, *tensors) -> bool:
        return len(tensors) == len(self.kinds) and all(isinstance(t, torch.Tensor) for t in tensors) \
            and tuple(map(autograd_view, tensors)) == self.kinds


# ----------------------------------------------------------------------------- constants

_SCALAR_CONSTANT_TYPES = (int, float, bool, str, bytes, complex, type(None), torch.dtype)


def constant_key(value: Any) -> Hashable:
    """A hashable key that tells apart constants ``==`` would confuse.

    ``1``, ``1.0`` and ``True`` compare equal, and so do ``0.0`` and ``-0.0``; ``nan``
    equals nothing.  The key pairs each value with its type and spells floats exactly.
    """
    if type(value) is float:
        return (float, "nan" if math.isnan(value) else value.hex())
    if type(value) in _SCALAR_CONSTANT_TYPES:
        return (type(value), value)
    if issubclass(type(value), (torch.device, torch.Size)):   # the real type: a mock's __class__ lies
        return (type(value), value)
    if type(value) is tuple:
        return (tuple, tuple(constant_key(item) for item in value))
    raise UnguardableValue(f"equals_match on a {type(value).__name__}: not a constant")

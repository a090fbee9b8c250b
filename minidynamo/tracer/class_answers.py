"""``isinstance`` / ``issubclass`` / ``callable``, answered from classes, guarded by what they read.

Each answer is a fact about classes, and classes change between calls: ``C.__bases__ = (B,)``
gives C a new MRO, ``Base.register(X)`` adds to an ABC's registry, ``X.__call__ = f`` makes X's
instances callable.  So the trace answers from the real classes and guards exactly what CPython
read (``guards.class_match``):

- ``isinstance(o, K)`` / ``issubclass(C, K)``: the MRO of ``type(o)`` / ``C``; for an ABC, the
  registries (``abc.get_cache_token()``); for a metaclass other than ``type``, where its
  ``__instancecheck__`` / ``__subclasscheck__`` come from; and when ``o.__class__`` is read
  (an ABC, or no MRO hit), that it is still ``object``'s own descriptor (so it is ``type(o)``);
- ``callable(o)``: where ``type(o)`` finds ``__call__`` (or that it finds none).

A check that runs code of its own on every call is refused, never guessed: a metaclass hook other
than type's or ABCMeta's (a ``runtime_checkable`` Protocol's answer depends on the instance's
attributes), a user ``__subclasshook__``, a ``__class__`` property or ``__getattribute__``.
Built-in classes cannot change, and a library's classes are assumed unpatched
(``config.assume_libraries_unpatched``), so only the program's own classes cost a guard.
"""

from __future__ import annotations

import abc
import types

import torch

import guards as G

from .. import config
from ..exc import Unsupported
from .library import is_library_value

# Metaclass hooks whose answer depends only on the MRO and the ABC registries: type's own,
# ABCMeta's (the C ``_abc`` module's caches and registries), and Parameter's, which for an object
# that is no tensor is type's, and for a tensor is answered from the tensor's guarded exact type.
MODELLED_HOOKS = {
    "__instancecheck__": (type.__dict__["__instancecheck__"], abc.ABCMeta.__dict__["__instancecheck__"],
                          torch.nn.parameter._ParameterMeta.__dict__["__instancecheck__"]),
    "__subclasscheck__": (type.__dict__["__subclasscheck__"], abc.ABCMeta.__dict__["__subclasscheck__"]),
}
HOOKS = tuple(MODELLED_HOOKS)
# What ``o.__class__`` is read through: plain (it is ``type(o)``) when ``__class__`` is object's own
# descriptor and ``__getattribute__`` a C slot (object's generic lookup, or a built-in type's).
CLASS_READ = ("__class__", "__getattribute__")

_IMMUTABLE_TYPE = 1 << 8       # Py_TPFLAGS_IMMUTABLETYPE: built-in and extension types
_COLLECTION_FLAGS = (1 << 5) | (1 << 6)     # Py_TPFLAGS_SEQUENCE, Py_TPFLAGS_MAPPING
_flags_of = type.__dict__["__flags__"].__get__


def isinstance_answer(tx, cls: type, kinds) -> bool:
    """``isinstance(o, kinds)`` for an ``o`` whose exact type ``cls`` is guarded (or made by the trace)."""
    classes = classes_of(kinds, "isinstance()")
    reads_class = reads_instance_class(cls, classes)
    if reads_class and not plain_class_read(cls):
        raise Unsupported(f"isinstance() reads the __class__ of a {_name(cls)} through its own __class__ or "
                          f"__getattribute__ (code that runs on every check)")
    answer = any(issubclass(cls, kind) for kind in classes)
    guard_class(tx, cls, mro=True, lookups=CLASS_READ if reads_class else ())
    _guard_kinds(tx, classes)
    return answer


def issubclass_answer(tx, cls, kinds) -> bool:
    """``issubclass(cls, kinds)`` for a class the trace knows (a constant, or a guarded ``type(o)``)."""
    if not isinstance(cls, type):
        raise Unsupported(f"issubclass() of a {type(cls).__name__}, not a class (TypeError)")
    classes = classes_of(kinds, "issubclass()")
    answer = any(issubclass(cls, kind) for kind in classes)
    guard_class(tx, cls, mro=True)
    _guard_kinds(tx, classes)
    return answer


def callable_answer(tx, cls: type) -> bool:
    """``callable(o)`` for an ``o`` of exact type ``cls``: whether ``cls`` finds ``__call__`` (CPython's
    ``tp_call``, which follows the class dicts of its MRO)."""
    guard_class(tx, cls, lookups=("__call__",))
    return G.class_lookup(cls, "__call__") is not G.NOT_FOUND


def builtin_class(cls: type) -> bool:
    """A built-in or extension class: nothing about it can change."""
    return bool(_flags_of(cls) & _IMMUTABLE_TYPE)


def collection_flag(tx, cls: type, flag: int) -> bool:
    """Whether ``cls`` has ``flag`` (Py_TPFLAGS_SEQUENCE or _MAPPING: what a match statement's
    sequence and mapping patterns ask).  A class keeps the one it has; a later
    ``collections.abc.Sequence.register(C)`` gives one to a class that has neither, so then no
    ABC may have registered a class since (the registry guard)."""
    flags = _flags_of(cls)
    if not flags & _COLLECTION_FLAGS:
        guard_class(tx, cls, registry=True)
    return bool(flags & flag)


def classes_of(kinds, question: str) -> list:
    """The classes ``question`` tries, in CPython's order (tuples flattened), each checked to
    answer without running code of its own."""
    if isinstance(kinds, tuple):
        return [kind for item in kinds for kind in classes_of(item, question)]
    if not isinstance(kinds, type):
        raise Unsupported(f"{question} with a {type(kinds).__name__}, which is no class (its own check, or a TypeError)")
    _refuse_own_checks(kinds, question)
    return [kinds]


def plain_class_read(cls: type) -> bool:
    """``o.__class__`` is ``type(o)`` for an ``o`` of exact type ``cls``, with no code of the program run."""
    return (G.class_lookup(cls, "__class__") is object.__dict__["__class__"]
            and isinstance(G.class_lookup(cls, "__getattribute__"), types.WrapperDescriptorType))


def reads_instance_class(cls: type, classes: list) -> bool:
    """Whether CPython reads ``o.__class__`` answering ``isinstance(o, classes)``: an exact type or
    an MRO hit answers first, an ABC's check always reads it, and a miss falls back to it."""
    mro = G.mro_of(cls)
    for kind in classes:
        if kind is cls:
            return False
        if issubclass(type(kind), abc.ABCMeta):
            return True
        if any(base is kind for base in mro):
            return False
    return True


def guard_class(tx, cls: type, *, mro: bool = False, lookups: tuple = (), registry: bool = False) -> None:
    """Guard what an answer read from ``cls`` (``guards.class_match``), except what cannot change:
    a built-in type, or (assumed unpatched) a library's class; an ABC's registry is always guarded,
    since registering is what programs do, not patching."""
    if _flags_of(cls) & _IMMUTABLE_TYPE or (config.assume_libraries_unpatched and is_library_value(cls)):
        mro, lookups = False, ()
    if mro or lookups or registry:
        tx.output.add_guard(G.class_match(cls, mro=mro, lookups=lookups, registry=registry))


def _guard_kinds(tx, classes: list) -> None:
    """The metaclass hooks each class is checked by, and the registries of the ABCs among them."""
    for kind in classes:
        if type(kind) is not type:
            guard_class(tx, type(kind), lookups=HOOKS)
        if issubclass(type(kind), abc.ABCMeta):
            guard_class(tx, kind, registry=True)


def _refuse_own_checks(kind: type, question: str) -> None:
    """A metaclass hook other than the modelled ones, or an ABC's ``__subclasshook__`` written in
    the program, runs code on every check (whose answer may depend on the very instance)."""
    meta = type(kind)
    if meta is type:     # CPython's fast path: no hook is looked up
        return
    for name, modelled in MODELLED_HOOKS.items():
        hook = G.class_lookup(meta, name)
        if not any(hook is known for known in modelled):
            raise Unsupported(f"{question} with {_name(kind)}, whose metaclass {_name(meta)} has its own {name} "
                              f"(code that runs on every check)")
    hook = G.class_lookup(kind, "__subclasshook__")      # an ABC's check calls it
    if issubclass(meta, abc.ABCMeta) and hook is not object.__dict__["__subclasshook__"] \
            and not is_library_value(getattr(hook, "__func__", hook)):
        raise Unsupported(f"{question} with {_name(kind)}: a __subclasshook__ of the program (user code)")


def _name(cls: type) -> str:
    return str(type.__dict__["__qualname__"].__get__(cls, type))


# -- the protocols a model of an object relies on -----------------------------------------------------
_BINARY = ("add", "sub", "mul", "matmul", "truediv", "floordiv", "mod", "divmod", "pow", "lshift", "rshift",
           "and", "xor", "or")
# The special names CPython looks up on an object's class (``_PyType_Lookup``) for what the tracer
# models without running the class's code: attribute access and stores, construction, truth,
# length, iteration, containment, indexing, hashing, comparisons, operators, calls, conversions.
PROTOCOL_NAMES = tuple(sorted({
    "__getattribute__", "__getattr__", "__setattr__", "__delattr__", "__class__",
    "__new__", "__init__", "__del__", "__call__", "__get__", "__set__", "__delete__",
    "__bool__", "__len__", "__length_hint__", "__iter__", "__next__", "__reversed__", "__contains__",
    "__getitem__", "__setitem__", "__delitem__", "__missing__", "__index__", "__hash__",
    "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__",
    "__neg__", "__pos__", "__abs__", "__invert__", "__int__", "__float__", "__complex__", "__round__",
    "__trunc__", "__floor__", "__ceil__", "__repr__", "__str__", "__format__", "__bytes__",
    "__enter__", "__exit__", "__torch_function__",
    *(f"__{prefix}{op}__" for op in _BINARY for prefix in ("", "r", "i")),
}))


def guard_protocol(tx, cls: type, names: tuple = PROTOCOL_NAMES) -> None:
    """A model of ``cls``'s instances (a namedtuple as a tuple, an object made in the trace) holds
    while each of ``names`` resolves along ``cls``'s MRO as it did: a method added to, replaced
    on or deleted from the class or a base later (``C.__setattr__ = f``, ``C.x = property(...)``)
    fails the guard.  Free on a hit while the class is unchanged (its version tag answers)."""
    guard_class(tx, cls, lookups=tuple(names))
    meta = type(cls)
    if meta is not type:                       # ``cls(...)`` runs the metaclass's ``__call__``
        guard_class(tx, meta, lookups=("__call__",))

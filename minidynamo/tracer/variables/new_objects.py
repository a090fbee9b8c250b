"""Objects of user classes created during the trace (``Output(x, y)``, a dataclass, an
``OrderedDict`` subclass such as transformers' ``ModelOutput``, a cache object).

    cls(*args)  ->  NewObjectVariable: the instance ``__dict__`` (name -> tracker) and, for a
                    dict subclass, its items (a DictVariable); ``__init__`` / ``__post_init__``
                    and every other Python method are inlined on it
    returned / stored  ->  rebuilt after the graph ran (``rebuild``): ``cls.__new__(cls)``,
                    the items put in with the builtin base's own ``__setitem__``, the attributes
                    (``__dict__`` or ``__slots__``) with ``object.__setattr__``; no user code runs

Only classes whose instances Python makes without user code are modelled: ``type`` (or a
metaclass that leaves ``__call__`` alone) calls the builtin ``__new__`` of ``object`` /
``dict`` / ``OrderedDict``, then ``__init__``.  Which slots are the user's is told by the
function found in the MRO: a Python function is the user's (inlined), a slot wrapper of one of
those builtin bases is the builtin behaviour (modelled here: ``BuiltinBaseMethod``).

The object is new, so changing it is no side effect; its methods are read through its class
(``cls.name``, guarded by identity), since it has no source of its own.
"""

from __future__ import annotations

import collections
import types

import guards as G
from ...exc import Unsupported
from ..program_code import python_slot
from .base import AttributeMissing, VariableTracker, describe, instance_dict, static_class_attribute
from .constant import ConstantVariable
from .dicts import DictVariable
from ..class_answers import guard_class, guard_protocol
from .objects import ClassVariable, UserObjectVariable, lookup_class_attribute

# The builtin classes a modelled class may inherit from, and the state each gives it.
BUILTIN_BASES = (object, dict, collections.OrderedDict)


def builtin_owner(klass, name, mro_start=0):
    """The builtin base (object, dict, OrderedDict) whose C attribute ``name`` answers, if the
    lookup from ``mro_start`` reaches one before any Python definition."""
    for base in klass.__mro__[mro_start:]:
        if name in base.__dict__:
            return base if base in BUILTIN_BASES else None
    return None


def modelled_class(klass) -> str | None:
    """Why instances of ``klass`` cannot be created in the trace (None: they can)."""
    if type(klass).__call__ is not type.__call__:
        return f"its metaclass {type(klass).__name__} defines __call__"
    for base in klass.__mro__:
        if base not in BUILTIN_BASES and not base.__flags__ & (1 << 9):   # a builtin type: not heap
            return f"it inherits from the builtin {base.__name__}"
    if klass.__new__ not in (object.__new__, dict.__new__):
        return "it defines __new__"
    if python_slot(klass, "__del__") is not None:
        return "it defines __del__"
    if static_class_attribute(klass, "__class__") is not object.__dict__["__class__"]:
        return "it answers __class__ itself (isinstance reads it)"
    return None


class NewObjectVariable(UserObjectVariable):
    """An instance made during the trace: its attributes and (dict subclasses) items.

    It is a UserObjectVariable to the operators (``==``, ``<``, ``+``, ``bool``, ``len``):
    a user class's Python dunders are inlined in CPython's order, anything else refused.
    ``value`` is a bare stand-in instance (``cls.__new__(cls)``, no user code): it gives the
    operators the real type and a distinct identity, and is never read or returned."""

    is_new_object = True
    returns_real = False           # rebuilt after the graph (templates.Templates), never re-read

    def __init__(self, klass: type, class_vt: VariableTracker):
        VariableTracker.__init__(self)
        self.value = klass.__new__(klass)
        self.klass = klass
        self.class_vt = class_vt                      # the class as read (with its source)
        self.attrs: dict = {}
        base = next((b for b in klass.__mro__ if b in (dict, collections.OrderedDict)), None)
        self.dict_part = DictVariable({}, base) if base is not None else None

    def python_type(self):
        return self.klass

    @property
    def class_source(self):
        return self.class_vt.source

    # -- reading attributes ---------------------------------------------------------------
    def class_lookup(self, tx, name, mro_start=0):
        return lookup_class_attribute(tx, self.klass, name, self, None, mro_start, self.class_source)

    def generic_getattr(self, tx, name):
        """``object.__getattribute__``: data descriptors, the instance dict, the class (a Python
        ``__getattr__`` is ``var_getattr``'s to ask)."""
        if name == "__class__":
            return self.class_vt
        if name == "__dict__":
            return InstanceDictVariable.of(tx, self)
        guard_class(tx, self.klass, lookups=(name,))          # a descriptor added later would answer
        descriptor = static_class_attribute(self.klass, name)
        if isinstance(descriptor, types.MemberDescriptorType):      # a __slots__ entry
            if name not in self.attrs:
                raise AttributeMissing(f"{self.klass.__name__}.{name} is an unset slot (AttributeError)", self, name)
            return self.attrs[name]
        if name in self.attrs and not hasattr(descriptor, "__set__"):
            return self.attrs[name]
        if name == "__weakref__" and isinstance(descriptor, types.GetSetDescriptorType):
            return ConstantVariable(None)   # no weak reference to it can exist yet: it is not real
        owner = builtin_owner(self.klass, name)
        if owner is not None:
            return BuiltinBaseMethod(owner, name, self)
        found = self.class_lookup(tx, name)
        if found is not None:
            return found
        if any(name in b.__dict__ for b in self.klass.__mro__):
            source = G.AttrSource(self.class_source, name) if self.class_source is not None else None
            return ClassVariable(self.klass, self.class_source).var_getattr(tx, name) if source is not None \
                else _refuse(f"class attribute {name!r} of {self.klass.__name__} read without a source")
        raise AttributeMissing(f"{self.klass.__name__} object has no attribute {name!r} (AttributeError)", self, name)

    def guard_absent(self, tx, name):
        if self.class_source is None:
            raise Unsupported(f"relying on the absence of {self.klass.__name__}.{name} (class without a source)")
        descriptor = static_class_attribute(self.klass, name)
        if isinstance(descriptor, types.MemberDescriptorType):     # an unset slot: it stays a slot
            tx.output.add_guard(G.id_match(G.AttrSource(self.class_source, name), descriptor))
            return
        tx.output.add_guard(G.absent_match(self.class_source, self.klass, name))   # the instance dict is ours

    # -- writing attributes -------------------------------------------------------------------
    def store_attribute(self, tx, name, value):
        """``obj.name = value``: a Python ``__setattr__`` is inlined, else the plain store."""
        if python_slot(self.klass, "__setattr__") is not None:
            self.class_lookup(tx, "__setattr__").call_function(tx, [ConstantVariable(name), value], {})
            return
        self.generic_setattr(tx, name, value)

    def generic_setattr(self, tx, name, value):
        guard_class(tx, self.klass, lookups=(name,))          # a property or slot added later would take it
        descriptor = static_class_attribute(self.klass, name)
        if isinstance(descriptor, types.MemberDescriptorType):      # a __slots__ entry: stored
            self.attrs[name] = value
            return
        if hasattr(descriptor, "__set__"):
            raise Unsupported(f"assignment to {self.klass.__name__}.{name} (a descriptor)")
        if self.klass.__dictoffset__ == 0:
            raise Unsupported(f"{self.klass.__name__} object has no attribute {name!r} (__slots__, AttributeError)")
        self.attrs[name] = value

    def delete_attribute(self, tx, name):
        """``del obj.name`` / ``delattr(obj, name)``: a Python ``__delattr__`` is inlined, else the
        plain deletion from the instance dict (transformers' ``get_text_config`` deletes the
        other side's keys from a config it deep-copied)."""
        guard_class(tx, self.klass, lookups=("__delattr__", name))    # no hook or descriptor added later
        if python_slot(self.klass, "__delattr__") is not None:
            self.class_lookup(tx, "__delattr__").call_function(tx, [ConstantVariable(name)], {})
            return
        if builtin_owner(self.klass, "__delattr__") is not object:
            raise Unsupported(f"deleting attribute {name!r} of a {self.klass.__name__} (a __delattr__ in C)")
        self.generic_delattr(tx, name)

    def generic_delattr(self, tx, name):
        """``object.__delattr__(obj, name)``: the instance dict entry (or slot) goes."""
        guard_class(tx, self.klass, lookups=(name,))
        descriptor = static_class_attribute(self.klass, name)
        if hasattr(descriptor, "__delete__") and not isinstance(descriptor, types.MemberDescriptorType):
            raise Unsupported(f"deletion of {self.klass.__name__}.{name} (a descriptor)")
        if name not in self.attrs:
            raise Unsupported(f"{self.klass.__name__} object has no attribute {name!r} to delete (AttributeError)")
        del self.attrs[name]

    # -- the protocols the interpreter asks for ------------------------------------------------
    def has_own(self, name) -> bool:
        return name in self.attrs

    def subscript(self, tx, index):
        return self.call_method(tx, "__getitem__", [index], {})

    def truth(self, tx):
        for name in ("__bool__", "__len__"):
            if python_slot(self.klass, name) is not None:
                result = self.call_method(tx, name, [], {}).as_python_constant()
                return bool(result)
        return self.dict_part.truth(tx) if self.dict_part is not None else True

    def unpack(self, tx):
        if python_slot(self.klass, "__iter__") is not None:
            raise Unsupported(f"iteration over a {self.klass.__name__} with a Python __iter__")
        if self.dict_part is None:
            raise Unsupported(f"iteration over a {self.klass.__name__} object")
        return self.dict_part.unpack(tx)

    def call_function(self, tx, args, kwargs):
        if python_slot(self.klass, "__call__") is None:
            raise Unsupported(f"call to a {self.klass.__name__} object")
        return self.call_method(tx, "__call__", args, kwargs)

    def __repr__(self):
        return f"NewObjectVariable({self.klass.__name__})"


class InstanceDictVariable(DictVariable):
    """``obj.__dict__`` of an object made in the trace: a dict view whose items *are* the
    object's attributes (one Python dict shared with ``obj.attrs``), so a store through either
    is seen by both, as in CPython.  transformers' ``PretrainedConfig.to_dict`` deep-copies
    ``self.__dict__`` of a config the frame copied.  Used inside the frame only: returned,
    stored or kept across a graph break it would be rebuilt as a separate dict, so it is
    refused there (``cannot_rebuild``)."""

    @classmethod
    def of(cls, tx, obj):
        klass = obj.klass
        guard_class(tx, klass, lookups=("__dict__",))        # a property named __dict__ would answer
        if not isinstance(static_class_attribute(klass, "__dict__"), types.GetSetDescriptorType) \
                or any("__slots__" in b.__dict__ for b in klass.__mro__):
            raise Unsupported(f"reading __dict__ of a {klass.__name__} made in the trace (slots or its own __dict__)")
        view = cls({}, dict)
        view.items = obj.attrs                               # the same dict: one state
        return view

    def _string_keys(self, result):
        """Attribute names are strings (the object is rebuilt with ``object.__setattr__``)."""
        if not all(type(k) is str for k in self.items):
            raise Unsupported("a non-string key stored into the __dict__ of an object made in the trace")
        return result

    def _store(self, tx, key_vt, value):
        self._string_keys(super()._store(tx, key_vt, value))

    def method_update(self, tx, *args, **kwargs):
        return self._string_keys(super().method_update(tx, *args, **kwargs))

    def method_setdefault(self, tx, *args, **kwargs):
        return self._string_keys(super().method_setdefault(tx, *args, **kwargs))

    def cannot_rebuild(self):
        return "the __dict__ of an object made in the trace (it would be rebuilt as another dict)"


def _refuse(reason):
    raise Unsupported(reason)


class BuiltinBaseMethod(VariableTracker):
    """A C method of ``object`` / ``dict`` / ``OrderedDict`` bound to an object the trace
    models (``super().__setitem__``, ``object.__setattr__(self, ...)``, ``self.keys()``)."""

    def __init__(self, owner: type, name: str, self_vt: VariableTracker | None):
        super().__init__()
        self.owner, self.name, self.self_vt = owner, name, self_vt

    def python_type(self):
        return types.MethodWrapperType if self.self_vt is not None else types.WrapperDescriptorType

    def call_function(self, tx, args, kwargs):
        if self.self_vt is None:                       # unbound: object.__setattr__(obj, ...)
            if not args:
                raise Unsupported(f"{self.owner.__name__}.{self.name}() without an object")
            return BuiltinBaseMethod(self.owner, self.name, args[0]).call_function(tx, args[1:], kwargs)
        obj, name = self.self_vt, self.name
        if not issubclass(obj.python_type(), self.owner):
            raise Unsupported(f"{self.owner.__name__}.{name} on a {obj.python_type().__name__} (TypeError)")
        if name == "__getattribute__" and len(args) == 1 and not kwargs and hasattr(obj, "generic_getattr"):
            return obj.generic_getattr(tx, args[0].as_python_constant())
        if name == "__setattr__" and len(args) == 2 and not kwargs and hasattr(obj, "generic_setattr"):
            obj.generic_setattr(tx, args[0].as_python_constant(), args[1])
            return ConstantVariable(None)
        if name == "__delattr__" and len(args) == 1 and not kwargs and hasattr(obj, "generic_delattr"):
            obj.generic_delattr(tx, args[0].as_python_constant())
            return ConstantVariable(None)
        if name == "__init__" and self.owner is object:
            if args or kwargs:
                raise Unsupported("object.__init__() takes exactly one argument (TypeError)")
            return ConstantVariable(None)
        if name in ("__init__", "update", "__ior__") and getattr(obj, "dict_part", None) is not None \
                and issubclass(obj.python_type(), collections.OrderedDict) \
                and python_slot(obj.python_type(), "__setitem__") is not None:
            return _update_through_setitem(tx, obj, name, args, kwargs)
        if name == "__init__" and getattr(obj, "dict_part", None) is not None:
            if args or kwargs:
                obj.dict_part.method_update(tx, *args, **kwargs)
            return ConstantVariable(None)
        if self.owner is not object and getattr(obj, "dict_part", None) is not None:
            if name == "__getitem__" and len(args) == 1 and python_slot(obj.python_type(), "__missing__") \
                    is not None:
                from .dicts import dict_key

                if dict_key(tx, args[0]) not in obj.dict_part.items:   # dict's [] asks the subclass
                    return obj.call_method(tx, "__missing__", args, {})
            # (dict's own update and __init__ ignore an overriding __setitem__, as here)
            return obj.dict_part.call_method(tx, name, args, kwargs)
        raise Unsupported(f"{describe(self.owner)}.{name} on {obj}")

    def __repr__(self):
        return f"BuiltinBaseMethod({self.owner.__name__}.{self.name})"


def _update_through_setitem(tx, obj, name, args, kwargs):
    """``OrderedDict.__init__`` / ``update`` / ``|=`` on a subclass with its own ``__setitem__``:
    unlike dict's, they store each item with ``self[key] = value`` (MutableMapping's update), so
    that method (inlined) sees every item, in order."""
    from .dicts import DictVariable, key_variable

    incoming = DictVariable({}, collections.OrderedDict)
    incoming.method_update(tx, *args, **kwargs)     # (the items, read as MutableMapping.update reads them)
    for key, value in list(incoming.items.items()):
        obj.call_method(tx, "__setitem__", [key_variable(key), value], {})
    return obj if name == "__ior__" else ConstantVariable(None)


def create(tx, class_vt, args, kwargs) -> NewObjectVariable:
    """``cls(*args, **kwargs)`` for a modelled class: the builtin ``__new__``, then ``__init__``."""
    klass = class_vt.value
    why = modelled_class(klass)
    if why is not None:
        raise Unsupported(f"creating an instance of {describe(klass)}: {why}")
    guard_protocol(tx, klass)       # what the model read of the class: no __new__, __setattr__, ...
    obj = NewObjectVariable(klass, class_vt)
    init = obj.generic_getattr(tx, "__init__") if python_slot(klass, "__init__") is not None \
        else BuiltinBaseMethod(builtin_owner(klass, "__init__"), "__init__", obj)
    result = init.call_function(tx, list(args), dict(kwargs))
    if not (isinstance(result, ConstantVariable) and result.value is None):
        raise Unsupported("__init__ returned something other than None (TypeError)")
    return obj


# -- after the graph: the real object ----------------------------------------------------------------
def rebuild(klass, items, attrs):
    """The object the trace made, built without running user code."""
    obj = klass.__new__(klass)
    if items is not None:
        setitem = collections.OrderedDict.__setitem__ if isinstance(obj, collections.OrderedDict) else dict.__setitem__
        for key, value in items:
            setitem(obj, key, value)
    instance = instance_dict(obj)
    for name, value in attrs:                   # object's own store: no user __setattr__ runs
        if instance is not None and not isinstance(static_class_attribute(klass, name), types.MemberDescriptorType):
            instance[name] = value              # the dict entry, past any property of that name
        else:                                   # (``self.__dict__[k] = v`` under a read-only property)
            object.__setattr__(obj, name, value)    # a __slots__ entry
    return obj

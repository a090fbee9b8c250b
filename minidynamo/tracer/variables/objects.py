"""Real Python objects that are neither tensors, containers nor functions: Python modules
(``math``, ``torch.nn.functional`` as a namespace), classes, plain user objects, ``super()``.
Reading their attributes goes through ``wrap``, so every attribute the trace uses is guarded."""

from __future__ import annotations

import collections
import enum
import functools
import types

import torch

import guards as G
from ...exc import ProgramRaises, Unsupported
from .. import stand_ins
from ..library import LIBRARY_PREFIXES, is_library_value, is_program_class
from ..side_effects import DELETED
from .base import (NO_CONSTANT, AttributeDeleted, AttributeMissing, KnownObjectVariable, VariableTracker,
                   caught_attribute_error, describe, instance_dict, maybe_constant)
from .constant import ConstantVariable, is_constant_value
from ..program_code import (answers_reads_in_python, getter_runs_program_code, is_special, python_slot,
                            refuse_metaclass_code, runs_code_for)


def _wrap(tx, value, source):
    from ..builder import wrap

    return wrap(tx, value, source)


def refuse_a_read_that_creates(obj, name) -> None:
    """Raise when reading ``obj.name`` would make the attribute it returns: a module's or a
    class's ``__annotations__``, when absent, is created by its first read (an empty dict stored
    in the object's ``__dict__``).  Read at trace time, that change would land on the real object
    during the compile, before the program's own read (``"__annotations__" in m.__dict__`` then
    says True too early); the frame runs eagerly instead."""
    if name != "__annotations__":
        return
    kind = type(obj)
    if issubclass(kind, types.ModuleType):
        own = obj.__dict__
        what = f"module {own.get('__name__', '?')}"
    elif issubclass(kind, type) and obj.__flags__ & (1 << 9):       # a heap type (a class statement's)
        own = type.__dict__["__dict__"].__get__(obj)
        what = f"class {type.__dict__['__name__'].__get__(obj)}"
    else:
        return
    if "__annotations__" not in own:
        raise Unsupported(f"{what} has no __annotations__ yet: reading them would create them (a change to it)")


def lookup_class_attribute(tx, klass, name, self_vt, source, mro_start=0, class_source=None):
    """``obj.name`` resolved through ``klass.__mro__`` (from ``mro_start``): methods come back
    bound to ``self_vt``, properties are run.  ``source`` is the object's; each function gets a
    source too, so the globals and closure cells it reads can be guarded.  An object made during
    the trace has no source: ``class_source`` (its class's) names the functions instead
    (``cls.name``).  None: not a function-like class attribute."""
    from .functions import UserFunctionVariable, UserMethodVariable

    if source is None and class_source is None:          # an object made in the trace: by its class
        class_source = getattr(self_vt, "class_source", None)
    # super() finds an override's base version: ``obj.name`` would not reach it, so no source
    function_source = source if not mro_start else None
    by_class = source is None and class_source is not None and not mro_start
    generic = source is not None and isinstance(self_vt, UserObjectVariable) and answers_reads_in_python(klass)

    def hop(base, part):
        """``base.part``; the instance's own read by object's lookup where its class's Python would answer."""
        return G.GenericAttrSource(base, part) if generic and base is source else G.AttrSource(base, part)

    def at(*path):
        if by_class:           # read through the class: obj.__class__.x -> cls.x
            path = path[1:] if path[0] == "__class__" else path
            result = class_source
        elif function_source is None:
            return None
        else:
            result = function_source
        for part in path:
            result = hop(result, part)
        return result

    def via_super(index, *path):
        """``type(obj).__mro__[mro_start].name...``: what super() finds, read so that a later
        definition of ``name`` in any class it passes over is seen.  Only sound when that class's
        own MRO walks the same classes (no diamond in between)."""
        if source is None and class_source is None:
            return None
        if klass.__mro__[mro_start].__mro__[:index - mro_start + 1] != klass.__mro__[mro_start:index + 1]:
            raise Unsupported(f"super().{name} through a diamond of classes (its lookup cannot be guarded)")
        owner = hop(source, "__class__") if source is not None else class_source
        result = G.AttrSource(owner, "__mro__")
        result = G.AttrSource(G.ItemSource(result, mro_start), name)
        for part in path:
            result = G.AttrSource(result, part)
        return result

    def guarded(fn, fn_source, through_instance=False):
        """A user function the trace inlines is guarded by identity where it is read from, so
        replacing the method (on the class, or shadowing it on the instance) recompiles. A
        library function too when read through the instance: the library's class is assumed
        unchanged, but the instance is user state (``m.forward = ...`` shadows the method)."""
        if fn_source is not None and (through_instance or not is_library_value(fn)):
            tx.output.add_guard(G.id_match(fn_source, fn))
        return UserFunctionVariable(fn, fn_source)

    # Only an instance with a __dict__ can shadow a class's function.
    shadowable = function_source is not None and not by_class and \
        type(getattr(self_vt, "value", None)).__dictoffset__ != 0      # (asks its class, not it)
    for index in range(mro_start, len(klass.__mro__)):
        base = klass.__mro__[index]
        if name not in base.__dict__:
            continue
        attr = base.__dict__[name]
        if isinstance(attr, types.FunctionType):
            fn_source = G.AttrSource(class_source, name) if by_class else \
                at(name, "__func__") if function_source is not None else via_super(index)
            return UserMethodVariable(guarded(attr, fn_source, shadowable), self_vt)
        if isinstance(attr, property):
            if not isinstance(attr.fget, types.FunctionType):
                raise Unsupported(f"C property {klass.__name__}.{name}")
            fget_source = at("__class__", name, "fget") if function_source is not None or by_class \
                else via_super(index, "fget")
            return guarded(attr.fget, fget_source).call_function(tx, [self_vt], {})
        if isinstance(attr, staticmethod):
            return _wrap(tx, attr.__func__, at(name))
        if isinstance(attr, classmethod):
            fn_source = at(name, "__func__") if function_source is not None or by_class \
                else via_super(index, "__func__")
            cls_vt = _wrap(tx, klass, class_source) if source is None and class_source is not None else \
                ClassVariable(klass) if source is None else _wrap(tx, klass, hop(source, "__class__"))
            return UserMethodVariable(guarded(attr.__func__, fn_source, shadowable), cls_vt)
        if hasattr(type(attr), "__get__") and not isinstance(attr, HARMLESS_DESCRIPTORS):
            owner_source = at("__class__") if function_source is not None or by_class else None
            return _python_descriptor_get(tx, klass, index, name, attr, self_vt, source, owner_source)
        return None
    return None


def _python_descriptor_get(tx, klass, index, name, attr, self_vt, source, class_source):
    """``obj.name`` where the class holds a descriptor whose ``__get__`` is Python
    (``functools.cached_property``, torch's ``lazy_property``): ``__get__(attr, obj, cls)``
    inlined.  The descriptor is read as ``cls.__mro__[i].__dict__[name]`` (reading ``cls.name``
    would run it), the lookups that lead to it are guarded, and for a non-data descriptor the
    instance must still lack ``name`` (once it has it, the instance's value answers)."""
    from ..program_code import python_slot

    getter = python_slot(type(attr), "__get__")
    if getter is None or class_source is None:
        raise Unsupported(f"{klass.__name__}.{name} is a {type(attr).__name__} descriptor"
                          + (" in C" if getter is None else " read without a source"))
    data = hasattr(type(attr), "__set__") or hasattr(type(attr), "__delete__")
    if source is not None and not data and instance_dict(self_vt.value) is not None:
        tx.output.add_guard(G.absent_match(source, self_vt.value, name, instance_only=True))
    bound_get = descriptor_method(tx, klass, index, name, "__get__", class_source)
    if type(attr) is functools.cached_property and getter is stand_ins.CACHED_PROPERTY_GET \
            and type(G.class_lookup(klass, "__dict__")) is types.GetSetDescriptorType:
        from .functions import UserFunctionVariable   # (its lock: the stand-in is lockless)

        return UserFunctionVariable(stand_ins.cached_property_get).call_function(
            tx, [bound_get.self_vt, self_vt, _wrap(tx, klass, class_source)], {})
    return bound_get.call_function(tx, [self_vt, _wrap(tx, klass, class_source)], {})


def _enum_member(klass, args, kwargs):
    """``EnumClass(value)``: the member whose value it is, or None (the call then runs as code).
    Only where enum's own machinery answers, which looks the value up in the class's table of
    values to members (a member itself answers itself); a miss, an unhashable value, a
    metaclass or ``__new__`` of the program's, a functional-API call: None."""
    if not isinstance(klass, enum.EnumMeta) or type(klass).__call__ is not enum.EnumMeta.__call__ \
            or klass.__new__ is not enum.Enum.__new__ or len(args) != 1 or kwargs:
        return None
    value = maybe_constant(args[0], NO_CONSTANT)
    if value is NO_CONSTANT:
        return None
    if type(value) is klass:
        return value
    try:
        return klass._value2member_map_.get(value)
    except TypeError:       # unhashable: enum searches its members with ==, which may run code
        return None


def descriptor_method(tx, klass, index, name, method, class_source):
    """The descriptor ``klass.__mro__[index].__dict__[name]``'s Python ``method`` (``__get__``,
    ``__set__``, ``__delete__``) bound to it, to inline.  The descriptor is read through the
    class's dict (reading ``cls.name`` would run it); what the class and the descriptor's class
    resolve the names to is guarded, so a replaced descriptor or method recompiles."""
    from ..class_answers import guard_class

    attr = klass.__mro__[index].__dict__[name]
    guard_class(tx, klass, lookups=(name,))
    guard_class(tx, type(attr), lookups=("__get__", "__set__", "__delete__"))
    held = G.ItemSource(G.AttrSource(G.ItemSource(G.AttrSource(class_source, "__mro__"), index), "__dict__"), name)
    return lookup_class_attribute(tx, type(attr), method, _wrap(tx, attr, held), held)


# Descriptors whose __get__ only reads a field or binds a C function (no user code runs);
# ``functools.lru_cache``'s wrapper binds itself to the instance in C (a method of the cache:
# transformers' ``Logger.warning_once``), calling it is a call like any other.
HARMLESS_DESCRIPTORS = (types.MemberDescriptorType, types.GetSetDescriptorType, types.MethodDescriptorType,
                        types.WrapperDescriptorType, types.BuiltinFunctionType, types.ClassMethodDescriptorType,
                        functools._lru_cache_wrapper)


class PythonModuleVariable(VariableTracker):
    def __init__(self, module: types.ModuleType, source=None):
        super().__init__(source)
        self.value = module

    def python_type(self):
        return types.ModuleType

    def guard_absent(self, tx, name):
        if self.source is not None:
            tx.output.add_guard(G.dict_keys_match(G.AttrSource(self.source, "__dict__"), self.value.__dict__))

    def var_getattr(self, tx, name):
        refuse_a_read_that_creates(self.value, name)
        namespace = self.value.__dict__
        if type(self.value) is types.ModuleType and name not in ("__dict__", "__class__"):
            # a plain module's attribute is its namespace's entry, else its PEP 562 __getattr__'s
            # answer: read here without calling that (the program's code), which the trace runs
            if name not in namespace and "__getattr__" in namespace:
                return self._module_getattr(tx, name)
            if name not in namespace:
                raise AttributeMissing(f"module {namespace.get('__name__')} has no attribute {name!r} (AttributeError)",
                                       self, name)
            value = namespace[name]
        elif is_program_class(type(self.value)) and runs_code_for(type(self.value), name, namespace):
            raise Unsupported(f"{namespace.get('__name__')}.{name}: its module class {type(self.value).__name__} "
                              "answers it with code of the program's")
        elif not hasattr(self.value, name):
            raise AttributeMissing(f"module {self.value.__name__} has no attribute {name!r} (AttributeError)", self, name)
        else:
            value = getattr(self.value, name)
        if self.source is None:
            library_module = self.value.__name__.split(".")[0] in LIBRARY_PREFIXES
            if not (library_module or is_library_value(value)):
                raise Unsupported(f"{self.value.__name__}.{name} read through a local import cannot be guarded")
        return _wrap(tx, value, G.AttrSource(self.source, name) if self.source else None)

    def _module_getattr(self, tx, name):
        """``module.name`` answered by the module's ``__getattr__`` (PEP 562), inlined: the name
        must stay absent from the namespace, the hook the same function (both guarded)."""
        if self.source is None:
            raise Unsupported(f"{self.value.__name__}.{name} answered by its __getattr__, read without a source")
        self.guard_absent(tx, name)
        hook = _wrap(tx, self.value.__dict__["__getattr__"], G.AttrSource(self.source, "__getattr__"))
        return hook.call_function(tx, [ConstantVariable(name)], {})

    def __repr__(self):
        return f"PythonModuleVariable({self.value.__dict__.get('__name__')})"


class ClassVariable(KnownObjectVariable):
    def var_getattr(self, tx, name):
        from .functions import UserFunctionVariable
        from .new_objects import BUILTIN_BASES, BuiltinBaseMethod, builtin_owner

        owner = builtin_owner(self.value, name) if isinstance(self.value, type) else None
        if owner is not None and isinstance(owner.__dict__[name], (types.WrapperDescriptorType,
                                                                    types.MethodDescriptorType)) \
                and (self.value in BUILTIN_BASES or name in ("__getattribute__", "__setattr__", "__init__")):
            return BuiltinBaseMethod(owner, name, None)   # object.__setattr__(self, name, value)
        refuse_a_read_that_creates(self.value, name)
        source = self.reread_source()
        refuse_metaclass_code(self.value, name)
        for index, base in enumerate(self.value.__mro__):
            if name in base.__dict__:
                attr = base.__dict__[name]
                if isinstance(attr, types.FunctionType):   # read through the class: replacing it is seen
                    if source is None:
                        return UserFunctionVariable(attr, None)
                    return _wrap(tx, attr, G.AttrSource(source, name))
                if isinstance(attr, staticmethod):
                    return _wrap(tx, attr.__func__, G.AttrSource(source, name) if source else None)
                if not isinstance(attr, property) and getter_runs_program_code(attr):
                    if source is None:     # ``__get__(attr, None, cls)``, inlined (reading K.d runs it)
                        raise Unsupported(f"{self.value.__name__}.{name}, a descriptor, read without a source")
                    return descriptor_method(tx, self.value, index, name, "__get__", source).call_function(
                        tx, [ConstantVariable(None), self], {})
                break
        if not hasattr(self.value, name):
            raise AttributeMissing(f"class {self.value.__name__} has no attribute {name!r} (AttributeError)", self, name)
        return _wrap(tx, getattr(self.value, name), G.AttrSource(source, name) if source else None)

    def subscript(self, tx, index):
        """``C[x]`` as CPython runs it: the metaclass's ``__getitem__`` (an Enum's by name), else the
        class's ``__class_getitem__``: a Python one inlined, a built-in one (``list[int]``,
        ``collections.abc.Sequence[Tensor]``) answered now, a ``types.GenericAlias`` of constants.
        The class's own ``__getitem__`` is its instances' and is never what ``C[x]`` calls."""
        from ..class_answers import guard_class
        from .functions import UserFunctionVariable

        klass = self.value
        if not isinstance(klass, type):
            return self.call_method(tx, "__getitem__", [index], {})
        guard_class(tx, type(klass), lookups=("__getitem__",))
        if G.class_lookup(type(klass), "__getitem__") is not G.NOT_FOUND:
            if G.class_lookup(klass, "__getitem__") is not G.NOT_FOUND:
                raise Unsupported(f"{klass.__name__}[...] where both the class and its metaclass define __getitem__")
            return self.call_method(tx, "__getitem__", [index], {})
        guard_class(tx, klass, lookups=("__class_getitem__",))
        hook = next((base.__dict__["__class_getitem__"] for base in klass.__mro__
                     if "__class_getitem__" in base.__dict__), None)
        if hook is None:
            raise Unsupported(f"type {klass.__name__!r} is not subscriptable (TypeError)")
        if isinstance(hook, classmethod) and isinstance(hook.__func__, types.FunctionType):
            return UserFunctionVariable(hook.__func__).call_function(tx, [self, index], {})
        key = maybe_constant(index, NO_CONSTANT)
        if key is NO_CONSTANT or not isinstance(hook, (classmethod, types.BuiltinMethodType, types.ClassMethodDescriptorType)):
            raise Unsupported(f"{klass.__name__}[{index}]")
        try:
            alias = klass[key]
        except Exception as e:
            raise Unsupported(f"{klass.__name__}[...] raised {type(e).__name__}: {e}") from e
        # a types.GenericAlias is immutable, equal by its parts: a constant (str(), ==, returned)
        return ConstantVariable(alias) if type(alias) is types.GenericAlias else UserObjectVariable(alias, None)

    def reread_source(self):
        """Where the class's attributes are re-read from: its source, or (a program's class met
        without one) the class held as itself, so that what the trace reads of it is guarded."""
        if self.source is not None or not is_program_class(self.value):
            return self.source
        return G.HeldSource.of(self.value)

    def guard_absent(self, tx, name):
        source = self.reread_source()
        if source is not None:             # not on the class nor any base (MRO)
            tx.output.add_guard(G.absent_match(source, self.value, name))
            return
        super().guard_absent(tx, name)

    def _named_tuple_fields(self, tx, args, kwargs) -> list:
        """The fields of ``NT(*args, **kwargs)`` as the namedtuple's ``__new__`` binds them: by
        position, then by name, then its defaults (``__new__.__defaults__``, guarded)."""
        klass, names = self.value, self.value._fields
        if len(args) > len(names) or any(k not in names[len(args):] for k in kwargs):
            raise Unsupported(f"{klass.__name__}(...) with arguments that do not match its fields (TypeError)")
        defaults = getattr(klass.__new__, "__defaults__", None) or ()
        first_default = len(names) - len(defaults)
        fields = list(args)
        for i, name in enumerate(names[len(args):], start=len(args)):
            if name in kwargs:
                fields.append(kwargs[name])
            elif i >= first_default and all(is_constant_value(d) for d in defaults):
                fields.append(ConstantVariable(defaults[i - first_default]))
            else:
                raise Unsupported(f"{klass.__name__}(...) without field {name!r} (TypeError, or a default that "
                                  "is not a constant)")
        if len(fields) > len(args) + len(kwargs) and self.source is not None:     # a default was used
            tx.output.add_guard(G.equals_match(G.AttrSource(G.AttrSource(self.source, "__new__"), "__defaults__"),
                                               defaults))
        return fields

    def _through_own_new(self, tx, args, kwargs):
        """``NT(...)`` of a namedtuple class with its own Python ``__new__``: type.__call__ runs
        ``NT.__new__(NT, ...)`` (inlined; read through the class, so guarded) and then the
        inherited ``object.__init__``, which does nothing."""
        from .containers import NamedTupleVariable

        made = self.var_getattr(tx, "__new__").call_function(tx, [self, *args], kwargs)
        if not (isinstance(made, NamedTupleVariable) and made.tuple_type is self.value):
            raise Unsupported(f"{self.value.__name__}.__new__ returned {made}, not a {self.value.__name__}")
        return made

    def call_function(self, tx, args, kwargs):
        from .containers import NamedTupleVariable, check_named_tuple_model
        from .dicts import DictVariable

        klass = self.value
        from .ctx_managers import GRAD_MODE_CLASSES, NO_EFFECT_BLOCKS, GradModeVariable, NoEffectBlockVariable

        if klass in GRAD_MODE_CLASSES and not args and not kwargs:
            return GradModeVariable(GRAD_MODE_CLASSES[klass])
        if klass in NO_EFFECT_BLOCKS and not args and not kwargs:
            return NoEffectBlockVariable(klass)
        if klass is torch.set_grad_enabled:
            from .ctx_managers import SetGradEnabledVariable

            mode = args[0] if len(args) == 1 and not kwargs else kwargs.get("mode") if not args else None
            mode = maybe_constant(mode) if mode is not None else None
            if type(mode) is not bool:
                raise Unsupported("torch.set_grad_enabled(...) without one constant bool")
            return SetGradEnabledVariable(tx, mode)
        if klass is torch.inference_mode:
            from .ctx_managers import InferenceModeVariable

            mode = args[0] if len(args) == 1 and not kwargs else kwargs.get("mode") if not args else None
            mode = maybe_constant(mode) if mode is not None else True
            if type(mode) is not bool:
                raise Unsupported("torch.inference_mode(...) without one constant bool")
            return InferenceModeVariable(mode)
        if isinstance(klass, type) and issubclass(klass, torch.autocast):
            from .ctx_managers import AutocastVariable

            return AutocastVariable.create(klass, args, kwargs)
        if issubclass(klass, tuple) and hasattr(klass, "_fields"):
            if check_named_tuple_model(tx, klass, own_new_allowed=True):
                return self._through_own_new(tx, args, kwargs)
            return NamedTupleVariable(self._named_tuple_fields(tx, args, kwargs), klass, class_vt=self)
        if klass is functools.partial and args:
            from .functions import PartialVariable

            return PartialVariable(args[0], args[1:], DictVariable(kwargs))
        if klass in (collections.OrderedDict,):
            result = DictVariable({}, klass)
            if args or kwargs:
                result.method_update(tx, *args, **kwargs)
            return result
        if issubclass(klass, BaseException):
            from .exception_values import make_exception

            return make_exception(tx, klass, args, kwargs, class_vt=self)
        if issubclass(klass, torch.nn.Module):
            from .frame_modules import create_module

            return create_module(tx, self, args, kwargs)
        from .numpy_values import NumpyCallableVariable, numpy_callable_kind

        if numpy_callable_kind(klass) == "scalar type":       # type(np_scalar)(...)
            return NumpyCallableVariable(klass).call_function(tx, args, kwargs)
        member = _enum_member(klass, args, kwargs)
        if member is not None:
            return ConstantVariable(member)
        if klass.__flags__ & (1 << 9):   # a Python class
            from .new_objects import create

            return create(tx, self, args, kwargs)
        raise Unsupported(f"creating an instance of {describe(klass)}")

    def __repr__(self):
        return f"ClassVariable({self.value.__name__})"


def user_slot(klass, name):
    """The member descriptor of ``name`` when it is a ``__slots__`` entry of a Python class in
    ``klass``'s MRO (found before anything else of that name), else None."""
    found = next((k.__dict__[name] for k in klass.__mro__ if name in k.__dict__), None)
    if isinstance(found, types.MemberDescriptorType) and found.__objclass__.__flags__ & (1 << 9):
        return found
    return None


def _odd_instance_dict(obj) -> bool:
    """Does ``obj`` keep attributes where ``instance_dict`` does not look: a ``__dict__`` that is a
    dict subclass (CPython reads it as a dict, ignoring its methods), or a class whose own
    ``__dict__`` attribute (a property) stands in front of the real one?"""
    slot = G.class_lookup(type(obj), "__dict__")
    if slot is G.NOT_FOUND:
        return False
    if type(slot) not in (types.GetSetDescriptorType, types.MemberDescriptorType):
        return True
    found = slot.__get__(obj)
    return found is not None and type(found) is not dict


def has_own_attribute(obj, name) -> bool:
    """``obj`` holds ``name`` itself: in its ``__dict__``, or in a filled slot."""
    slot = user_slot(type(obj), name)
    if slot is not None:
        try:
            slot.__get__(obj)
            return True
        except AttributeError:
            return False
    return name in instance_dict(obj, ())


def _custom_getattr(klass) -> bool:
    return any("__getattr__" in k.__dict__ for k in klass.__mro__ if k is not object)


class UserObjectVariable(VariableTracker):
    """Any other real object; attributes are read (and guarded) one by one.

    Returned from the frame (``returns_real``), it is re-read from its source before the
    attribute changes are replayed and returned as itself: eager returns that very object,
    and every change the trace made to it is a recorded side effect (transformers returns
    the DynamicCache it was given)."""

    returns_real = True

    def call_method(self, tx, name, args, kwargs):
        """A protocol's method (a dunder) is found on the type, never on the instance, as
        CPython's slots find it (``o.__getitem__ = f`` does not change ``o[k]``)."""
        if is_special(name):
            found = self.class_lookup(tx, name)
            if found is not None:
                return found.call_function(tx, args, kwargs)
            if self.has_own(name):
                raise Unsupported(f"{type(self.value).__name__}.{name} set on the instance (CPython's protocol "
                                  "ignores it)")
        return super().call_method(tx, name, args, kwargs)

    def class_lookup(self, tx, name, mro_start=0):
        """``name`` as its class resolves it, bound to this object (None: not a Python one)."""
        return lookup_class_attribute(tx, type(self.value), name, self, self.source, mro_start)

    def has_own(self, name) -> bool:
        """Does the instance itself hold ``name``?"""
        return has_own_attribute(self.value, name)

    def next_item(self, tx=None):
        """``next(self)`` as a ``for`` loop or a builtin walking it asks it (its ``__iter__``
        returned it): its class's Python ``__next__``, inlined; the StopIteration that ends the
        walk, None (its value kept as ``stop_value``: what ``yield from`` answers)."""
        from ..program_code import python_slot

        if python_slot(type(self.value), "__next__") is None:
            raise Unsupported(f"a for loop over {self}, which is not an iterator the trace models")
        try:
            return self.call_method(tx, "__next__", [], {})
        except ProgramRaises as error:
            if not isinstance(error.exception, StopIteration):
                raise
            # any StopIteration ends the walk; its value is what ``yield from`` answers
            from ..builder import wrap_constant_result

            value = error.fields.get("value")
            self.stop_value = value if value is not None else wrap_constant_result(error.exception.value)
            return None

    def __init__(self, value, source=None):
        super().__init__(source)
        self.value = value

    def python_type(self):
        return type(self.value)

    def truth(self, tx):
        from ..operators import user_truth        # a Python __bool__/__len__ is inlined

        return user_truth(tx, self)

    def guard_absent(self, tx, name):
        if self.source is not None:             # neither in the instance __dict__ nor the class's MRO
            tx.output.add_guard(G.absent_match(self.source, self.value, name))
            return
        super().guard_absent(tx, name)

    def var_getattr(self, tx, name):
        """``obj.name`` as CPython's attribute slot answers it: the class's ``__getattribute__``
        (the program's, inlined and guarded by identity, or the builtin lookup), and where that
        raises AttributeError (an absence, or a property's own ``raise``), a Python ``__getattr__``."""
        from ..program_code import python_slot

        klass = self.python_type()
        if self.source is not None:      # a __getattribute__ or __getattr__ added later would answer
            from ..class_answers import guard_class

            guard_class(tx, klass, lookups=("__getattribute__", "__getattr__"))
        try:
            if python_slot(klass, "__getattribute__") is not None:
                return self.class_lookup(tx, "__getattribute__").call_function(tx, [ConstantVariable(name)], {})
            return self.generic_getattr(tx, name)
        except Unsupported as error:
            if python_slot(klass, "__getattr__") is None or not caught_attribute_error(tx, error):
                raise
        return self.class_lookup(tx, "__getattr__").call_function(tx, [ConstantVariable(name)], {})

    def generic_getattr(self, tx, name):
        """``object.__getattribute__(obj, name)`` (which never asks ``__getattr__``).  Values are
        re-read by guards as ``obj.name``, through the class's own protocol."""
        from ..program_code import python_slot
        from .new_objects import BuiltinBaseMethod, builtin_owner

        klass = type(self.value)
        if self.source is not None:
            stored = tx.output.side_effects.stored_attribute(self, name)
            if stored is DELETED:             # the instance's is gone: the class's answers, if any
                return self._class_level(tx, klass, name)
            if stored is not None:
                return stored
            if name == "__dict__" and tx.output.side_effects.has_stored_attributes(self):
                raise Unsupported(f"reading {klass.__name__}.__dict__ after assigning its attributes")
        instance = instance_dict(self.value, {})
        if not instance and _odd_instance_dict(self.value):
            raise Unsupported(f"an attribute of a {klass.__name__} whose __dict__ is not a plain dict (a dict "
                              "subclass, or a __dict__ of the class's own)")
        if tx.output.side_effects.mutated_dict(instance, tx.output.wrapped_values):
            raise Unsupported(f"reading an attribute of a {klass.__name__} whose __dict__ the trace wrote as a dict "
                              "(the attribute would be read from before the write)")
        data_descriptor = any(name in b.__dict__ and hasattr(b.__dict__[name], "__set__") for b in klass.__mro__)
        if name in instance and not data_descriptor:
            return _wrap(tx, instance[name], self._own_value_source(tx, klass, name))
        owner = builtin_owner(klass, name) if klass.__flags__ & (1 << 9) else None
        if owner is not None and name in ("__getattribute__", "__setattr__") and name not in instance:
            return BuiltinBaseMethod(owner, name, self)
        found = lookup_class_attribute(tx, klass, name, self, self.source)
        if found is not None:
            return found
        defined = any(name in k.__dict__ for k in klass.__mro__)
        if not defined and python_slot(klass, "__getattr__") is not None:   # (var_getattr asks it)
            raise AttributeMissing(f"{klass.__name__} object has no attribute {name!r} (AttributeError)", self, name)
        if not defined and _custom_getattr(klass):
            raise Unsupported(f"{klass.__name__} has a custom __getattr__ in C (it would run for real)")
        # under a user __getattribute__ this is super().__getattribute__: object's lookup; else
        # the class's own C lookup (dict, set, ContextVar, UnionType: no user code runs)
        hook = python_slot(klass, "__getattr__") is not None      # (the program's, for a name it lacks)
        read = object.__getattribute__ if hook or python_slot(klass, "__getattribute__") is not None else getattr
        try:
            value = read(self.value, name)
        except AttributeError:
            if hook:       # an unset slot: eager asks __getattr__ now, the trace must not have
                raise Unsupported(f"{klass.__name__}.{name}, an unset slot its __getattr__ answers") from None
            raise AttributeMissing(f"{klass.__name__} object has no attribute {name!r} (AttributeError)",
                                   self, name) from None
        return _wrap(tx, value, self.attr_source(name))

    def attr_source(self, name):
        """Where guards re-read what object's own lookup found as ``obj.name``: ``obj.name``, or
        ``object.__getattribute__(obj, name)`` where the class answers reads in Python (the guard
        would run its ``__getattribute__``, or its ``__getattr__`` once the name is gone, per call)."""
        if self.source is None:
            return None
        if answers_reads_in_python(type(self.value)):
            return G.GenericAttrSource(self.source, name)
        return G.AttrSource(self.source, name)

    def _own_value_source(self, tx, klass, name):
        """Where guards re-read an attribute the instance's own ``__dict__`` answered.  As
        ``obj.name`` where that read runs no program code once the value is gone; else as
        ``obj.__dict__[name]`` (a cached_property's function, a Python ``__get__`` or
        ``__getattr__`` would otherwise run inside the guard), the class's lookup of ``name``
        guarded (a data descriptor added later would take the read)."""
        if self.source is None:
            return None
        attr = G.class_lookup(klass, name)
        runs_code = python_slot(klass, "__getattr__") is not None if attr is G.NOT_FOUND else \
            isinstance(attr, functools.cached_property) or getter_runs_program_code(attr)
        if not runs_code:
            return self.attr_source(name)
        from ..class_answers import guard_class

        guard_class(tx, klass, lookups=(name,))
        return G.ItemSource(self.attr_source("__dict__"), name)

    def _class_level(self, tx, klass, name):
        """``obj.name`` once the frame deleted the instance's own ``name``: what the class finds
        (a method bound to ``obj``, a property run, a plain value read through ``obj.__class__``)."""
        found = lookup_class_attribute(tx, klass, name, self, self.source)
        if found is not None:
            return found
        if user_slot(klass, name) is None:        # (an emptied slot: reading it raises)
            for base in klass.__mro__:
                if name in base.__dict__:
                    return _wrap(tx, base.__dict__[name], G.AttrSource(self.attr_source("__class__"), name))
        raise AttributeDeleted(f"{klass.__name__} object has no attribute {name!r} (deleted by the frame)", self, name)

    # -- writing attributes: side effects replayed after the graph (side_effects.py) ---------------
    def _check_plain_attribute(self, name, what):
        klass = type(self.value)
        if self.source is None:
            raise Unsupported(f"{what} attribute {name!r} of a {klass.__name__} without a source")
        if user_slot(klass, name) is not None:     # object.__setattr__ fills the slot as it would the dict
            return
        if instance_dict(self.value) is None:
            raise Unsupported(f"{what} attribute {name!r} of a {klass.__name__} (no instance __dict__)")
        if any(name in k.__dict__ and hasattr(k.__dict__[name], "__set__") for k in klass.__mro__):
            raise Unsupported(f"{what} {klass.__name__}.{name} (a descriptor)")

    def generic_setattr(self, tx, name, value):
        """``object.__setattr__(obj, name, value)``: the instance ``__dict__`` store, whatever
        the class's own ``__setattr__`` (which, if in Python, is what called this)."""
        self._check_plain_attribute(name, "assignment to")
        tx.check_storable(value, f"{type(self.value).__name__}.{name}")
        tx.output.side_effects.store_attribute(self, name, value, raw=True)

    def generic_delattr(self, tx, name):
        """``object.__delattr__(obj, name)``: removes ``name`` from the instance ``__dict__``;
        later reads in the trace see it missing (``AttributeDeleted``: no absence guard)."""
        self._check_plain_attribute(name, "deletion of")
        stored = tx.output.side_effects.stored_attribute(self, name)
        present = has_own_attribute(self.value, name) if stored is None else stored is not DELETED
        if not present:
            raise Unsupported(f"{type(self.value).__name__} object has no attribute {name!r} to delete (AttributeError)")
        if stored is None:        # its presence now is what the deletion relies on
            self.generic_getattr(tx, name)
        tx.output.side_effects.store_attribute(self, name, DELETED, raw=True)

    def subscript(self, tx, index):
        """``List[torch.Tensor]``: typing constructs are pure library values, built now."""
        if type(self.value).__module__ == "typing":
            key = maybe_constant(index, NO_CONSTANT)
            if key is not NO_CONSTANT:
                try:
                    return UserObjectVariable(self.value[key], None)
                except Exception as e:
                    raise Unsupported(f"typing subscript raised {type(e).__name__}: {e}") from e
        return self.call_method(tx, "__getitem__", [index], {})

    def call_function(self, tx, args, kwargs):
        # ``obj(...)`` runs what ``type(obj)`` finds for ``__call__`` in its MRO's class dicts
        # (tp_call; never the instance's own attribute), guarded there: ``Cls.__call__ = g``
        # after the first call must be seen
        call = G.class_lookup(type(self.value), "__call__")
        if isinstance(call, types.FunctionType):
            from ..class_answers import guard_class
            from .functions import UserFunctionVariable

            guard_class(tx, type(self.value), lookups=("__call__",))
            return UserFunctionVariable(call).call_function(tx, [self, *args], kwargs)
        raise Unsupported(f"call to {describe(self.value)}")

    def __repr__(self):
        return f"UserObjectVariable({type(self.value).__name__})"


class SuperVariable(VariableTracker):
    """``super(klass, obj)``: attribute lookup starts after ``klass`` in ``type(obj)``'s MRO."""

    def __init__(self, klass: type, obj: VariableTracker):
        super().__init__()
        self.klass = klass
        self.obj = obj

    def var_getattr(self, tx, name):
        if isinstance(self.obj, ClassVariable) and issubclass(self.obj.value, self.klass):
            return self._class_bound(tx, name)
        owner = self.obj.python_type()
        mro = owner.__mro__
        if self.klass not in mro:
            raise Unsupported("super() outside the object's class hierarchy")
        start = mro.index(self.klass) + 1
        from .new_objects import BuiltinBaseMethod, builtin_owner

        base_owner = builtin_owner(owner, name, start)
        if base_owner is not None:             # super().__setitem__ / __getattribute__ / __init__
            return BuiltinBaseMethod(base_owner, name, self.obj)
        from .nn_module import NNModuleVariable, module_call_of

        if isinstance(self.obj, NNModuleVariable):
            special = module_call_of(owner, name, start, self.obj)
            if special is not None:            # super().__call__ reaching nn.Module.__call__
                return special
        if hasattr(self.obj, "class_lookup"):
            found = self.obj.class_lookup(tx, name, start)
        else:
            found = lookup_class_attribute(tx, owner, name, self.obj, self.obj.source, start)
        if found is None:
            raise Unsupported(f"super().{name}")
        return found

    def _class_bound(self, tx, name):
        """``super(klass, cls).name`` with a class (in ``__new__`` or a classmethod): found after
        ``klass`` in ``cls.__mro__``, read as ``cls.__mro__[i].name`` (so guarded); a classmethod
        is bound to ``cls``, a static method (``__new__`` is one) or a function comes unbound."""
        from .functions import UserMethodVariable

        cls = self.obj.value
        source = self.obj.reread_source()
        mro = cls.__mro__
        for index in range(mro.index(self.klass) + 1, len(mro)):
            if name not in mro[index].__dict__:
                continue
            attr = mro[index].__dict__[name]
            read = G.AttrSource(G.ItemSource(G.AttrSource(source, "__mro__"), index), name) if source else None
            if isinstance(attr, classmethod) and isinstance(attr.__func__, types.FunctionType) and read:
                return UserMethodVariable(_wrap(tx, attr.__func__, G.AttrSource(read, "__func__")), self.obj)
            if isinstance(attr, staticmethod):
                attr = attr.__func__
            if read is None and isinstance(attr, types.FunctionType):
                raise Unsupported(f"super().{name} of a class without a source (its function cannot be guarded)")
            if isinstance(attr, (types.FunctionType, types.BuiltinFunctionType)):
                return _wrap(tx, attr, read)
            raise Unsupported(f"super().{name} with a class, finding a {type(attr).__name__}")
        raise Unsupported(f"super().{name}: no class after {self.klass.__name__} defines it (AttributeError)")

"""``ConstantVariable``: a Python value known exactly at trace time (and guarded if it came
from the frame).  Operations on constants are simply evaluated: the trace specialises on them."""

from __future__ import annotations

import enum
import types

import torch

import guards as G

from ...exc import Unsupported
from ..library import is_library_value, refuse_user_dunders
from .base import AttributeMissing, VariableTracker
from .numpy_values import as_torch_number, errstate_free, is_numpy_scalar

# Types whose values may be folded into the graph and compared by ``==`` in a guard.
CONSTANT_TYPES = (
    int, float, bool, complex, str, bytes, type(None), type(Ellipsis), type(NotImplemented),
    torch.dtype, torch.device, torch.layout, torch.memory_format,
)


def is_constant_value(value) -> bool:
    return isinstance(value, CONSTANT_TYPES) or isinstance(value, enum.Enum) or is_numpy_scalar(value)


class ConstantVariable(VariableTracker):
    def __init__(self, value, source=None):
        super().__init__(source)
        self.value = value

    def python_type(self) -> type:
        return type(self.value)

    def as_python_constant(self):
        return self.value

    def truth(self, tx) -> bool:
        return bool(self.value)

    def as_graph_arg(self, devices):
        if is_numpy_scalar(self.value):              # as torch's argument parser reads it
            number = as_torch_number(self.value)
            return number, number
        if isinstance(self.value, (int, float, bool, complex, str, type(None), type(Ellipsis), torch.dtype,
                                   torch.device, torch.layout, torch.memory_format, range)):
            return self.value, self.value
        if isinstance(self.value, slice) and all(
                isinstance(part, (int, type(None))) for part in (self.value.start, self.value.stop, self.value.step)):
            return self.value, self.value                   # x[(slice(0, None), slice(i, j))]
        return super().as_graph_arg(devices)

    def unpack(self, tx):
        if isinstance(self.value, (range, str, bytes, frozenset)):      # frozenset: a {1, 2, 3} display
            from .containers import MAX_ITEMS

            if len(self.value) > MAX_ITEMS:       # (iter(range(1 << 40)): not one item each)
                raise Unsupported(f"a {type(self.value).__name__} of {len(self.value)} items taken apart")
            return [ConstantVariable(v) for v in self.value]
        return super().unpack(tx)

    def var_getattr(self, tx, name):
        if isinstance(self.value, enum.Enum):
            found = self._member_getattr(tx, name)
            if found is not None:
                return found
        try:
            attr = getattr(self.value, name)
        except AttributeError as e:
            raise AttributeMissing(f"{type(self.value).__name__} constant has no attribute {name!r}", self, name) from e
        if is_constant_value(attr):
            return ConstantVariable(attr)
        if callable(attr):
            return ConstantMethodVariable(self, name)
        raise Unsupported(f"attribute {name!r} of constant {self.value!r}")

    def _member_getattr(self, tx, name):
        """``member.name`` of an enum member.  A member is guarded by identity, but it is an
        ordinary object: its fields (its value and name, whatever its ``__init__`` set) can be
        reassigned, and its class's properties and methods are Python code that may read
        globals.  So it is read like a user object's attribute: fields (and ``value`` / ``name``,
        enum's own properties) through a source that guards re-read on every call, Python
        properties and methods inlined (what they read is guarded).  A member met without a
        source is held as itself (``HeldSource``).  None: a C method, folded as before."""
        from ..builder import wrap
        from .objects import lookup_class_attribute

        member, klass = self.value, type(self.value)
        source = self.source if self.source is not None else G.HeldSource.of(member)
        found = G.class_lookup(klass, name)
        if isinstance(found, types.DynamicClassAttribute):       # enum.property: value, name
            if found.fget is None or not is_library_value(found.fget):
                raise Unsupported(f"{klass.__name__}.{name} is a {type(found).__name__} with Python code")
            return wrap(tx, getattr(member, name), G.AttrSource(source, name))   # enum's own: reads a field
        fields = getattr(member, "__dict__", {})
        if name in fields and not hasattr(type(found), "__set__"):
            return wrap(tx, fields[name], G.AttrSource(source, name))
        result = lookup_class_attribute(tx, klass, name, self, source)
        if result is not None:
            return result
        if found is G.NOT_FOUND:
            if any("__getattr__" in base.__dict__ for base in klass.__mro__ if base is not object):
                raise Unsupported(f"{klass.__name__} defines __getattr__ (an enum member's attribute)")
            raise AttributeMissing(f"{klass.__name__} member has no attribute {name!r} (AttributeError)", self, name)
        if callable(found) and not isinstance(found, (type, enum.Enum)):
            return None                                   # a C method (int.bit_length of an IntEnum)
        return wrap(tx, getattr(member, name), G.AttrSource(source, name))

    def __repr__(self) -> str:
        return f"ConstantVariable({self.value!r})"



def is_none(vt) -> bool:
    """``vt`` is the constant None."""
    return isinstance(vt, ConstantVariable) and vt.value is None


class ConstantMethodVariable(VariableTracker):
    """A method of a constant (``"a{}".format``, ``(3).bit_length``): evaluated when all
    arguments are constants, since str/int/float methods have no side effects."""

    def __init__(self, owner: ConstantVariable, name: str):
        super().__init__()
        self.owner = owner
        self.name = name

    def call_function(self, tx, args, kwargs):
        # ``",".join(str(d) for d in shape)``: these C methods consume an iterable whole (others,
        # like str.format, would only see the generator object: those stay refused)
        if type(self.owner.value) in (str, bytes) and self.name == "join" or isinstance(self.owner.value, frozenset):
            from .containers import IteratorVariable
            from .dicts import DictViewVariable

            args = [_tuple_of(tx, a) if isinstance(a, (IteratorVariable, DictViewVariable))
                    else a for a in args]
        values = [a.as_python_constant() for a in args]
        kw = {k: v.as_python_constant() for k, v in kwargs.items()}
        refuse_user_dunders([*values, *kw.values()], f"{type(self.owner.value).__name__}.{self.name}")
        try:
            with errstate_free(f"{type(self.owner.value).__name__}.{self.name}"):
                result = getattr(self.owner.value, self.name)(*values, **kw)
        except Unsupported:
            raise
        except Exception as e:
            raise Unsupported(f"{type(self.owner.value).__name__}.{self.name} raised {type(e).__name__}: {e}") from e
        from ..builder import wrap_constant_result

        return wrap_constant_result(result)


def _tuple_of(tx, generator):
    """A generator's (or any iterator's, a view's) items, as a tuple."""
    from .containers import TupleVariable

    if hasattr(generator, "consume"):
        return TupleVariable(generator.consume(tx))
    return TupleVariable(generator.unpack(tx))

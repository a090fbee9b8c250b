"""Python sequences built or read during the trace: tuples, lists, torch.Size, namedtuples,
slices, and the iterators a for-loop walks (dicts: ``dicts.py``; sets: ``sets.py``).

A container made during the trace is ours to mutate.  One read from the frame (``source`` set)
belongs to the caller: mutating it would have to be replayed, so that is Unsupported.
"""

from __future__ import annotations

import collections
import types

import torch

from ...exc import ProgramRaises, Unsupported
from ..library import refuse_user_dunders
from .base import AttributeMissing, BoundMethodVariable, VariableTracker, maybe_constant
from .constant import ConstantVariable


MAX_ITEMS = 100_000     # a container or iterator this long is growing without end: give up
_NO = object()          # maybe_constant's answer for "not a constant"


def _check_mutable(tx, vt, what: str):
    """A container from the caller is about to change: record it, so the change is replayed
    on the real object after the graph runs (see side_effects.py)."""
    if vt.source is not None:
        real = tx.output.wrapped_values.get(vt.source)
        if type(real) is dict and tx.output.side_effects.has_stored_attributes_in(real):
            raise Unsupported(f"{what} on a dict that is the attribute dict of an object whose attributes the "
                              "trace assigned (the two writes would replay apart)")
        tx.output.side_effects.note_mutated_container(vt, what)


class MethodTable:
    """Containers implement their Python methods as ``method_<name>`` (``list.append`` ->
    ``method_append``, ``__len__`` -> ``method_len``): calls and bound-method reads dispatch here."""

    def call_method(self, tx, name, args, kwargs):
        handler = getattr(self, f"method_{name.strip('_')}", None)
        if handler is None:
            raise Unsupported(f"{self.python_type().__name__}.{name}")
        return handler(tx, *args, **kwargs)

    def var_getattr(self, tx, name):
        if hasattr(self, f"method_{name.strip('_')}"):
            return BoundMethodVariable(self, name)
        if hasattr(self.python_type(), name):      # real but not modelled: hasattr() must not say False
            raise Unsupported(f"{self.python_type().__name__}.{name} is not supported")
        raise AttributeMissing(f"{self.python_type().__name__} has no attribute {name!r} (AttributeError)", self, name)


def sequence_kind(vt):
    """The Python type of a tuple/list-like tracker (``tuple``, ``list``, ``torch.Size``, a
    namedtuple class, ``deque``), or None: asked instead of the tracker's own class, which a
    caller's list (``CallerListVariable``) or a deque subclasses."""
    return vt.python_type() if isinstance(vt, BaseListVariable) else None


class BaseListVariable(MethodTable, VariableTracker):
    """A sequence of VariableTrackers; subclasses fix the Python type."""

    def __init__(self, items, source=None):
        super().__init__(source)
        self.items = list(items)

    def python_type(self):
        return tuple

    def as_python_constant(self):
        return self.python_type()(i.as_python_constant() for i in self.items)

    def truth(self, tx):
        return bool(self.items)

    def unpack(self, tx):
        return list(self.items)

    def as_graph_arg(self, devices):
        pairs = [i.as_graph_arg(devices) for i in self.items]
        kind = list if self.python_type() is list else tuple
        return kind(p[0] for p in pairs), kind(p[1] for p in pairs)

    def rebuild(self, items, source=None):
        return type(self)(items)

    def subscript(self, tx, index):
        from .constant_tensors import index_of

        key = index_of(index)                       # lst[t]: eager calls t.__index__()
        if key is None:
            key = index.as_python_constant()
        if isinstance(key, slice):
            from ..operators import is_exact_tuple

            if is_exact_tuple(self) and key.indices(len(self.items)) == (0, len(self.items), 1):
                return self                    # CPython's t[:] of a tuple is t
            return self.rebuild(self.items[key])
        if not isinstance(key, int):
            raise Unsupported(f"{self.python_type().__name__} index of type {type(key).__name__}")
        try:
            return self.items[key]
        except IndexError:
            pass
        try:
            self._stand_in()[key]                   # CPython's own error for this kind of sequence
        except IndexError as e:
            raise ProgramRaises(f"{self.python_type().__name__} index out of range (an exception)", e) from None
        raise Unsupported(f"{self.python_type().__name__} index {key} out of range here, not in CPython")

    def _stand_in(self):
        """A real sequence of the builtin kind this one is (a list, a tuple or a deque, a
        subclass's methods left out) and of its length, of items equal to nothing: CPython's errors for it
        are the ones for this sequence (``tuple index out of range``)."""
        kind = next((k for k in (list, tuple, collections.deque) if issubclass(self.python_type(), k)), tuple)
        return kind(object() for _ in self.items)

    def method_getitem(self, tx, index):
        return self.subscript(tx, index)

    def method_len(self, tx):
        return ConstantVariable(len(self.items))

    def method_iter(self, tx):
        from .iterators import make_iterator

        return make_iterator(tx, self)

    def method_index(self, tx, value, start=None, stop=None):
        from .. import operators

        start, stop = (None if v is None else maybe_constant(v, _NO) for v in (start, stop))
        if not all(v is None or type(v) is int for v in (start, stop)):
            raise Unsupported("list.index with start or stop not a known int")
        for i in range(len(self.items))[start:stop]:    # (start and stop as a slice reads them)
            if operators.identical_or_equal(tx, self.items[i], value):
                return ConstantVariable(i)
        found = maybe_constant(value, _NO)
        if found is _NO and not isinstance(self._stand_in(), tuple):
            raise Unsupported("index() found nothing (its ValueError shows the value's repr)")
        try:
            self._stand_in().index(found)
        except ValueError as e:
            raise ProgramRaises("index() found nothing (an exception)", e) from None
        raise Unsupported("index() found nothing here, its value in CPython")

    def method_count(self, tx, value):
        from .. import operators

        return ConstantVariable(sum(operators.identical_or_equal(tx, i, value) for i in self.items))

    def method_contains(self, tx, value):
        from .. import operators

        return ConstantVariable(any(operators.identical_or_equal(tx, i, value) for i in self.items))

    def __repr__(self):
        return f"{type(self).__name__}({self.items!r})"


class TupleVariable(BaseListVariable):
    """A tuple; one that is a constant of the code keeps the code's object as ``value``."""

    def as_python_constant(self):
        value = self.__dict__.get("value")
        return value if value is not None else super().as_python_constant()


class SizeVariable(TupleVariable):
    """``tensor.shape``: a tuple of ints (static shapes), still a ``torch.Size`` to the program."""

    def python_type(self):
        return torch.Size

    def as_graph_arg(self, devices):
        values = [i.as_python_constant() for i in self.items]
        return torch.Size(values), torch.Size(values)

    def method_numel(self, tx):
        return ConstantVariable(torch.Size(self.as_python_constant()).numel())


class NamedTupleVariable(TupleVariable):
    """A namedtuple (incl. ``torch.return_types.max``); fields readable by name."""

    def __init__(self, items, tuple_type, source=None, class_vt=None):
        super().__init__(items, source)
        self.tuple_type = tuple_type
        self.class_vt = class_vt          # made in the trace: the class as read (its methods are guarded)

    def python_type(self):
        return self.tuple_type

    def as_python_constant(self):
        return make_named_tuple(self.tuple_type, [i.as_python_constant() for i in self.items])

    def rebuild(self, items, source=None):
        return TupleVariable(items)

    def var_getattr(self, tx, name):
        """Fields by name, ``_fields``, ``_asdict``/``_replace``, and the methods the class
        defines in Python (read through the class, bound to this tuple, inlined)."""
        fields = named_tuple_fields(self.tuple_type)
        if name in fields:
            return self.items[fields.index(name)]
        if name == "_fields" and hasattr(self.tuple_type, "_fields"):
            return ConstantVariable(tuple(fields))
        if name in self.NAMEDTUPLE_METHODS and hasattr(self.tuple_type, name):
            return BoundMethodVariable(self, name)
        owner = next((k for k in self.tuple_type.__mro__ if name in k.__dict__), None)
        if owner is not None and owner not in (tuple, object):
            from ..builder import class_of
            from .functions import UserMethodVariable

            raw = owner.__dict__[name]
            plain = isinstance(raw, (types.FunctionType, staticmethod, classmethod)) or not hasattr(type(raw), "__get__")
            if not plain:                     # a property or other descriptor would run its code
                raise Unsupported(f"descriptor {name!r} of namedtuple {self.tuple_type.__name__}")
            attr = class_of(tx, self).var_getattr(tx, name)
            if isinstance(raw, types.FunctionType):
                return UserMethodVariable(attr, self)
            return attr
        if hasattr(self.tuple_type, name) and not hasattr(tuple, name):
            raise Unsupported(f"attribute {name!r} of namedtuple {self.tuple_type.__name__}")
        return super().var_getattr(tx, name)

    NAMEDTUPLE_METHODS = ("_asdict", "_replace")

    def call_method(self, tx, name, args, kwargs):
        if name == "_asdict" and not args and not kwargs:
            from .dicts import DictVariable

            return DictVariable(dict(zip(named_tuple_fields(self.tuple_type), self.items)))
        if name == "_replace" and not args:
            from ..builder import class_of

            fields = named_tuple_fields(self.tuple_type)
            if not set(kwargs) <= set(fields):
                raise Unsupported(f"_replace() of unknown fields {sorted(set(kwargs) - set(fields))} (ValueError)")
            return NamedTupleVariable([kwargs.get(f, item) for f, item in zip(fields, self.items)], self.tuple_type,
                                      class_vt=class_of(tx, self))
        if name in self.NAMEDTUPLE_METHODS:
            raise Unsupported(f"{self.tuple_type.__name__}.{name} with arguments {args} {kwargs}")
        return super().call_method(tx, name, args, kwargs)


def named_tuple_fields(kind) -> tuple:
    """Field names of a namedtuple or a structseq (``torch.return_types.max``)."""
    return tuple(getattr(kind, "_fields", None) or getattr(kind, "__match_args__", ()))


def is_named_tuple_type(kind) -> bool:
    return issubclass(kind, tuple) and bool(named_tuple_fields(kind))


def make_named_tuple(kind, items):
    """The instance with these items, as the class's construction ended in: a namedtuple's
    ``tuple.__new__`` (its own ``__new__``, which the trace inlined, does not run again), a
    structseq's constructor."""
    return tuple.__new__(kind, items) if hasattr(kind, "_fields") else kind(items)


# ``collections.namedtuple`` makes these functions anew for each class, from the same code objects.
_REFERENCE = collections.namedtuple("_Reference", "a")
_GENERATED_CODE = {name: getattr(_REFERENCE, name).__code__ for name in ("_asdict", "_replace", "__repr__",
                                                                         "__getnewargs__")}
_GENERATED_CODE["_make"] = _REFERENCE._make.__func__.__code__
_NAMEDTUPLE_NAMES = ("_make", "_asdict", "_replace", "_fields", "__getnewargs__", "__match_args__", "count", "index")


def check_named_tuple_model(tx, kind, own_new_allowed: bool = False) -> bool:
    """A namedtuple of the program's class is modelled as a plain tuple whose fields have names:
    its length, items, iteration, comparisons, ``_asdict`` and construction are tuple's and
    namedtuple's own.  That holds only while the class overrides none of them, so a class that
    does is refused (the frame runs its code eagerly), and what each name resolves to is guarded:
    ``NT.__len__ = f``, ``NT.a = property(...)`` or a new ``__new__`` later recompiles.

    ``own_new_allowed``: a Python ``__new__`` of the class's own is accepted (construction
    inlines it; it ends in ``tuple.__new__``, as torch's PackedSequence does); the answer says
    whether the class has one."""
    import guards as G
    from ..class_answers import PROTOCOL_NAMES, guard_protocol
    from ..library import is_library_value

    if not kind.__flags__ & (1 << 9) or is_library_value(kind):     # a structseq, torch.return_types
        return False
    fields = named_tuple_fields(kind)
    names = tuple(sorted({*PROTOCOL_NAMES, *_NAMEDTUPLE_NAMES, *fields}))
    overridden = [name for name in names if not _as_namedtuple_made_it(kind, name, fields)]
    own_new = own_new_allowed and overridden == ["__new__"] and \
        isinstance(getattr(G.class_lookup(kind, "__new__"), "__func__", None), types.FunctionType)
    if overridden and not own_new:
        raise Unsupported(f"namedtuple {kind.__name__} overrides {', '.join(overridden)} (its own code would run)")
    guard_protocol(tx, kind, names)
    return own_new


def _as_namedtuple_made_it(kind, name, fields) -> bool:
    """``kind``'s MRO finds for ``name`` what ``collections.namedtuple`` (or ``tuple``) put there."""
    import guards as G

    found = G.class_lookup(kind, name)
    if name in fields:                 # the field's getter, reading the item at its index
        return type(found) is type(_REFERENCE.a) and found.__reduce__()[1][0] == fields.index(name)
    if name in ("_fields", "__match_args__"):
        return True                    # read by the model itself; the getters check the fields
    if name == "__new__":          # a class's __new__ is kept as a staticmethod
        found = getattr(found, "__func__", found)
        return isinstance(found, types.FunctionType) and found.__globals__.get("_tuple_new") is tuple.__new__ \
            and found.__code__.co_argcount == 1 + len(fields)
    if name in _GENERATED_CODE:
        code = getattr(getattr(found, "__func__", found), "__code__", None)
        return code is _GENERATED_CODE[name]
    return found is G.class_lookup(tuple, name)


class ListVariable(BaseListVariable):
    def python_type(self):
        return list

    def as_python_constant(self):
        return [i.as_python_constant() for i in self.items]      # a snapshot, for pure functions

    def method_append(self, tx, value):
        _check_mutable(tx, self, "append")
        self.items.append(value)
        return ConstantVariable(None)

    def method_extend(self, tx, values):
        """list.extend: a list/tuple is copied first (``xs.extend(xs)``); any other iterable is
        pulled one item at a time, each appended before the next is pulled, as CPython does."""
        _check_mutable(tx, self, "extend")
        if isinstance(values, BaseListVariable):
            self.items.extend(list(values.items))
            return ConstantVariable(None)
        from .iterators import make_iterator

        it = make_iterator(tx, values)          # a generator is its own iterator
        while (item := it.next_item(tx)) is not None:
            self.items.append(item)
            if len(self.items) > MAX_ITEMS:          # xs.extend(iter(xs)): MemoryError in CPython
                raise Unsupported(f"a list grew past {MAX_ITEMS} items while extended")
        return ConstantVariable(None)

    def method_insert(self, tx, index, value):
        _check_mutable(tx, self, "insert")
        self.items.insert(index.as_python_constant(), value)
        return ConstantVariable(None)

    def method_pop(self, tx, index=None):
        _check_mutable(tx, self, "pop")
        key = -1 if index is None else index.as_python_constant()
        if type(key) is not int or not -len(self.items) <= key < len(self.items):
            try:                                     # CPython's own error for this kind of sequence
                self._stand_in().pop(*(() if index is None else (key,)))
            except (IndexError, TypeError) as e:
                raise ProgramRaises(f"{e} ({type(e).__name__})", e) from None
        return self.items.pop(key)

    def method_remove(self, tx, value):
        """list.remove: the first item ``== value`` (a user ``__eq__`` is inlined)."""
        from .. import operators

        for i, item in enumerate(self.items):
            if operators.identical_or_equal(tx, item, value):
                _check_mutable(tx, self, "remove")
                del self.items[i]
                return ConstantVariable(None)
        raise Unsupported("list.remove(x): x not in list (ValueError)")

    def method_delitem(self, tx, index):
        """``del xs[i]`` and ``del xs[a:b]``: a bad index raises Python's own error before
        anything changes."""
        key = index.as_python_constant()
        try:
            del list(range(len(self.items)))[key]
        except (IndexError, TypeError) as error:
            raise Unsupported(f"{error} ({type(error).__name__})") from None
        _check_mutable(tx, self, "del")
        del self.items[key]
        return ConstantVariable(None)

    def method_reverse(self, tx):
        _check_mutable(tx, self, "reverse")
        self.items.reverse()
        return ConstantVariable(None)

    def method_sort(self, tx, key=None, reverse=None):
        """Sorts by constant keys (the items themselves, or ``key(item)``): stable, like list.sort."""
        _check_mutable(tx, self, "sort")
        keys = [(key.call_function(tx, [i], {}) if key is not None else i).as_python_constant() for i in self.items]
        refuse_user_dunders(keys, "sorting")            # their __lt__ would run for real
        order = sorted(range(len(self.items)), key=keys.__getitem__,
                       reverse=bool(reverse.as_python_constant()) if reverse is not None else False)
        self.items = [self.items[i] for i in order]
        return ConstantVariable(None)

    def method_clear(self, tx):
        _check_mutable(tx, self, "clear")
        self.items.clear()
        return ConstantVariable(None)

    def method_copy(self, tx):
        return ListVariable(self.items)

    def method_setitem(self, tx, index, value):
        _check_mutable(tx, self, "item assignment")
        key = index.as_python_constant()
        if isinstance(key, slice):
            self.items[key] = value.unpack(tx)
        else:
            self.items[key] = value
        return ConstantVariable(None)

    def method_iadd(self, tx, other):
        """``xs += other``: list.__iadd__ extends in place (any iterable) and returns xs."""
        self.method_extend(tx, other)
        return self

    def method_imul(self, tx, count):
        """``xs *= n``: repeated in place."""
        n = maybe_constant(count, _NO)
        if isinstance(n, bool) or not isinstance(n, int):
            raise Unsupported(f"list *= {count}")
        if len(self.items) * n > MAX_ITEMS:
            raise Unsupported(f"list *= {n} makes more than {MAX_ITEMS} items")
        _check_mutable(tx, self, "*=")
        self.items[:] = self.items * n
        return self

    def method_iter(self, tx):
        from .iterators import make_iterator

        return make_iterator(tx, self)


class SliceVariable(VariableTracker):
    def __init__(self, start, stop, step):
        super().__init__()
        self.parts = (start, stop, step)

    def python_type(self):
        return slice

    def as_python_constant(self):
        return slice(*(p.as_python_constant() for p in self.parts))

    def as_graph_arg(self, devices):
        pairs = [p.as_graph_arg(devices) for p in self.parts]
        return slice(*(p[0] for p in pairs)), slice(*(p[1] for p in pairs))


def pull_all(tx, iterator) -> list:
    """Every item ``iterator`` (anything with ``next_item``) still gives, pulled one by one."""
    rest = []
    while (item := iterator.next_item(tx)) is not None:
        rest.append(item)
        if len(rest) > MAX_ITEMS:
            raise Unsupported(f"an iterator gave more than {MAX_ITEMS} items (endless?)")
    return rest


class IteratorVariable(MethodTable, VariableTracker):
    """The iterator protocol every iterator tracker follows (``next_item(tx)``: the next item,
    or None once exhausted); this class itself walks a fixed list of items (tuples, ranges,
    strings: things that cannot change).  The lazy, live ones are in iterators.py."""

    def __init__(self, items=(), python_type=None):
        super().__init__()
        self.items = list(items)
        self.index = 0
        self.kind = python_type if python_type is not None else type(iter(()))
        self.made_by = None     # (iter or reversed, the tracker or constant it walks): see iterator_rebuild.py

    def python_type(self):
        return self.kind

    def truth(self, tx):
        return True

    def next_item(self, tx=None):
        if self.index >= len(self.items):
            return None
        item = self.items[self.index]
        self.index += 1
        return item

    def unpack(self, tx):
        """All remaining items, pulled one by one (``list(it)``)."""
        return pull_all(tx, self)

    def method_iter(self, tx):
        return self

    def method_next(self, tx):
        item = self.next_item(tx)
        if item is None:
            from .exception_values import stop_iteration

            raise stop_iteration(self)
        return item

    def __repr__(self):
        return f"{type(self).__name__}({getattr(self.kind, '__name__', self.kind)})"

"""Python containers built or read during the trace: tuples, lists, torch.Size, namedtuples,
dicts, slices, and the iterators a for-loop walks.

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


def _check_mutable(tx, vt, what: str):
    """A container from the caller is about to change: record it, so the change is replayed
    on the real object after the graph runs (see side_effects.py)."""
    if vt.source is not None:
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
        raise AttributeMissing(f"{self.python_type().__name__} has no attribute {name!r} (AttributeError)")


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
            return self.rebuild(self.items[key])
        if not isinstance(key, int):
            raise Unsupported(f"{self.python_type().__name__} index of type {type(key).__name__}")
        try:
            return self.items[key]
        except IndexError as e:
            raise ProgramRaises(f"{self.python_type().__name__} index out of range (an exception)", e) from e

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
        raise ProgramRaises("list.index found nothing (an exception)", ValueError("list.index(x): x not in list"))

    def method_count(self, tx, value):
        from .. import operators

        return ConstantVariable(sum(operators.identical_or_equal(tx, i, value) for i in self.items))

    def method_contains(self, tx, value):
        from .. import operators

        return ConstantVariable(any(operators.identical_or_equal(tx, i, value) for i in self.items))

    def __repr__(self):
        return f"{type(self).__name__}({self.items!r})"


class TupleVariable(BaseListVariable):
    pass


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
    return kind(*items) if hasattr(kind, "_fields") else kind(items)


# ``collections.namedtuple`` makes these functions anew for each class, from the same code objects.
_REFERENCE = collections.namedtuple("_Reference", "a")
_GENERATED_CODE = {name: getattr(_REFERENCE, name).__code__ for name in ("_asdict", "_replace", "__repr__",
                                                                         "__getnewargs__")}
_GENERATED_CODE["_make"] = _REFERENCE._make.__func__.__code__
_NAMEDTUPLE_NAMES = ("_make", "_asdict", "_replace", "_fields", "__getnewargs__", "__match_args__", "count", "index")


def check_named_tuple_model(tx, kind) -> None:
    """A namedtuple of the program's class is modelled as a plain tuple whose fields have names:
    its length, items, iteration, comparisons, ``_asdict`` and construction are tuple's and
    namedtuple's own.  That holds only while the class overrides none of them, so a class that
    does is refused (the frame runs its code eagerly), and what each name resolves to is guarded:
    ``NT.__len__ = f``, ``NT.a = property(...)`` or a new ``__new__`` later recompiles."""
    from ..class_answers import PROTOCOL_NAMES, guard_protocol
    from ..library import is_library_value

    if not kind.__flags__ & (1 << 9) or is_library_value(kind):     # a structseq, torch.return_types
        return
    fields = named_tuple_fields(kind)
    names = tuple(sorted({*PROTOCOL_NAMES, *_NAMEDTUPLE_NAMES, *fields}))
    overridden = [name for name in names if not _as_namedtuple_made_it(kind, name, fields)]
    if overridden:
        raise Unsupported(f"namedtuple {kind.__name__} overrides {', '.join(overridden)} (its own code would run)")
    guard_protocol(tx, kind, names)


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
        if not self.items:
            raise ProgramRaises("pop from an empty list (an exception)", IndexError("pop from empty list"))
        return self.items.pop(-1 if index is None else index.as_python_constant())

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


class DictVariable(MethodTable, VariableTracker):
    """A dict with constant keys (str, int, ...) and VariableTracker values, in order."""

    def __init__(self, items: dict, dict_type=dict, source=None):
        super().__init__(source)
        self.items = dict(items)
        self.dict_type = dict_type

    def python_type(self):
        return self.dict_type

    def truth(self, tx):
        return bool(self.items)

    def unpack(self, tx):
        return [key_variable(k) for k in self.items]

    def _store(self, tx, key_vt, value):
        key = dict_key(tx, key_vt)
        if isinstance(key, TensorKey) and self.source is not None:
            raise Unsupported("a tensor stored as a key of the caller's dict")
        self.items[key] = value

    @property
    def has_tensor_keys(self) -> bool:
        return any(isinstance(k, TensorKey) for k in self.items)

    def cannot_rebuild(self):
        """Why this dict cannot be rebuilt after the graph (capture then refuses), or None."""
        if self.has_tensor_keys:
            return "a dict keyed by tensors made in the trace"
        return None

    def as_graph_arg(self, devices):
        if self.has_tensor_keys:
            raise Unsupported("a dict keyed by tensors given to a tensor operation")
        pairs = {k: v.as_graph_arg(devices) for k, v in self.items.items()}
        return {k: p[0] for k, p in pairs.items()}, {k: p[1] for k, p in pairs.items()}

    def subscript(self, tx, index):
        key = dict_key(tx, index)
        if key not in self.items:
            raise ProgramRaises(f"dict has no key {key!r} (KeyError)", KeyError(key))
        return self.items[key]

    def method_getitem(self, tx, key):
        return self.subscript(tx, key)

    def method_len(self, tx):
        return ConstantVariable(len(self.items))

    def method_contains(self, tx, key):
        return ConstantVariable(dict_key(tx, key) in self.items)

    def method_get(self, tx, key, default=None):
        return self.items.get(dict_key(tx, key), default if default is not None else ConstantVariable(None))

    def method_keys(self, tx):
        return DictViewVariable(self, "keys")

    def method_values(self, tx):
        return DictViewVariable(self, "values")

    def method_items(self, tx):
        return DictViewVariable(self, "items")

    def method_iter(self, tx):
        from .iterators import make_iterator

        return make_iterator(tx, self)

    def method_ior(self, tx, other):
        """``d |= other``: dict.update in place (a mapping or an iterable of pairs)."""
        self.method_update(tx, other)
        return self

    def method_or(self, tx, other):
        """``d | other``: a new dict (an OrderedDict when either side is one)."""
        if not isinstance(other, DictVariable):
            raise Unsupported(f"dict | {other} (TypeError)")
        if collections.defaultdict in (self.python_type(), other.python_type()):
            raise Unsupported("| with a defaultdict (its own __or__/__ror__)")
        kind = collections.OrderedDict if collections.OrderedDict in (self.dict_type, other.dict_type) else dict
        result = DictVariable(self.items, kind)
        result.items.update(other.items)
        return result

    def method_copy(self, tx):
        return DictVariable(self.items, self.dict_type)

    def method_setitem(self, tx, key, value):
        _check_mutable(tx, self, "item assignment")
        self._store(tx, key, value)
        return ConstantVariable(None)

    def method_delitem(self, tx, key):
        k = dict_key(tx, key)
        if k not in self.items:
            raise ProgramRaises(f"del of missing key {k!r} (KeyError)", KeyError(k))
        _check_mutable(tx, self, "item deletion")
        del self.items[k]
        return ConstantVariable(None)

    def method_clear(self, tx):
        _check_mutable(tx, self, "clear")
        self.items.clear()
        return ConstantVariable(None)

    def method_popitem(self, tx, *args, **kwargs):
        """``d.popitem()``: the last pair; ``OrderedDict.popitem(last=False)``: the first."""
        last = [*args, *kwargs.values()]
        if (last and not issubclass(self.dict_type, collections.OrderedDict)) or len(last) > 1 \
                or set(kwargs) - {"last"}:
            raise Unsupported(f"{self.dict_type.__name__}.popitem() arguments (TypeError)")
        if not self.items:
            raise ProgramRaises("popitem(): dictionary is empty (KeyError)", KeyError("popitem(): dictionary is empty"))
        _check_mutable(tx, self, "popitem")
        first = bool(last) and not last[0].as_python_constant()
        k = next(iter(self.items)) if first else next(reversed(self.items))
        return TupleVariable([key_variable(k), self.items.pop(k)])

    def method_update(self, tx, other=None, /, **kwargs):
        _check_mutable(tx, self, "update")
        if other is not None:
            if isinstance(other, DictVariable):
                self.items.update(other.items)
            else:
                from .iterators import make_iterator

                # one pair at a time, as CPython: a generator's body sees the dict updated so far
                # (and an exception it raises leaves the pairs before it stored)
                iterator = make_iterator(tx, other)
                while (pair := iterator.next_item(tx)) is not None:
                    k, v = pair.unpack(tx)
                    self._store(tx, k, v)
        self.items.update(kwargs)
        return ConstantVariable(None)

    def method_pop(self, tx, key, default=None):
        _check_mutable(tx, self, "pop")
        k = dict_key(tx, key)
        if k in self.items:
            return self.items.pop(k)
        if default is None:
            raise ProgramRaises(f"dict.pop of missing key {k!r} (KeyError)", KeyError(k))
        return default

    def method_setdefault(self, tx, key, default=None):
        k = dict_key(tx, key)
        if k not in self.items:
            if isinstance(k, TensorKey) and self.source is not None:
                raise Unsupported("a tensor stored as a key of the caller's dict")
            _check_mutable(tx, self, "setdefault")
            self.items[k] = default if default is not None else ConstantVariable(None)
        return self.items[k]

    def __repr__(self):
        return f"DictVariable({self.items!r})"


class TensorKey:
    """A tensor as a dict key.  CPython hashes a tensor by identity, so two tensor keys are one
    key exactly when they are the same tensor object: ``operators.is_same``, which guards the
    aliasing of inputs it relies on.  All tensor keys share one hash, so equality decides."""

    __slots__ = ("vt", "tx")

    def __init__(self, vt, tx):
        self.vt, self.tx = vt, tx

    def __hash__(self):
        return hash(TensorKey)

    def __eq__(self, other):
        if not isinstance(other, TensorKey):
            return False
        from ..operators import is_same

        return other.vt is self.vt or is_same(self.tx, self.vt, other.vt)

    def __repr__(self):
        return f"TensorKey({self.vt})"


def dict_key(tx, vt):
    """A dict key: a constant, or a tensor (by identity, ``TensorKey``)."""
    from .tensor import TensorVariable

    if isinstance(vt, TensorVariable):
        return TensorKey(vt, tx)
    return _key(vt)


def key_variable(key) -> VariableTracker:
    """The tracker of a stored key (the tensor itself for a ``TensorKey``)."""
    return key.vt if isinstance(key, TensorKey) else ConstantVariable(key)


def _key(vt):
    key = maybe_constant(vt, _key)
    if key is _key:
        raise Unsupported(f"dict key {vt} is not a constant")
    refuse_user_dunders([key], "hashing")           # an enum with a Python __hash__/__eq__
    return key


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
        rest = []
        while (item := self.next_item(tx)) is not None:
            rest.append(item)
            if len(rest) > MAX_ITEMS:
                raise Unsupported(f"an iterator gave more than {MAX_ITEMS} items (endless?)")
        return rest

    def method_iter(self, tx):
        return self

    def method_next(self, tx):
        item = self.next_item(tx)
        if item is None:
            raise Unsupported("next() of an exhausted iterator (StopIteration)")
        return item

    def __repr__(self):
        return f"{type(self).__name__}({getattr(self.kind, '__name__', self.kind)})"


class DictViewVariable(MethodTable, VariableTracker):
    """``d.keys()`` / ``d.values()`` / ``d.items()``: a live view over the DictVariable.

    Set operations and comparisons of keys/items views are computed on a real view of a real
    dict with the same keys (and, for items, the same constant values), so results and their
    order are CPython's own (operators.py).  A view cannot leave the frame (refused)."""

    TYPES = {"keys": type({}.keys()), "values": type({}.values()), "items": type({}.items())}

    def __init__(self, dict_vt, kind: str):
        super().__init__()
        self.dict_vt = dict_vt
        self.kind = kind

    def python_type(self):
        if self.dict_vt.dict_type is dict:
            return self.TYPES[self.kind]
        return type(getattr(self.dict_vt.dict_type(), self.kind)())       # odict_keys, ...

    def truth(self, tx):
        return bool(self.dict_vt.items)

    def unpack(self, tx):
        from .iterators import make_iterator

        return make_iterator(tx, self).unpack(tx)

    def real_view(self):
        """A real view with the same contents (keys; items need constant values), or Unsupported."""
        if self.dict_vt.has_tensor_keys:
            raise Unsupported("set operations on the view of a dict keyed by tensors")
        if self.kind == "keys":
            return dict.fromkeys(self.dict_vt.items).keys()
        if self.kind == "items":
            return {k: v.as_python_constant() for k, v in self.dict_vt.items.items()}.items()
        raise Unsupported("a dict values view used as a set")

    def method_len(self, tx):
        return ConstantVariable(len(self.dict_vt.items))

    def method_contains(self, tx, value):
        from .. import operators

        if self.kind == "keys":
            return self.dict_vt.method_contains(tx, value)
        if self.kind == "values":
            return ConstantVariable(any(operators.identical_or_equal(tx, v, value)
                                        for v in list(self.dict_vt.items.values())))
        if not isinstance(value, TupleVariable) or len(value.items) != 2:   # only 2-tuples can be in it
            if type(value).__name__ == "UserObjectVariable" and isinstance(value.value, tuple):
                raise Unsupported(f"{value} in a dict items view")
            return ConstantVariable(False)
        key, item = value.items
        k = dict_key(tx, key)
        if k not in self.dict_vt.items:
            return ConstantVariable(False)
        return ConstantVariable(operators.identical_or_equal(tx, self.dict_vt.items[k], item))

    def method_iter(self, tx):
        from .iterators import make_iterator

        return make_iterator(tx, self)

    def method_reversed(self, tx):
        from .iterators import make_reversed

        return make_reversed(tx, self)

    def method_isdisjoint(self, tx, other):
        return ConstantVariable(self.real_view().isdisjoint(_real_operand(tx, other)))

    def __repr__(self):
        return f"DictViewVariable({self.kind})"


_NO = object()


def _real_operand(tx, vt):
    """The real value of an operand of a view's set operation."""
    if isinstance(vt, DictViewVariable):
        return vt.real_view()
    if isinstance(vt, (BaseListVariable, IteratorVariable, DictVariable)) and maybe_constant(vt, _NO) is _NO:
        return [_real_operand(tx, i) if isinstance(i, DictViewVariable) else i.as_python_constant()
                for i in vt.unpack(tx)]
    return vt.as_python_constant()


class SetVariable(MethodTable, VariableTracker):
    """A set of constants made during the trace (set displays, set comprehensions, ``set()``).
    A real Python set holds them, so iteration order is the program's own."""

    def __init__(self, values=(), owned=False):
        super().__init__()
        # ``owned``: ``values`` is a set CPython itself just made (``s - t``, a caller's set) and
        # is held as is: a copy could iterate in another order (its table may differ)
        self.values = values if owned else set(values)

    def python_type(self):
        return set

    def as_python_constant(self):
        # the set itself, not a copy: ``str(s)``, ``s & t``, ``sorted(s)`` walk its table as
        # CPython walks the program's set (a copy's table, and so its order, may differ)
        return self.values

    def truth(self, tx):
        return bool(self.values)

    def unpack(self, tx):
        return [ConstantVariable(v) for v in self.values]

    def method_add(self, tx, value):
        self.values.add(_key(value))
        return ConstantVariable(None)

    def method_update(self, tx, *others):
        for other in others:
            real = other.values if isinstance(other, SetVariable) else maybe_constant(other, None)
            if isinstance(real, (set, frozenset)):
                # a set merges its table (the compiler's frozenset of a display ``{8, 3, 64}``):
                # the order it iterates in is that table's, not the one of re-inserting items
                self.values.update(real)
            elif isinstance(other, IteratorVariable):     # added as pulled: a generator's body sees them
                while (item := other.next_item(tx)) is not None:
                    self.values.add(_key(item))
            else:
                self.values.update(_key(v) for v in other.unpack(tx))
        return ConstantVariable(None)

    def method_discard(self, tx, value):
        self.values.discard(_key(value))
        return ConstantVariable(None)

    def method_contains(self, tx, value):
        return ConstantVariable(_key(value) in self.values)

    def method_len(self, tx):
        return ConstantVariable(len(self.values))

    def method_copy(self, tx):
        return SetVariable(self.values)

    def method_union(self, tx, *others):
        result = SetVariable(self.values)
        result.method_update(tx, *others)
        return result

    # set algebra: one table, each computed on the real sets of constants
    def call_method(self, tx, name, args, kwargs):
        if name in SET_WALKS and not kwargs and args and all(isinstance(a, IteratorVariable) for a in args):
            return self.walk_lazily(tx, name, args)
        if name in SET_ALGEBRA and not kwargs:
            others = [_constant_set(tx, a) for a in args]
            try:
                result = getattr(self.values, name)(*others)
            except TypeError as e:
                raise Unsupported(f"set.{name}: {e} (TypeError)") from e
            if name.endswith("_update"):
                return ConstantVariable(None)
            return SetVariable(result, owned=True) if isinstance(result, set) else ConstantVariable(result)
        return super().call_method(tx, name, args, kwargs)

    def walk_lazily(self, tx, name, args):
        """CPython walks an iterator argument of these one item at a time: ``isdisjoint``
        stops at the first common item, ``issuperset`` at the first missing one, and
        ``difference_update`` discards each as it comes, so a generator's body runs exactly
        that far and sees the set as it is then."""
        if name == "difference_update":
            for other in args:
                while (item := other.next_item(tx)) is not None:
                    self.values.discard(_key(item))
            return ConstantVariable(None)
        if len(args) != 1:
            raise Unsupported(f"set.{name} with {len(args)} arguments (TypeError)")
        stop_when_found = name == "isdisjoint"
        while (item := args[0].next_item(tx)) is not None:
            if (_key(item) in self.values) is stop_when_found:
                return ConstantVariable(False)
        return ConstantVariable(True)

    def var_getattr(self, tx, name):
        if name in SET_ALGEBRA:
            return BoundMethodVariable(self, name)
        return super().var_getattr(tx, name)

    def method_pop(self, tx):
        if not self.values:
            raise ProgramRaises("pop from an empty set (KeyError)", KeyError("pop from an empty set"))
        return ConstantVariable(self.values.pop())

    def method_remove(self, tx, value):
        if _key(value) not in self.values:
            raise ProgramRaises("set.remove of a missing element (KeyError)", KeyError(_key(value)))
        self.values.remove(_key(value))
        return ConstantVariable(None)

    def method_clear(self, tx):
        self.values.clear()
        return ConstantVariable(None)

    def method_iter(self, tx):
        from .iterators import make_iterator

        return make_iterator(tx, self)

    def inplace(self, tx, fn, other):
        """``s |= t`` (``&=``, ``-=``, ``^=``): in place on this very set when ``t`` is a set,
        as set.__ior__ does; None otherwise (CPython then falls back to ``s | t``)."""
        value = other.values if isinstance(other, SetVariable) else maybe_constant(other, _NO)
        if not isinstance(value, (set, frozenset)):
            return None
        fn(self.values, value)             # operator.ior & co. mutate the real set in place
        return self

    def __repr__(self):
        return f"SetVariable({self.values!r})"


SET_ALGEBRA = frozenset({"intersection", "difference", "symmetric_difference", "issubset", "issuperset",
                         "isdisjoint", "intersection_update", "difference_update",
                         "symmetric_difference_update"})


def _constant_set(tx, vt):
    """An argument of a set method: any iterable of constants (set, list, dict keys, ...)."""
    if isinstance(vt, SetVariable):
        return vt.values
    value = maybe_constant(vt, _NO)
    if isinstance(value, (set, frozenset)):
        return value
    from .iterators import make_iterator

    return [_key(item) for item in make_iterator(tx, vt).unpack(tx)]


SET_WALKS = frozenset({"isdisjoint", "issuperset", "difference_update"})   # see SetVariable.walk_lazily

SET_CHANGES = ("add", "update", "discard", "remove", "clear", "pop", "ior", "iand", "isub", "ixor",
               "difference_update", "intersection_update", "symmetric_difference_update")


class CallerSetVariable(SetVariable):
    """A caller's set of constants, read-only (``caller_set`` in builder.py): every way to change
    it is refused (a side effect on the caller's set is not replayed): its methods, the
    ``*_update`` ones of the set-algebra table, and ``s |= t`` and kin (``inplace``)."""

    returns_real = True

    def _refuse(self, name):
        raise Unsupported(f"set.{name} on a set read from {self.source.name()} (a side effect on the caller's set)")

    def call_method(self, tx, name, args, kwargs):
        if name.strip("_") in SET_CHANGES:
            self._refuse(name)
        return super().call_method(tx, name, args, kwargs)

    def inplace(self, tx, fn, other):
        self._refuse(f"__{fn.__name__}__")


def _refuse_set_change(name):
    def method(self, tx, *args, **kwargs):
        self._refuse(name)
    return method


for _name in SET_CHANGES:
    setattr(CallerSetVariable, f"method_{_name}", _refuse_set_change(_name))
del _name

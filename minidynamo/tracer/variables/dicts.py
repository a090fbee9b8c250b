"""Dicts built or read during the trace, their keys (a tensor key by identity), and their live
views (``d.keys()``, ``d.values()``, ``d.items()``).

A dict made during the trace is ours to mutate; one read from the frame belongs to the caller,
and its changes are recorded to be replayed (``containers._check_mutable``).
"""

from __future__ import annotations

import collections

import guards as G

from ...exc import ProgramRaises, Unsupported
from ..library import refuse_user_dunders
from .base import VariableTracker, maybe_constant
from .constant import ConstantVariable
from .containers import _NO, BaseListVariable, IteratorVariable, MethodTable, TupleVariable, _check_mutable


class KeyedItems(dict):
    """A DictVariable's items, counting the changes of its keys (a key added or removed;
    ``key_changes``): CPython's dict iterator raises after a deletion and a re-insertion of the
    same key, which leaves the keys, their order and the size as they were."""

    key_changes = 0

    def __setitem__(self, key, value):
        if key not in self:
            self.key_changes += 1
        super().__setitem__(key, value)

    def __delitem__(self, key):
        self.key_changes += 1
        super().__delitem__(key)

    def pop(self, *args):
        self.key_changes += 1
        return super().pop(*args)

    def popitem(self):
        self.key_changes += 1
        return super().popitem()

    def clear(self):
        self.key_changes += 1
        super().clear()

    def update(self, *args, **kwargs):
        self.key_changes += 1
        super().update(*args, **kwargs)

    def setdefault(self, key, default=None):
        if key not in self:
            self.key_changes += 1
        return super().setdefault(key, default)


class DictVariable(MethodTable, VariableTracker):
    """A dict with constant keys (str, int, ...) and VariableTracker values, in order."""

    def __init__(self, items: dict, dict_type=dict, source=None):
        super().__init__(source)
        self.items = KeyedItems(items)
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

    def as_python_constant(self):
        """A snapshot, for pure functions (``str(d)``, ``f"{d}"``), as a list's: a plain dict or
        OrderedDict whose keys and values are all constants (a caller's number is read)."""
        if self.dict_type not in (dict, collections.OrderedDict) or self.has_tensor_keys:
            raise Unsupported(f"{self} is not a Python constant")
        return self.dict_type((k, v.as_python_constant()) for k, v in self.items.items())

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
        if (last and not issubclass(self.python_type(), collections.OrderedDict)) or len(last) > 1 \
                or set(kwargs) - {"last"}:
            raise Unsupported(f"{self.dict_type.__name__}.popitem() arguments (TypeError)")
        if not self.items:
            try:                                     # CPython's own error for this kind of dict
                (collections.OrderedDict if issubclass(self.python_type(), collections.OrderedDict) else dict)().popitem()
            except KeyError as e:
                raise ProgramRaises(f"popitem of an empty dict (KeyError: {e})", e) from None
        _check_mutable(tx, self, "popitem")
        first = bool(last) and not last[0].as_python_constant()
        k = next(iter(self.items)) if first else next(reversed(self.items))
        return TupleVariable([key_variable(k), self.items.pop(k)])

    def method_move_to_end(self, tx, key, last=None):
        """``OrderedDict.move_to_end(key, last=True)``: the pair goes last (first: ``last=False``)."""
        if not issubclass(self.python_type(), collections.OrderedDict):
            raise Unsupported(f"{self.dict_type.__name__}.move_to_end (AttributeError)")
        k = dict_key(tx, key)
        if k not in self.items:
            raise ProgramRaises(f"move_to_end of missing key {k!r} (KeyError)", KeyError(k))
        _check_mutable(tx, self, "move_to_end")
        value = self.items.pop(k)
        if last is None or last.truth(tx):
            self.items[k] = value
        else:
            rest = dict(self.items)
            self.items.clear()
            self.items[k] = value
            self.items.update(rest)
        return ConstantVariable(None)

    def method_update(self, tx, other=None, /, **kwargs):
        _check_mutable(tx, self, "update")
        if other is not None:
            from .iterators import make_iterator

            # (dict's update merges a dict subclass's table; OrderedDict's is MutableMapping's)
            ordered = isinstance(self.dict_type, type) and issubclass(self.dict_type, collections.OrderedDict)
            other = _dict_of_a_dict_subclass(other, table_merge=not ordered)
            keys = None if isinstance(other, DictVariable) else _mapping_method(tx, other)
            if isinstance(other, DictVariable):
                self.items.update(other.items)
            elif keys is not None:      # a mapping: its keys(), each read with [] (as CPython)
                for k in _walk(tx, keys):
                    self._store(tx, k, tx.subscript(other, k))
            elif ordered and (items := _mapping_method(tx, other, "items")) is not None:
                for pair in _walk(tx, items):         # (MutableMapping's update: items())
                    k, v = pair.unpack(tx)
                    self._store(tx, k, v)
            else:
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


def as_mapping(tx, other, keywords=False) -> "DictVariable":
    """``other`` as ``{**other}`` and ``f(**other)`` read it: a dict, or a new dict of a mapping's
    keys and values (``keys()``, then ``other[k]``); anything else is CPython's TypeError.
    ``keywords`` (``f(**other)``): a key its ``keys()`` gives twice is the call's TypeError."""
    other = _dict_of_a_dict_subclass(other, table_merge=True)
    if isinstance(other, DictVariable):
        return other
    keys = _mapping_method(tx, other)
    if keys is None:
        raise Unsupported(f"** of {other}, which is not a mapping (TypeError)")
    incoming = DictVariable({})
    for k in _walk(tx, keys):
        if keywords and dict_key(tx, k) in incoming.items:
            raise Unsupported(f"keyword argument {maybe_constant(k, '?')!r} given twice by ** of a mapping (TypeError)")
        incoming._store(tx, k, tx.subscript(other, k))
    return incoming


def _walk(tx, method):
    """The items of what ``method()`` (a mapping's ``keys`` or ``items``) returns, one by one."""
    from .iterators import make_iterator

    iterator = make_iterator(tx, method.call_function(tx, [], {}))
    while (k := iterator.next_item(tx)) is not None:
        yield k


def _dict_of_a_dict_subclass(other, table_merge: bool):
    """A dict subclass made in the frame whose ``__iter__`` is dict's own: dict's merge takes its
    table directly (``keys()`` and ``[]`` are not called, however the class overrides them); a
    real one with such overrides is refused (its raw items are not modelled).  ``table_merge``
    False (OrderedDict's update, MutableMapping's rule): only an exact dict is merged so."""
    from ..program_code import python_slot

    try:
        kind = other.python_type() if not isinstance(other, DictVariable) else None
    except Unsupported:
        kind = None
    if not table_merge or not isinstance(kind, type) or not issubclass(kind, dict) \
            or G.class_lookup(kind, "__iter__") is not dict.__dict__["__iter__"]:
        return other
    if getattr(other, "dict_part", None) is not None:
        return other.dict_part
    if any(python_slot(kind, name) is not None for name in ("keys", "__getitem__")):
        raise Unsupported(f"merging a {kind.__name__}, whose keys() or [] CPython's merge does not call")
    return other


def _mapping_method(tx, other, name="keys"):
    """``other.keys`` (``name``) when ``other`` has one, else None: CPython's ``dict(x)``, ``d.update(x)``
    and ``{**x}`` read an argument with ``keys`` as a mapping (its keys, then ``x[k]``), any
    other as an iterable of pairs.  Lists, tuples, iterators and views have none.  (``name``:
    ``items``, which OrderedDict's update asks next.)"""
    from .base import read_or_absent

    if isinstance(other, (BaseListVariable, IteratorVariable, DictViewVariable)):
        return None
    return read_or_absent(tx, other, name)


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
    return constant_key(vt)


def key_variable(key) -> VariableTracker:
    """The tracker of a stored key (the tensor itself for a ``TensorKey``; a tuple of constants
    as a tuple, which unpacks and indexes: ``for (size, dtype), v in cache.items()``)."""
    if isinstance(key, TensorKey):
        return key.vt
    if type(key) is tuple:
        from .containers import TupleVariable

        return TupleVariable([key_variable(k) for k in key])
    return ConstantVariable(key)


def constant_key(vt):
    """The hashable constant a tracked key stands for (Unsupported when it is none)."""
    key = maybe_constant(vt, constant_key)
    if key is constant_key:
        raise Unsupported(f"dict key {vt} is not a constant")
    refuse_user_dunders([key], "hashing")           # an enum with a Python __hash__/__eq__
    return key



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



def _real_operand(tx, vt):
    """The real value of an operand of a view's set operation."""
    if isinstance(vt, DictViewVariable):
        return vt.real_view()
    if isinstance(vt, (BaseListVariable, IteratorVariable, DictVariable)) and maybe_constant(vt, _NO) is _NO:
        return [_real_operand(tx, i) if isinstance(i, DictViewVariable) else i.as_python_constant()
                for i in vt.unpack(tx)]
    return vt.as_python_constant()

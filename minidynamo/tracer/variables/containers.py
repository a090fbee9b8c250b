"""Python containers built or read during the trace: tuples, lists, torch.Size, namedtuples,
dicts, slices, and the iterators a for-loop walks.

A container made during the trace is ours to mutate.  One read from the frame (``source`` set)
belongs to the caller: mutating it would have to be replayed, so that is Unsupported.
"""

from __future__ import annotations

import torch

from ...exc import Unsupported
from .base import AttributeMissing, BoundMethodVariable, VariableTracker, maybe_constant
from .constant import ConstantVariable


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
        raise AttributeMissing(f"{self.python_type().__name__} has no attribute {name!r} (AttributeError)")


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
        from ..output_graph import graph_arg

        pairs = [graph_arg(i, devices) for i in self.items]
        kind = list if self.python_type() is list else tuple
        return kind(p[0] for p in pairs), kind(p[1] for p in pairs)

    def rebuild(self, items, source=None):
        return type(self)(items)

    def subscript(self, tx, index):
        key = index.as_python_constant()
        if isinstance(key, slice):
            return self.rebuild(self.items[key])
        if not isinstance(key, int):
            raise Unsupported(f"{self.python_type().__name__} index of type {type(key).__name__}")
        try:
            return self.items[key]
        except IndexError as e:
            raise Unsupported(f"{self.python_type().__name__} index out of range (an exception)") from e

    def method_getitem(self, tx, index):
        return self.subscript(tx, index)

    def method_len(self, tx):
        return ConstantVariable(len(self.items))

    def method_index(self, tx, value):
        from .. import operators

        for i, item in enumerate(self.items):
            if operators.identical_or_equal(tx, item, value):
                return ConstantVariable(i)
        raise Unsupported("list.index found nothing (an exception)")

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

    def __init__(self, items, tuple_type, source=None):
        super().__init__(items, source)
        self.tuple_type = tuple_type

    def python_type(self):
        return self.tuple_type

    def as_python_constant(self):
        return make_named_tuple(self.tuple_type, [i.as_python_constant() for i in self.items])

    def rebuild(self, items, source=None):
        return TupleVariable(items)

    def var_getattr(self, tx, name):
        fields = named_tuple_fields(self.tuple_type)
        if name in fields:
            return self.items[fields.index(name)]
        raise Unsupported(f"attribute {name!r} of namedtuple {self.tuple_type.__name__}")


def named_tuple_fields(kind) -> tuple:
    """Field names of a namedtuple or a structseq (``torch.return_types.max``)."""
    return tuple(getattr(kind, "_fields", None) or getattr(kind, "__match_args__", ()))


def is_named_tuple_type(kind) -> bool:
    return issubclass(kind, tuple) and bool(named_tuple_fields(kind))


def make_named_tuple(kind, items):
    return kind(*items) if hasattr(kind, "_fields") else kind(items)


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
        _check_mutable(tx, self, "extend")
        self.items.extend(values.unpack(tx))
        return ConstantVariable(None)

    def method_insert(self, tx, index, value):
        _check_mutable(tx, self, "insert")
        self.items.insert(index.as_python_constant(), value)
        return ConstantVariable(None)

    def method_pop(self, tx, index=None):
        _check_mutable(tx, self, "pop")
        if not self.items:
            raise Unsupported("pop from an empty list (an exception)")
        return self.items.pop(-1 if index is None else index.as_python_constant())

    def method_reverse(self, tx):
        _check_mutable(tx, self, "reverse")
        self.items.reverse()
        return ConstantVariable(None)

    def method_sort(self, tx, key=None, reverse=None):
        """Sorts by constant keys (the items themselves, or ``key(item)``): stable, like list.sort."""
        _check_mutable(tx, self, "sort")
        keys = [(key.call_function(tx, [i], {}) if key is not None else i).as_python_constant() for i in self.items]
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
        self.method_extend(tx, other)
        return self


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
        return [ConstantVariable(k) for k in self.items]

    def as_graph_arg(self, devices):
        from ..output_graph import graph_arg

        pairs = {k: graph_arg(v, devices) for k, v in self.items.items()}
        return {k: p[0] for k, p in pairs.items()}, {k: p[1] for k, p in pairs.items()}

    def subscript(self, tx, index):
        key = _key(index)
        if key not in self.items:
            raise Unsupported(f"dict has no key {key!r} (KeyError)")
        return self.items[key]

    def method_getitem(self, tx, key):
        return self.subscript(tx, key)

    def method_len(self, tx):
        return ConstantVariable(len(self.items))

    def method_contains(self, tx, key):
        return ConstantVariable(_key(key) in self.items)

    def method_get(self, tx, key, default=None):
        return self.items.get(_key(key), default if default is not None else ConstantVariable(None))

    def method_keys(self, tx):
        return TupleVariable([ConstantVariable(k) for k in self.items])

    def method_values(self, tx):
        return TupleVariable(list(self.items.values()))

    def method_items(self, tx):
        return TupleVariable([TupleVariable([ConstantVariable(k), v]) for k, v in self.items.items()])

    def method_copy(self, tx):
        return DictVariable(self.items, self.dict_type)

    def method_setitem(self, tx, key, value):
        _check_mutable(tx, self, "item assignment")
        self.items[_key(key)] = value
        return ConstantVariable(None)

    def method_delitem(self, tx, key):
        _check_mutable(tx, self, "item deletion")
        self.items.pop(_key(key))
        return ConstantVariable(None)

    def method_update(self, tx, other=None, **kwargs):
        _check_mutable(tx, self, "update")
        if other is not None:
            if isinstance(other, DictVariable):
                self.items.update(other.items)
            else:
                for pair in other.unpack(tx):
                    k, v = pair.unpack(tx)
                    self.items[_key(k)] = v
        self.items.update(kwargs)
        return ConstantVariable(None)

    def method_pop(self, tx, key, default=None):
        _check_mutable(tx, self, "pop")
        k = _key(key)
        if k in self.items:
            return self.items.pop(k)
        if default is None:
            raise Unsupported(f"dict.pop of missing key {k!r} (KeyError)")
        return default

    def method_setdefault(self, tx, key, default=None):
        k = _key(key)
        if k not in self.items:
            _check_mutable(tx, self, "setdefault")
            self.items[k] = default if default is not None else ConstantVariable(None)
        return self.items[k]

    def __repr__(self):
        return f"DictVariable({self.items!r})"


def _key(vt):
    key = maybe_constant(vt, _key)
    if key is _key:
        raise Unsupported(f"dict key {vt} is not a constant")
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
        from ..output_graph import graph_arg

        pairs = [graph_arg(p, devices) for p in self.parts]
        return slice(*(p[0] for p in pairs)), slice(*(p[1] for p in pairs))


class IteratorVariable(VariableTracker):
    """``iter(x)`` over items known at trace time; FOR_ITER takes them one by one."""

    def __init__(self, items):
        super().__init__()
        self.items = list(items)
        self.index = 0

    def next_item(self):
        if self.index >= len(self.items):
            return None
        item = self.items[self.index]
        self.index += 1
        return item

    def unpack(self, tx):
        rest = self.items[self.index:]
        self.index = len(self.items)
        return rest

    def __repr__(self):
        return f"IteratorVariable({len(self.items) - self.index} left)"


class SetVariable(MethodTable, VariableTracker):
    """A set of constants made during the trace (set displays, set comprehensions, ``set()``).
    A real Python set holds them, so iteration order is the program's own."""

    def __init__(self, values=()):
        super().__init__()
        self.values = set(values)

    def python_type(self):
        return set

    def as_python_constant(self):
        return set(self.values)        # a copy: for pure functions and operators (s | t)

    def truth(self, tx):
        return bool(self.values)

    def unpack(self, tx):
        return [ConstantVariable(v) for v in self.values]

    def method_add(self, tx, value):
        self.values.add(_key(value))
        return ConstantVariable(None)

    def method_update(self, tx, *others):
        for other in others:
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

    def __repr__(self):
        return f"SetVariable({self.values!r})"

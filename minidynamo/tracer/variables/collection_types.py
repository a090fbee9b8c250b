"""The ``collections`` containers a trace can make: ``deque`` and ``defaultdict``.

Both reuse the storage of the plain containers (containers.py) and add what differs: a deque
has only deque's methods (no slicing, no sort) and its own iteration check; a defaultdict
calls its factory (inlined) for a missing ``d[k]``, as ``__missing__`` does, and can be rebuilt
after the graph only when its factory is a value every call shares (``cannot_rebuild``).
Their constructors are in the stdlib table (stdlib.py).
"""

from __future__ import annotations

import collections
import types

from ...exc import ProgramRaises, Unsupported
from .base import NO_CONSTANT, AttributeMissing, maybe_constant
from .constant import ConstantVariable
from .containers import MAX_ITEMS, ListVariable, _check_mutable
from .dicts import DictVariable, dict_key



class DequeVariable(ListVariable):
    """A ``collections.deque`` made in the trace: a list's storage, and only the methods deque
    has (no slicing, no sort).  A bounded one (``maxlen``) drops from the other end as it grows
    past its bound, one item at a time, as CPython's does."""

    def __init__(self, items, maxlen=None, **kwargs):
        super().__init__(items, **kwargs)
        self.maxlen = maxlen
        if maxlen is not None:
            del self.items[:max(0, len(self.items) - maxlen)]

    def python_type(self):
        return collections.deque

    def as_python_constant(self):
        return collections.deque((i.as_python_constant() for i in self.items), self.maxlen)

    def _full(self) -> bool:
        return self.maxlen is not None and len(self.items) >= self.maxlen

    def method_append(self, tx, value):
        if self.maxlen == 0:
            return ConstantVariable(None)
        if self._full():
            _check_mutable(tx, self, "append")
            self.items.pop(0)
        return super().method_append(tx, value)

    def method_extend(self, tx, values):
        if self.maxlen is None:
            return super().method_extend(tx, values)
        for item in _pulled(tx, self, values):
            self.method_append(tx, item)
        return ConstantVariable(None)

    def method_iadd(self, tx, other):
        self.method_extend(tx, other)
        return self

    def method_insert(self, tx, index, value):
        if self._full():
            raise ProgramRaises("deque already at its maximum size (IndexError)",
                                IndexError("deque already at its maximum size"))
        return super().method_insert(tx, index, value)

    def method_imul(self, tx, count):
        """``d *= n``: the repeated items, of which a bounded deque keeps the last ``maxlen``."""
        result = super().method_imul(tx, count)
        if self.maxlen is not None:
            del self.items[:max(0, len(self.items) - self.maxlen)]
        return result

    def rebuild(self, items, source=None):
        return DequeVariable(items, self.maxlen)

    def call_method(self, tx, name, args, kwargs):
        if not hasattr(collections.deque, name):
            raise Unsupported(f"deque has no method {name!r} (AttributeError)")
        return super().call_method(tx, name, args, kwargs)

    def var_getattr(self, tx, name):
        if not hasattr(collections.deque, name):
            raise AttributeMissing(f"deque has no attribute {name!r} (AttributeError)", self, name)
        if name == "maxlen":
            return ConstantVariable(self.maxlen)
        return super().var_getattr(tx, name)

    def subscript(self, tx, index):
        if type(maybe_constant(index, NO_CONSTANT)) is not int:
            raise Unsupported(f"deque index {index} (TypeError)")
        return super().subscript(tx, index)

    def method_setitem(self, tx, index, value):
        if type(maybe_constant(index, NO_CONSTANT)) is not int:
            raise Unsupported(f"deque index {index} (TypeError)")
        return super().method_setitem(tx, index, value)

    def method_pop(self, tx):
        return super().method_pop(tx)

    def method_appendleft(self, tx, value):
        if self.maxlen == 0:
            return ConstantVariable(None)
        _check_mutable(tx, self, "appendleft")
        if self._full():
            self.items.pop()
        self.items.insert(0, value)
        return ConstantVariable(None)

    def method_extendleft(self, tx, values):
        """Each item goes to the left in turn (the order ends up reversed), as CPython does."""
        for item in _pulled(tx, self, values):
            self.method_appendleft(tx, item)
        return ConstantVariable(None)

    def method_popleft(self, tx):
        if not self.items:
            raise ProgramRaises("pop from an empty deque (IndexError)", IndexError("pop from an empty deque"))
        _check_mutable(tx, self, "popleft")
        return self.items.pop(0)

    def method_rotate(self, tx, n=None):
        steps = 1 if n is None else maybe_constant(n, NO_CONSTANT)
        if type(steps) is not int:
            raise Unsupported(f"deque.rotate({n})")
        if self.items:
            _check_mutable(tx, self, "rotate")
            steps %= len(self.items)
            self.items[:] = self.items[-steps:] + self.items[:-steps]
        return ConstantVariable(None)

    def method_copy(self, tx):
        return DequeVariable(self.items, self.maxlen)

    def method_iter(self, tx):
        from .iterators import make_iterator

        return make_iterator(tx, self)


def _pulled(tx, deque_vt, values):
    """The items ``values`` gives, each pulled once the one before went in, as CPython's deque
    pulls them (a generator reading the deque sees every item added before); the deque itself
    is copied first (``d.extend(d)``)."""
    if values is deque_vt:
        yield from list(values.items)
        return
    from .iterators import make_iterator

    it = make_iterator(tx, values)            # a generator is its own iterator
    for _ in range(MAX_ITEMS):
        item = it.next_item(tx)
        if item is None:
            return
        yield item
    raise Unsupported(f"a deque extended by more than {MAX_ITEMS} items")


def default_factory(tx, factory):
    """The ``default_factory`` of a defaultdict made in the trace: None, or any callable tracker
    (it is inlined when a missing key is read)."""
    if factory is None or maybe_constant(factory, NO_CONSTANT) is None:
        return None
    from .builtins import BUILTIN_HANDLERS

    if not BUILTIN_HANDLERS[callable](tx, factory).as_python_constant():
        raise Unsupported(f"defaultdict({factory}): first argument must be callable or None (TypeError)")
    return factory


def _rebuild_value(factory):
    """The real factory to rebuild the dict with after the graph, or NO_CONSTANT when there is none:
    one made in the frame would be a different object on every call."""
    if factory is None:
        return None
    try:
        value = factory.as_python_constant()
    except Exception:  # noqa: BLE001 - a tracker with no single real value
        return NO_CONSTANT
    if factory.source is None and not _is_builtin_value(value):
        return NO_CONSTANT
    return value


def _is_builtin_value(value) -> bool:
    return isinstance(value, (type, types.BuiltinFunctionType)) and getattr(value, "__module__", "") == "builtins"


class _DefaultDictOf:
    """``dict_type`` of a DefaultDictVariable: rebuilds ``defaultdict(factory, pairs)``."""

    def __init__(self, factory):
        self.factory = factory

    def __call__(self, pairs=()):
        return collections.defaultdict(self.factory, pairs)


class DefaultDictVariable(DictVariable):
    """A ``collections.defaultdict`` made in the trace: a missing key read by ``d[k]`` calls
    the factory (inlined) and stores its result, as ``__missing__`` does."""

    def __init__(self, items, factory, source=None):
        self.rebuild_factory = _rebuild_value(factory)
        super().__init__(items, _DefaultDictOf(self.rebuild_factory), source)
        self.factory = factory

    def cannot_rebuild(self):
        if self.rebuild_factory is NO_CONSTANT:
            return f"a defaultdict whose factory {self.factory} was made in the frame"
        return super().cannot_rebuild()

    def python_type(self):
        return collections.defaultdict

    def subscript(self, tx, index):
        key = dict_key(tx, index)
        if key not in self.items:
            if self.factory is None:
                raise ProgramRaises(f"defaultdict without a factory has no key {key!r} (KeyError)", KeyError(key))
            _check_mutable(tx, self, "__missing__")
            self.items[key] = self.factory.call_function(tx, [], {})
        return self.items[key]

    def method_copy(self, tx):
        return DefaultDictVariable(self.items, self.factory)

    def __repr__(self):
        return f"DefaultDictVariable({self.items!r})"

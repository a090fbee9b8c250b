"""Sets built or read during the trace: a real Python set holds the constants, so iteration
order is the program's own; a caller's set is changed only as a recorded side effect.
"""

from __future__ import annotations

from ...exc import ProgramRaises, Unsupported
from .base import BoundMethodVariable, VariableTracker, maybe_constant
from .constant import ConstantVariable
from .containers import _NO, IteratorVariable, MethodTable
from .dicts import constant_key


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
        self.values.add(constant_key(value))
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
                    self.values.add(constant_key(item))
            else:
                self.values.update(constant_key(v) for v in other.unpack(tx))
        return ConstantVariable(None)

    def method_discard(self, tx, value):
        self.values.discard(constant_key(value))
        return ConstantVariable(None)

    def method_contains(self, tx, value):
        return ConstantVariable(constant_key(value) in self.values)

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
                    self.values.discard(constant_key(item))
            return ConstantVariable(None)
        if len(args) != 1:
            raise Unsupported(f"set.{name} with {len(args)} arguments (TypeError)")
        stop_when_found = name == "isdisjoint"
        while (item := args[0].next_item(tx)) is not None:
            if (constant_key(item) in self.values) is stop_when_found:
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
        if constant_key(value) not in self.values:
            raise ProgramRaises("set.remove of a missing element (KeyError)", KeyError(constant_key(value)))
        self.values.remove(constant_key(value))
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

    return [constant_key(item) for item in make_iterator(tx, vt).unpack(tx)]


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

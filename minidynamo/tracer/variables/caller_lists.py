"""A list of the caller's that the frame may only append to, read (and guarded) only if needed.

A program that logs into a list it does not own is common: a forward hook collecting features
(``feats.append(out)``), a training step recording its loss (``self.losses.append(loss)``).
Wrapping such a list the usual way reads every item and guards its length; the list is one
item longer on every call, so every call missed its guard and compiled again, until the cache
was full and the frame ran eagerly.

But ``append`` does not depend on what the list holds.  So a caller's list starts *unread*:
only its type is guarded.  Appends (and extends by a list or tuple) are kept aside and replayed
after the graph as ``real.extend(appended)``.  The first read of anything else (its length, an
item, iteration, truth, any other method) *realizes* it: the length is guarded and the items
are wrapped, as for any caller's list, with the appends so far after them, and from then on it
is an ordinary ``ListVariable`` (replayed as ``real[:] = items``).

    feats.append(y)        # unread: guards type(feats) is list; replay feats.extend([y])
    n = len(feats)         # realized: guards len(feats) == k; replay feats[:] = [..k.., y]
"""

from __future__ import annotations

from .base import VariableTracker
from .constant import ConstantVariable
from .containers import BaseListVariable, ListVariable, _check_mutable


class CallerListVariable(ListVariable):
    """``realize()`` wraps the real list's items, guarding its length (the builder's closure)."""

    def __init__(self, source, realize):
        VariableTracker.__init__(self, source)
        self._items = None
        self._realize = realize
        self.appended: list = []

    @property
    def unread(self) -> bool:
        return self._items is None

    @property
    def items(self) -> list:
        if self._items is None:
            self._items = list(self._realize()) + self.appended
            self.appended = []
        return self._items

    @items.setter
    def items(self, items) -> None:
        if self._items is None:          # replacing everything still needs the old length guarded
            self.items
        self._items = items

    def rebuild(self, items, source=None):          # a slice of it is a plain new list
        return ListVariable(items)

    def method_append(self, tx, value):
        if not self.unread:
            return super().method_append(tx, value)
        _check_mutable(tx, self, "append")
        self.appended.append(value)
        return ConstantVariable(None)

    def method_extend(self, tx, values):
        if not self.unread or not isinstance(values, BaseListVariable) or values is self:
            return super().method_extend(tx, values)
        _check_mutable(tx, self, "extend")
        self.appended.extend(list(values.items))
        return ConstantVariable(None)

    def __repr__(self) -> str:
        state = f"unread + {len(self.appended)} appended" if self.unread else f"{len(self._items)} items"
        return f"CallerListVariable({self.source.name()}, {state})"

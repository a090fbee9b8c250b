"""Lazy iterators: ``iter(xs)``, ``zip``, ``map``, ``filter``, ``enumerate``, ``reversed`` and
the iterators a ``for`` loop walks, with CPython's semantics.

One protocol (``IteratorVariable`` in containers.py): ``next_item(tx)`` is one ``__next__``
call -- the next item, or None once exhausted.  Every iterator here pulls from the iterators
below it one step at a time, in CPython's order, so user functions run by ``map``/``filter``
interleave with the loop body exactly as they would in CPython, ``zip(it, it)`` pairs
consecutive items, and ``zip(..., strict=True)`` checks lengths where CPython checks them.

Iterators over containers read the container live:

    list       index < len(list) at each step (appends during the loop are seen)
    reversed   CPython's list_reverseiterator rule
    dict/set   keys fixed at creation; any change of the keys before a later step is what
               CPython reports as RuntimeError (changed size / keys changed): refused
    tuple, range, str, tensors, module lists: immutable, a snapshot is exact

``itertools`` (chain, zip_longest, islice, product & co., accumulate, ...) follow the same
protocol, at the end of this module; their table is ``stdlib.py``.

Returning or storing one goes through the output templates (templates.py): what they cannot
rebuild at its place is refused there, and the frame breaks at the store or falls back to eager.
"""

from __future__ import annotations

import collections
import itertools
import operator
import types

from ...exc import ProgramRaises, Unsupported
from .base import VariableTracker, maybe_constant
from .constant import ConstantVariable
from .collection_types import DequeVariable
from .containers import BaseListVariable, IteratorVariable, ListVariable, sequence_kind, TupleVariable
from .dicts import DictVariable, DictViewVariable, key_variable
from .sets import SetVariable

_LIST_ITER = LIST_ITERATOR = type(iter([]))
TUPLE_ITERATOR = type(iter(()))
_LIST_REVITER = LIST_REVERSE_ITERATOR = type(reversed([]))
_TUPLE_ITER = type(iter(()))
_DICT_KEYITER = type(iter({}))
_DICT_VALUEITER = type(iter({}.values()))
_DICT_ITEMITER = type(iter({}.items()))
_DICT_REVKEYITER = type(reversed({}))
_SET_ITER = type(iter(set()))
_DEQUE_ITER = type(iter(collections.deque()))
_NO = object()


def make_iterator(tx, obj) -> VariableTracker:
    """``iter(obj)`` (GET_ITER, ``iter()``, and every builtin that walks an iterable)."""
    if isinstance(obj, IteratorVariable):         # generators too: iter(gen) is gen
        return obj
    if sequence_kind(obj) is list:
        return ListIteratorVariable(obj)
    if isinstance(obj, DequeVariable):
        return DequeIteratorVariable(obj)
    if isinstance(obj, DictViewVariable):
        return DictIteratorVariable(obj.dict_vt, obj.kind)
    if isinstance(obj, DictVariable):
        return DictIteratorVariable(obj, "keys")
    if isinstance(obj, SetVariable):
        return SetIteratorVariable(obj)
    if isinstance(obj, BaseListVariable):
        return made_by(IteratorVariable(obj.items, _TUPLE_ITER), iter, obj)
    if isinstance(obj, ConstantVariable) and isinstance(obj.value, (range, str, bytes, frozenset)):
        return made_by(IteratorVariable(obj.unpack(tx), type(iter(obj.value))), iter, obj)
    own = _own_iter(tx, obj)
    if own is not None:
        return own
    return IteratorVariable(obj.unpack(tx))


def items_of(tx, obj) -> list:
    """Every item ``iter(obj)`` yields (unpacking ``a, b = obj``, ``f(*obj)``)."""
    own = _own_iter(tx, obj)
    return own.unpack(tx) if own is not None else obj.unpack(tx)


def _own_iter(tx, obj):
    """``iter(obj)`` for an object whose class defines ``__iter__`` in Python (detectron2's
    BufferList, fairseq's LayerDropModuleList, a user's container): that method inlined,
    as CPython calls it, found on the class.  None when the class defines none (or it is torch's
    own, which ``unpack`` models)."""
    if isinstance(obj, (BaseListVariable, DictVariable, SetVariable, ConstantVariable, IteratorVariable)):
        return None                            # (the common case: no class of the program's)
    from ..operators import special_method
    from ..program_code import python_slot
    from .new_objects import NewObjectVariable
    from .nn_module import NNModuleVariable
    from .objects import UserObjectVariable

    if isinstance(obj, NNModuleVariable):
        if not obj._overridden("__iter__"):
            return None
    elif isinstance(obj, NewObjectVariable):
        if python_slot(obj.klass, "__iter__") is None:
            return None
        return _checked_iterator(obj, obj.call_method(tx, "__iter__", [], {}))
    elif type(obj) is not UserObjectVariable:
        return None
    kind, method = special_method(tx, obj, "__iter__")
    if kind != "python":
        return None
    return _checked_iterator(obj, method.call_function(tx, [], {}))


def _checked_iterator(obj, result):
    """What ``__iter__`` returned, which must be an iterator (CPython raises TypeError otherwise:
    the frame runs eagerly and raises it)."""
    from ..program_code import python_slot
    from .objects import UserObjectVariable

    if isinstance(result, UserObjectVariable) and python_slot(type(result.value), "__next__") is not None:
        return result              # an iterator of the program's (``__iter__`` returning ``self``)
    if not isinstance(result, IteratorVariable):
        raise Unsupported(f"{obj}.__iter__ returned {result}, not an iterator the trace models")
    return result


def made_by(it, factory, walked):
    """Remember how ``it`` was made (a graph break may hand it over as itself: iterator_rebuild.py)."""
    it.made_by = (factory, walked)
    return it


class ListIteratorVariable(IteratorVariable):
    """``iter(list)``: reads the live list by index at each step."""

    def __init__(self, list_vt):
        super().__init__((), _LIST_ITER)
        self.list_vt = list_vt
        self.done = False

    def next_item(self, tx=None):
        if self.done:
            return None
        if self.index < len(self.list_vt.items):
            item = self.list_vt.items[self.index]
            self.index += 1
            return item
        self.done = True
        return None

    def __repr__(self):
        return f"ListIteratorVariable(at {self.index})"


class DequeIteratorVariable(IteratorVariable):
    """``iter(deque)``: a deque changed while iterated raises RuntimeError in CPython: refused."""

    def __init__(self, deque_vt):
        super().__init__(list(deque_vt.items), _DEQUE_ITER)
        self.deque_vt = deque_vt

    def next_item(self, tx=None):
        if len(self.deque_vt.items) != len(self.items) or any(
                a is not b for a, b in zip(self.deque_vt.items, self.items)):
            raise Unsupported("a deque changed while iterated (RuntimeError)")
        return super().next_item(tx)


class ListReverseIteratorVariable(IteratorVariable):
    """``reversed(list)``: CPython's list_reverseiterator (stops when the index is past the end)."""

    def __init__(self, list_vt):
        super().__init__((), _LIST_REVITER)
        self.list_vt = list_vt
        self.index = len(list_vt.items) - 1

    def next_item(self, tx=None):
        if 0 <= self.index < len(self.list_vt.items):
            item = self.list_vt.items[self.index]
            self.index -= 1
            return item
        self.index = -1
        return None


class DictIteratorVariable(IteratorVariable):
    """Iteration over a dict (or one of its views): keys fixed at creation, values read live.
    A change of the keys before a later step would raise RuntimeError in CPython: refused."""

    KINDS = {"keys": _DICT_KEYITER, "values": _DICT_VALUEITER, "items": _DICT_ITEMITER}

    def __init__(self, dict_vt, kind: str, reverse: bool = False):
        super().__init__((), _DICT_REVKEYITER if reverse else self.KINDS[kind])
        self.dict_vt = dict_vt
        self.kind = kind
        self.keys = list(dict_vt.items)
        if reverse:
            self.keys.reverse()
        self.reverse = reverse
        self.items_at_start = dict_vt.items
        self.key_changes = getattr(dict_vt.items, "key_changes", None)

    def next_item(self, tx=None):
        items = self.dict_vt.items
        current = list(items)
        if (list(reversed(current)) if self.reverse else current) != self.keys or items is not self.items_at_start \
                or getattr(items, "key_changes", None) != self.key_changes:
            raise Unsupported("a dict changed size or keys while iterated (RuntimeError)")
        if self.index >= len(self.keys):
            return None
        key = self.keys[self.index]
        self.index += 1
        if self.kind == "keys":
            return key_variable(key)
        if self.kind == "values":
            return self.dict_vt.items[key]
        return TupleVariable([key_variable(key), self.dict_vt.items[key]])


class SetIteratorVariable(IteratorVariable):
    """Iteration over a set made in the trace: its order is the real set's; a change of the
    set before a later step would raise RuntimeError in CPython: refused."""

    def __init__(self, set_vt):
        super().__init__([ConstantVariable(v) for v in set_vt.values], _SET_ITER)
        self.set_vt = set_vt
        self.snapshot = set(set_vt.values)

    def next_item(self, tx=None):
        if self.set_vt.values != self.snapshot:
            raise Unsupported("a set changed while iterated (RuntimeError)")
        return super().next_item(tx)


class ZipVariable(IteratorVariable):
    """``zip(*its, strict=...)``: each step pulls one item from each iterator, left to right."""

    def __init__(self, iterators, strict: bool):
        super().__init__((), zip)
        self.iterators = iterators
        self.strict = strict

    def next_item(self, tx=None):
        if not self.iterators:
            return None
        row = []
        for i, it in enumerate(self.iterators):
            item = it.next_item(tx)
            if item is None:
                if self.strict:
                    if i > 0:
                        raise Unsupported(f"zip() argument {i + 1} is shorter than argument 1 (ValueError)")
                    for j, other in enumerate(self.iterators[1:], start=2):
                        if other.next_item(tx) is not None:
                            raise Unsupported(f"zip() argument {j} is longer than argument 1 (ValueError)")
                return None
            row.append(item)
        return TupleVariable(row)


def stopping(call):
    """``call()``, or None (no next item) where it raises StopIteration: what the function an
    iterator calls for its next item raises leaves that iterator's ``__next__``, and its
    consumer takes a StopIteration for the end (``list(map(next, its))`` stops at the first
    exhausted ``its``)."""
    try:
        return call()
    except ProgramRaises as raised:
        if isinstance(raised.exception, StopIteration):
            return None
        raise


class MapVariable(IteratorVariable):
    """``map(fn, *its)``: fn runs symbolically (inlined) when an item is pulled."""

    def __init__(self, fn, iterators):
        super().__init__((), map)
        self.fn = fn
        self.iterators = iterators

    def next_item(self, tx=None):
        args = []
        for it in self.iterators:
            item = it.next_item(tx)
            if item is None:
                return None
            args.append(item)
        return stopping(lambda: self.fn.call_function(tx, args, {}))


class FilterVariable(IteratorVariable):
    """``filter(fn, it)``: fn (or truth when fn is None / bool) runs when an item is pulled."""

    def __init__(self, fn, iterator):
        super().__init__((), filter)
        self.fn = fn
        self.iterator = iterator

    def next_item(self, tx=None):
        plain = maybe_constant(self.fn, _NO) in (None, bool)
        while (item := self.iterator.next_item(tx)) is not None:
            keep = item.truth(tx) if plain else stopping(lambda: self.fn.call_function(tx, [item], {}).truth(tx))
            if keep is None:
                return None
            if keep:
                return item
        return None


class EnumerateVariable(IteratorVariable):
    def __init__(self, iterator, start):
        super().__init__((), enumerate)
        self.iterator = iterator
        self.count = start

    def next_item(self, tx=None):
        item = self.iterator.next_item(tx)
        if item is None:
            return None
        index = ConstantVariable(self.count)
        self.count += 1
        return TupleVariable([index, item])


def make_reversed(tx, seq) -> VariableTracker:
    """``reversed(seq)``."""
    if sequence_kind(seq) is list:
        return ListReverseIteratorVariable(seq)
    if isinstance(seq, DictViewVariable) and seq.kind == "keys":
        return DictIteratorVariable(seq.dict_vt, "keys", reverse=True)
    if isinstance(seq, DictVariable):
        return DictIteratorVariable(seq, "keys", reverse=True)
    if isinstance(seq, BaseListVariable):
        return made_by(IteratorVariable(list(reversed(seq.items)), type(reversed(()))), reversed, seq)
    if isinstance(seq, ConstantVariable) and isinstance(seq.value, (range, str, bytes)):
        return made_by(IteratorVariable(list(reversed(seq.unpack(tx))), type(reversed(seq.value))), reversed, seq)
    from .nn_module import NNModuleVariable

    if isinstance(seq, NNModuleVariable):
        return made_by(IteratorVariable(seq.reversed_children(tx), type(reversed(()))), reversed, seq)
    raise Unsupported(f"reversed() of {seq}")


# -- itertools: each one pulls from its inputs exactly when CPython's does ------------------------

class ChainVariable(IteratorVariable):
    """``itertools.chain(*its)`` / ``chain.from_iterable(its)``: ``iter()`` of each input is
    taken only when the previous one is exhausted, as CPython's chain does."""

    def __init__(self, sources):
        super().__init__((), itertools.chain)
        self.sources = sources              # an iterator whose items are iterables
        self.current = None

    def next_item(self, tx=None):
        while True:
            if self.current is None:
                source = self.sources.next_item(tx)
                if source is None:
                    return None
                self.current = make_iterator(tx, source)
            item = self.current.next_item(tx)
            if item is not None:
                return item
            self.current = None


class ZipLongestVariable(IteratorVariable):
    """``itertools.zip_longest(*its, fillvalue=None)``: an exhausted input is not pulled again."""

    def __init__(self, iterators, fillvalue):
        super().__init__((), itertools.zip_longest)
        self.iterators = list(iterators)
        self.active = [True] * len(self.iterators)
        self.fillvalue = fillvalue

    def next_item(self, tx=None):
        if not any(self.active):
            return None
        row = []
        for i, it in enumerate(self.iterators):
            item = it.next_item(tx) if self.active[i] else None
            if item is None:
                self.active[i] = False
                if not any(self.active):
                    return None
                item = self.fillvalue
            row.append(item)
        return TupleVariable(row)


class IsliceVariable(IteratorVariable):
    """``itertools.islice(it, [start,] stop [, step])``: CPython's counting rule (it never pulls
    an item past ``stop``)."""

    def __init__(self, iterator, start: int, stop, step: int):
        super().__init__((), itertools.islice)
        self.iterator, self.stop, self.step = iterator, stop, step
        self.next_index, self.count = start, 0

    def next_item(self, tx=None):
        stop = self.stop
        if stop is not None and self.count >= stop:
            return None
        while self.count < self.next_index:
            if self.iterator.next_item(tx) is None:
                self.stop = self.count = 0
                return None
            self.count += 1
        if stop is not None and self.count >= stop:
            return None
        item = self.iterator.next_item(tx)
        if item is None:
            self.stop = self.count = 0
            return None
        self.count += 1
        self.next_index += self.step
        if stop is not None and self.next_index > stop:
            self.next_index = stop
        return item


class IndexedCombinatoricVariable(IteratorVariable):
    """``product``, ``combinations``, ``permutations``, ``combinations_with_replacement``: CPython
    copies the inputs into tuples at creation; the real itertools function then runs over their
    *indices* (plain ints) and each index tuple picks the symbolic items."""

    def __init__(self, kind, pools, index_iterator):
        super().__init__((), kind)
        self.pools = pools
        self.indices = index_iterator

    def next_item(self, tx=None):
        picked = next(self.indices, None)
        if picked is None:
            return None
        return TupleVariable([self.pools[k if len(self.pools) > 1 else 0][i] for k, i in enumerate(picked)])


class AccumulateVariable(IteratorVariable):
    """``itertools.accumulate(it, func=operator.add, initial=None)``; ``func`` is inlined."""

    def __init__(self, iterator, func, initial):
        super().__init__((), itertools.accumulate)
        self.iterator, self.func = iterator, func
        self.total = initial

    def next_item(self, tx=None):
        from ..operators import apply

        if self.total is not None and self.index == 0:
            self.index = 1
            return self.total
        item = self.iterator.next_item(tx)
        if item is None:
            return None
        self.index = 1
        if self.total is None:
            self.total = item
        elif self.func is None:
            self.total = apply(tx, operator.add, [self.total, item])
        else:
            total = stopping(lambda: self.func.call_function(tx, [self.total, item], {}))
            if total is None:
                return None
            self.total = total
        return self.total


class PullVariable(IteratorVariable):
    """The small lazy itertools (``pairwise``, ``starmap``, ``compress``, ``takewhile``,
    ``dropwhile``, ``repeat``, ``count``): ``step(tx, self)`` gives the next item or None."""

    def __init__(self, kind, step, rebuild=None):
        super().__init__((), kind)
        self.step = step
        self.state = {}
        self.rebuild = rebuild      # state -> (factory, arguments) that make it again where it is, or None

    def next_item(self, tx=None):
        return stopping(lambda: self.step(tx, self.state))


# -- operator.length_hint of an iterator -----------------------------------------------------------

# Iterators of fixed items whose ``__length_hint__`` is the count of items left.
_COUNTING = frozenset(map(type, (iter(()), iter(range(0)), iter(range(1 << 64)), iter(""), iter("\u00e9"),
                                 iter(b""), reversed(()), reversed(range(0)))))
NO_HINT = object()


def length_hint_of(vt):
    """What the real iterator's ``__length_hint__`` answers (an int), ``NO_HINT`` for one whose
    type has none (``operator.length_hint`` then answers its default), or None: not modelled."""
    kind = type(vt)
    if kind is ListIteratorVariable:              # the live list's length now, less the index
        return 0 if vt.done else max(0, len(vt.list_vt.items) - vt.index)
    if kind is ListReverseIteratorVariable:
        return vt.index + 1 if 0 <= vt.index < len(vt.list_vt.items) else 0
    if kind is DictIteratorVariable:              # 0 once the dict's size moved (next() raises)
        return len(vt.keys) - vt.index if len(vt.dict_vt.items) == len(vt.keys) else 0
    if kind is SetIteratorVariable:
        return len(vt.items) - vt.index if len(vt.set_vt.values) == len(vt.items) else 0
    if kind is IteratorVariable and vt.python_type() in _COUNTING:
        return len(vt.items) - vt.index
    if kind in (EnumerateVariable, ZipVariable, MapVariable, FilterVariable, ChainVariable, IsliceVariable) or \
            vt.python_type() is types.GeneratorType:
        return NO_HINT
    return None


# -- the rest of an iterator, handed over at a graph break ------------------------------------------

def rest_of(vt, tx=None) -> VariableTracker:
    """An iterable whose ``iter()`` continues ``vt`` exactly where it stands (a graph break
    inside a ``for`` loop hands its iterator over this way; the resume function's prologue
    calls ``iter()`` on it): a tuple of its remaining items, exact wherever those items are
    fixed (a range's are ints, specialized like any int input); for a range, a string or bytes,
    the rest of it as a range, string or bytes.  An iterator that
    reads a container live (a list or dict the rest of the frame can still change) or pulls
    from code (map, filter, a generator) is refused."""
    if type(vt) is DictIteratorVariable and hands_over_live(vt):
        return DictWalkVariable(vt)
    if hands_over_live(vt):
        return vt          # the real iterator over the caller's list, made at this index (Templates)
    made_by = vt.made_by if type(vt) is IteratorVariable else None
    if made_by is not None and isinstance(made_by[1], ConstantVariable) \
            and isinstance(made_by[1].value, (range, str, bytes)):
        # a range's (a string's) rest is a range (a string): one constant, not a tuple of
        # 55,000 ints for the resume function's guard to compare one by one
        walked = made_by[1].value if made_by[0] is iter else made_by[1].value[::-1]
        return ConstantVariable(walked[vt.index:])
    items = _rest_items(vt)
    return TupleVariable(items)


def hands_over_live(vt) -> bool:
    """A for loop's iterator over a list, the caller's (one with a source) or one made in the
    frame, forwards or reversed, or ``enumerate`` / ``zip`` of such: it reads the list live, so
    a snapshot of the rest is exact only while nothing changes the list; it is handed over as a
    real iterator over that very list (the caller's, or the one the break rebuilds, which the
    frame's locals hold too), at the same index
    (``iterator_rebuild.list_iterator_at`` and ``reverse_iterator_at``; ``enumerate`` of it at the
    same count), which reads it live too.  A loop over the caller's dict likewise, itself only
    (``walks_callers_dict``)."""
    if type(vt) is EnumerateVariable:
        return type(vt.iterator) is not DictIteratorVariable and hands_over_live(vt.iterator)
    if type(vt) is ZipVariable:          # with the others over fixed items (handed as tuple iterators)
        return any(map(hands_over_live, vt.iterators)) and all(
            (hands_over_live(it) and type(it) is not DictIteratorVariable) or type(it) is IteratorVariable
            for it in vt.iterators)
    if type(vt) is DictIteratorVariable:
        return walks_callers_dict(vt)
    return type(vt) in (ListIteratorVariable, ListReverseIteratorVariable) and not past_the_end(vt) \
        and (getattr(vt.list_vt, "source", None) is not None or type(vt.list_vt) is ListVariable)


def past_the_end(vt) -> bool:
    """A list iterator (forwards or reversed, not exhausted) standing past its list's end: the
    list shrank under it (``next(it); l.clear()``).  CPython's iterator keeps its index and sees
    items put back later from there; one made again cannot (``__setstate__`` clamps the index
    to the list's length)."""
    if type(vt) is ListIteratorVariable:
        return not vt.done and vt.index > len(vt.list_vt.items)
    if type(vt) is ListReverseIteratorVariable:
        return vt.index > len(vt.list_vt.items) - 1
    return False


class DictWalkVariable(VariableTracker):
    """What a graph break hands over for a loop's own iterator over the caller's dict: rebuilt
    as an ``iterator_rebuild.DictWalk`` of that dict at the iterator's place (templates.Templates)."""

    def __init__(self, iterator: DictIteratorVariable):
        super().__init__()
        self.iterator = iterator


# Keys whose equality is their value's: the resume function's guard compares the keys left
# (a tuple of them, up to MAX_WALKED_KEYS: each resume's guard copies it).
_PLAIN_KEYS = (str, int, bool, bytes, type(None))
MAX_WALKED_KEYS = 1024


def walks_callers_dict(vt) -> bool:
    """A loop's own iterator over a plain dict the caller can see, whose keys the trace has not
    changed (a change would make eager's next step raise): handed over as an
    ``iterator_rebuild.DictWalk`` of that very dict, whose iterator reads it live."""
    current = list(vt.dict_vt.items)
    return getattr(vt.dict_vt, "source", None) is not None and getattr(vt.dict_vt, "dict_type", None) is dict \
        and (list(reversed(current)) if vt.reverse else current) == vt.keys \
        and len(vt.keys) <= MAX_WALKED_KEYS and all(type(k) in _PLAIN_KEYS for k in vt.keys)


def zip_of(strict: bool, *iterators):
    """``zip(*iterators, strict=strict)`` (a template's call: positional arguments only)."""
    return zip(*iterators, strict=strict)


def _rest_items(vt) -> list:
    kind = type(vt)
    if kind is IteratorVariable:                         # tuple, range, str, module list: fixed
        return list(vt.items[vt.index:])
    if kind is ListIteratorVariable:
        _fixed(vt.list_vt, "list")
        return [] if vt.done else list(vt.list_vt.items[vt.index:])
    if kind is ListReverseIteratorVariable:
        _fixed(vt.list_vt, "list")
        return list(reversed(vt.list_vt.items[:vt.index + 1])) if vt.index >= 0 else []
    if kind is DictIteratorVariable:                     # keys fixed; values read now, the dict is fixed
        _fixed(vt.dict_vt, "dict")
        if list(reversed(vt.dict_vt.items) if vt.reverse else vt.dict_vt.items) != vt.keys:
            raise Unsupported("a dict changed size or keys while iterated (RuntimeError)")
        rest = vt.keys[vt.index:]
        if vt.kind == "keys":
            return [key_variable(k) for k in rest]
        if vt.kind == "values":
            return [vt.dict_vt.items[k] for k in rest]
        return [TupleVariable([key_variable(k), vt.dict_vt.items[k]]) for k in rest]
    if kind is EnumerateVariable:
        return [TupleVariable([ConstantVariable(vt.count + j), item]) for j, item in enumerate(_rest_items(vt.iterator))]
    if kind is ZipVariable:
        columns = [_rest_items(it) for it in vt.iterators]
        if vt.strict and len({len(c) for c in columns}) > 1:
            raise Unsupported("a graph break inside a loop over zip(..., strict=True) of unequal lengths")
        return [TupleVariable(list(row)) for row in zip(*columns)]
    if getattr(vt, "frame", None) is not None and vt.python_type() is types.GeneratorType:
        raise Unsupported(f"a graph break inside a for loop over generator {vt.name} (a paused generator "
                          "cannot be handed over to the resume function)")
    raise Unsupported(f"a graph break inside a for loop over {vt} (only iterators over fixed items, "
                      "lists and dicts made in the frame, enumerate, zip and reversed of those are handed over)")


def _fixed(container_vt, what):
    """A list (dict) iterator reads its container live: the snapshot is exact only if nothing
    after the break can reach it.  One made in the frame is checked by ``stop_values`` (it
    must not be handed over otherwise); one the caller can see may change under us."""
    if getattr(container_vt, "source", None) is not None:
        raise Unsupported(f"a graph break inside a for loop over a {what} the caller can change "
                          f"({container_vt.source}): its iterator reads it live")


def live_containers(vt) -> list:
    """The lists and dicts an iterator reads live (``rest_of`` snapshots them)."""
    kind = type(vt)
    if kind in (ListIteratorVariable, ListReverseIteratorVariable):
        return [vt.list_vt]
    if kind is DictIteratorVariable:
        return [vt.dict_vt]
    if kind is EnumerateVariable:
        return live_containers(vt.iterator)
    if kind is ZipVariable:
        return [c for it in vt.iterators for c in live_containers(it)]
    return []

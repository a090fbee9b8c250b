"""An iterator handed over at a graph break as itself: its own type, at its own position.

At a break, every value the eager instruction or the resume function receives is made real.
An iterator on the stack (a ``for`` loop's, or an argument of the call that breaks, as in
``self.assertEqual(iter(e), e)``) used to be handed over as a tuple of its remaining items, which
gives the right items but another object: ``iter(e) is e`` and ``type(e) is enumerate`` became
false, and two places holding one iterator held two.  Here the iterator is made again at call
time, once per call (``templates.Templates``' "fresh" sharing), from the same recipe the program
used, over the very container it walks (the caller's, or the one the break rebuilds, so a list
iterator still reads its list live), and moved to where the trace left it:

    iter(list)  / reversed(list)   iter(lst) at index i (``__setstate__``), exhausted if it was
    iter(d), iter(d.items()), ...  the same view's iterator, advanced past the keys already seen
                                   (a loop's own over the caller's dict: a DictWalk, which also
                                   tells the resume function the dict and the keys left)
    iter(t) of a tuple, str, range, bytes, frozenset; reversed(t): made so, advanced
    enumerate(it, n), zip(*its, strict=...), map(f, *its), filter(f, it): over the inner
    iterators made the same way

An iterator with no such recipe (a generator, a set's, one over an object's ``__iter__``) keeps
the old hand-over (``iterators.rest_of``), which only a ``for`` loop's own iterator may take.
"""

from __future__ import annotations

from typing import Optional

from .containers import IteratorVariable
from .base import VariableTracker
from .iterators import (ChainVariable, DictIteratorVariable, EnumerateVariable, FilterVariable, ListIteratorVariable,
                        ListReverseIteratorVariable, MapVariable, PullVariable, ZipVariable, past_the_end)


class Fixed:
    """A constant argument of a recipe (the templates hold it as it is)."""

    def __init__(self, value):
        self.value = value


def recipe(vt) -> Optional[tuple]:
    """``(factory, [argument trackers or Fixed])``: calling ``factory`` on the rebuilt arguments
    makes ``vt``'s iterator again, at its position; None when there is no exact recipe."""
    kind = type(vt)
    if past_the_end(vt):
        return None
    if kind is ListIteratorVariable:
        return list_iterator_at, [vt.list_vt, Fixed(vt.index), Fixed(vt.done)]
    if kind is ListReverseIteratorVariable:
        return reverse_iterator_at, [vt.list_vt, Fixed(vt.index)]
    if kind is DictIteratorVariable:
        current = list(vt.dict_vt.items)
        if (list(reversed(current)) if vt.reverse else current) != vt.keys:
            return None                      # changed while iterated: eager's next() raises
        return dict_iterator_at, [vt.dict_vt, Fixed(vt.kind), Fixed(vt.reverse), Fixed(vt.index)]
    if kind is IteratorVariable and vt.made_by is not None:
        factory, walked = vt.made_by
        return advanced, [Fixed(factory), walked, Fixed(vt.index)]
    if kind is EnumerateVariable and recipe(vt.iterator) is not None:
        return enumerate, [vt.iterator, Fixed(vt.count)]
    if kind is ZipVariable and all(recipe(it) is not None for it in vt.iterators):
        return zip_of, [Fixed(vt.strict), *vt.iterators]
    if kind is MapVariable and all(recipe(it) is not None for it in vt.iterators):
        return map, [vt.fn, *vt.iterators]
    if kind is FilterVariable and recipe(vt.iterator) is not None:
        return filter, [vt.fn, vt.iterator]
    if kind is PullVariable and vt.rebuild is not None:     # itertools.count / repeat where they are
        factory, args = vt.rebuild(vt.state)
        return factory, [a if isinstance(a, VariableTracker) else Fixed(a) for a in args]
    if kind is ChainVariable and recipe(vt.sources) is not None and (vt.current is None or recipe(vt.current) is not None):
        return chain_at, [vt.current if vt.current is not None else Fixed(None), vt.sources]
    return None


def template(templates, vt) -> tuple:
    """The ("call", factory, [argument templates]) template of an iterator that has a recipe."""
    factory, args = recipe(vt)
    return ("call", factory, [("const", a.value) if isinstance(a, Fixed) else templates.of(a) for a in args])


# -- the factories, run at call time ------------------------------------------------------------

def list_iterator_at(items: list, index: int, done: bool):
    it = iter(items)
    if done:                  # an exhausted list iterator drops its list: later appends are not seen
        for _ in it:
            pass
    else:
        it.__setstate__(index)
    return it


def reverse_iterator_at(items: list, index: int):
    it = reversed(items)
    it.__setstate__(index)
    return it


def dict_iterator_at(d: dict, kind: str, reverse: bool, seen: int):
    view = d if kind == "keys" else getattr(d, kind)()
    return advanced(reversed if reverse else iter, view, seen)


class DictWalk:
    """A for loop's iterator over the caller's dict, handed to the resume function at a graph
    break (``dict_walk_at``).  The loop goes on with ``iterator``, the real one, made before the
    breaking instruction runs, so that what the instruction does to the dict reaches it as it
    reaches eager's (a change of size raises at the next step).  The resume function's trace
    needs more than an iterator tells (its ``__reduce__`` is a snapshot of the items left): the
    dict it walks, to read the values live, and which keys it has left, which ``remaining_keys``
    answers from a keys iterator made at the same place over the same dict."""

    __slots__ = ("iterator", "dict", "kind", "reverse", "_keys")

    def __init__(self, d: dict, kind: str, reverse: bool, seen: int):
        self.iterator = dict_iterator_at(d, kind, reverse, seen)
        self._keys = dict_iterator_at(d, "keys", reverse, seen)
        self.dict, self.kind, self.reverse = d, kind, reverse

    def __iter__(self):
        return self.iterator

    def remaining_keys(self) -> tuple:
        """The keys the loop has left (RuntimeError where its next step would raise one)."""
        return tuple(self._keys.__reduce__()[1][0])


def dict_walk_at(d: dict, kind: str, reverse: bool, seen: int) -> DictWalk:
    return DictWalk(d, kind, reverse, seen)


def advanced(factory, walked, seen: int):
    it = factory(walked)
    for _ in range(seen):
        next(it)
    return it


def chain_at(current, sources):
    """A chain at its position: the rest of the iterable it is in (None: between two), then
    ``iter()`` of each source left, taken only when the one before is exhausted."""
    import itertools

    return itertools.chain(() if current is None else current, itertools.chain.from_iterable(sources))


def zip_of(strict: bool, *iterators):
    return zip(*iterators, strict=strict)

"""The standard library's C callables, modelled: one table of calls, one of class methods.

``STDLIB_CALLS`` joins ``builtins.BUILTIN_HANDLERS`` (so ``wrap`` turns these values into a
``BuiltinVariable``): ``itertools`` constructors become the lazy iterators of iterators.py,
``functools.reduce`` runs its loop symbolically (the function is inlined, never called on real
values), ``collections.deque/defaultdict/OrderedDict`` made in the frame become containers,
and ``collections.namedtuple`` with constant arguments is evaluated (it only makes a class);
``sys.exc_info()`` answers the exception the trace's handlers handle.

``CLASS_METHODS`` answers ``dict.fromkeys``, ``OrderedDict.fromkeys``,
``defaultdict.fromkeys`` and ``itertools.chain.from_iterable``.

A namedtuple class made inside the frame is made once, at trace time: every later call
returns instances of that one class, where eager makes a new class per call (same name,
fields and behaviour; only ``type(a) is type(b)`` across two calls tells them apart).
"""

from __future__ import annotations

import collections
import functools
import itertools
import sys

from ...exc import Unsupported
from .base import VariableTracker, maybe_constant
from .constant import ConstantVariable
from .collection_types import DefaultDictVariable, DequeVariable, default_factory
from .containers import IteratorVariable, TupleVariable
from .dicts import DictVariable
from .exception_values import TracebackVariable
from .iterators import (AccumulateVariable, ChainVariable, IndexedCombinatoricVariable, IsliceVariable,
                        PullVariable, ZipLongestVariable, make_iterator, made_by)

_NO = object()


def _int(vt, what, default=None):
    value = default if vt is None else maybe_constant(vt, _NO)
    if value is not None and type(value) is not int:
        raise Unsupported(f"{what} must be a constant int, got {vt}")
    return value


def _pool(tx, iterable):
    """CPython's combinatoric iterators copy each input into a tuple when they are created."""
    return make_iterator(tx, iterable).unpack(tx)


# -- itertools -----------------------------------------------------------------------------------
def _chain(tx, *iterables):
    return ChainVariable(made_by(IteratorVariable(list(iterables)), iter, TupleVariable(list(iterables))))


def _chain_from_iterable(tx, iterable):
    return ChainVariable(make_iterator(tx, iterable))


def _zip_longest(tx, *iterables, fillvalue=None):
    return ZipLongestVariable([make_iterator(tx, it) for it in iterables],
                              fillvalue if fillvalue is not None else ConstantVariable(None))


def _islice(tx, iterable, *args):
    bounds = [maybe_constant(a, _NO) for a in args]
    if not 1 <= len(bounds) <= 3 or any(b is not None and type(b) is not int for b in bounds):
        raise Unsupported(f"islice() with arguments {args}")
    start, stop, step = (0, bounds[0], 1) if len(bounds) == 1 else (*bounds, 1)[:3]
    start, step = 0 if start is None else start, 1 if step is None else step
    if start < 0 or step <= 0 or (stop is not None and stop < 0):
        raise Unsupported("islice() with negative bounds (ValueError)")
    return IsliceVariable(make_iterator(tx, iterable), start, stop, step)


def _product(tx, *iterables, repeat=None):
    times = _int(repeat, "product(repeat=)", 1)
    pools = [_pool(tx, it) for it in iterables] * times
    indices = itertools.product(*[range(len(p)) for p in pools])
    return IndexedCombinatoricVariable(itertools.product, pools, indices)


def _choose(kind, needs_r: bool):
    def handler(tx, iterable, r=None):
        pool = _pool(tx, iterable)
        size = _int(r, f"{kind.__name__}(r=)", None if not needs_r else _NO)
        if size is _NO:
            raise Unsupported(f"{kind.__name__}() without r (TypeError)")
        args = (range(len(pool)),) if size is None else (range(len(pool)), size)
        return IndexedCombinatoricVariable(kind, [pool], kind(*args))
    return handler


def _accumulate(tx, iterable, func=None, *, initial=None):
    func = None if func is None or maybe_constant(func, _NO) is None else func
    initial = None if initial is None or maybe_constant(initial, _NO) is None else initial
    return AccumulateVariable(make_iterator(tx, iterable), func, initial)


def _repeat(tx, obj, times=None):
    count = _int(times, "repeat(times=)")

    def step(tx, state):
        done = state.setdefault("n", 0)
        if count is not None and done >= max(count, 0):
            return None
        state["n"] = done + 1
        return obj

    def rebuild(state):
        left = [] if count is None else [max(count, 0) - state.get("n", 0)]
        return itertools.repeat, [obj, *left]
    return PullVariable(itertools.repeat, step, rebuild)


def _count(tx, start=None, step=None):
    first, stride = maybe_constant(start, _NO) if start else 0, maybe_constant(step, _NO) if step else 1
    if not all(type(v) in (int, float) for v in (first, stride)):
        raise Unsupported("itertools.count() with non-number arguments")

    def next_value(tx, state):
        value = state.setdefault("v", first)
        state["v"] = value + stride
        return ConstantVariable(value)
    return PullVariable(itertools.count, next_value, lambda state: (itertools.count, [state.get("v", first), stride]))


def _pairwise(tx, iterable):
    it = make_iterator(tx, iterable)

    def step(tx, state):
        if "last" not in state:
            state["last"] = it.next_item(tx)
        last, item = state["last"], (it.next_item(tx) if state["last"] is not None else None)
        if item is None:
            state["last"] = None
            return None
        state["last"] = item
        return TupleVariable([last, item])
    return PullVariable(itertools.pairwise, step)


def _starmap(tx, fn, iterable):
    it = make_iterator(tx, iterable)

    def step(tx, state):
        args = it.next_item(tx)
        return None if args is None else fn.call_function(tx, make_iterator(tx, args).unpack(tx), {})
    return PullVariable(itertools.starmap, step)


def _compress(tx, data, selectors):
    values, flags = make_iterator(tx, data), make_iterator(tx, selectors)

    def step(tx, state):
        while (item := values.next_item(tx)) is not None:
            flag = flags.next_item(tx)
            if flag is None:
                return None
            if flag.truth(tx):
                return item
        return None
    return PullVariable(itertools.compress, step)


def _while(kind):
    """``takewhile`` / ``dropwhile``: the predicate is inlined once per item pulled."""
    def handler(tx, predicate, iterable):
        it = make_iterator(tx, iterable)

        def step(tx, state):
            if state.get("done"):
                return None
            while (item := it.next_item(tx)) is not None:
                if kind is itertools.dropwhile and not state.get("dropping", True):
                    return item               # done dropping: the predicate is not called again
                keep = bool(predicate.call_function(tx, [item], {}).truth(tx))
                if kind is itertools.takewhile:
                    if keep:
                        return item
                    state["done"] = True
                    return None
                if state.get("dropping", True) and keep:
                    continue
                state["dropping"] = False
                return item
            return None
        return PullVariable(kind, step)
    return handler


# -- functools, collections ----------------------------------------------------------------------
def _reduce(tx, fn, iterable, *initial):
    """``functools.reduce``: CPython's loop; ``fn`` is inlined once per item, left to right."""
    it = make_iterator(tx, iterable)
    total = initial[0] if initial else it.next_item(tx)
    if total is None:
        raise Unsupported("reduce() of an empty iterable with no initial value (TypeError)")
    while (item := it.next_item(tx)) is not None:
        total = fn.call_function(tx, [total, item], {})
    return total


def _deque(tx, iterable=None, maxlen=None):
    bound = None if maxlen is None else maybe_constant(maxlen, _NO)
    if bound is not None and (type(bound) is not int or bound < 0):
        raise Unsupported(f"deque(maxlen={maxlen}) (an int >= 0 or None, else ValueError/TypeError)")
    return DequeVariable(make_iterator(tx, iterable).unpack(tx) if iterable is not None else [], bound)


def _exc_info(tx):
    """``sys.exc_info()``: the exception the trace's handlers handle, or three Nones (guarded:
    the caller of the traced frame handles none, ``ExceptionOpcodes.handled_exception``)."""
    from .builtins import _type

    handled = tx.handled_exception()
    if handled is None:
        return TupleVariable([ConstantVariable(None)] * 3)
    return TupleVariable([_type(tx, handled), handled, TracebackVariable()])


def _defaultdict(tx, factory=None, *args, **kwargs):
    result = DefaultDictVariable({}, default_factory(tx, factory))
    if args or kwargs:
        result.method_update(tx, *args, **kwargs)
    return result


def _ordered_dict(tx, *args, **kwargs):
    result = DictVariable({}, collections.OrderedDict)
    if args or kwargs:
        result.method_update(tx, *args, **kwargs)
    return result


def _namedtuple(tx, *args, **kwargs):
    """Evaluated at trace time (it only builds a class); see the module docstring."""
    from .objects import ClassVariable

    values = [maybe_constant(a, _NO) for a in args]
    named = {k: maybe_constant(v, _NO) for k, v in kwargs.items()}
    if _NO in values or _NO in named.values():
        raise Unsupported("collections.namedtuple() with non-constant arguments")
    named.setdefault("module", getattr(tx, "f_globals", {}).get("__name__"))    # as eager's caller frame
    return ClassVariable(collections.namedtuple(*values, **named))


def _fromkeys(kind):
    def handler(tx, iterable, value=None):
        keys = make_iterator(tx, iterable).unpack(tx)
        fill = value if value is not None else ConstantVariable(None)
        if kind is collections.defaultdict:
            result = DefaultDictVariable({}, None)
        else:
            result = DictVariable({}, kind)
        for key in keys:
            result.method_setitem(tx, key, fill)
        return result
    return handler


STDLIB_CALLS = {
    itertools.chain: _chain, itertools.zip_longest: _zip_longest, itertools.islice: _islice,
    itertools.product: _product, itertools.combinations: _choose(itertools.combinations, True),
    itertools.combinations_with_replacement: _choose(itertools.combinations_with_replacement, True),
    itertools.permutations: _choose(itertools.permutations, False), itertools.accumulate: _accumulate,
    itertools.repeat: _repeat, itertools.count: _count, itertools.pairwise: _pairwise,
    itertools.starmap: _starmap, itertools.compress: _compress,
    itertools.takewhile: _while(itertools.takewhile), itertools.dropwhile: _while(itertools.dropwhile),
    functools.reduce: _reduce, collections.deque: _deque, collections.defaultdict: _defaultdict,
    collections.OrderedDict: _ordered_dict, collections.namedtuple: _namedtuple, sys.exc_info: _exc_info,
}

CLASS_METHODS = {
    (dict, "fromkeys"): _fromkeys(dict),
    (collections.OrderedDict, "fromkeys"): _fromkeys(collections.OrderedDict),
    (collections.defaultdict, "fromkeys"): _fromkeys(collections.defaultdict),
    (itertools.chain, "from_iterable"): _chain_from_iterable,
}


class HandlerVariable(VariableTracker):
    """A class method from ``CLASS_METHODS`` (``dict.fromkeys``), read off its class."""

    def __init__(self, owner, name, handler):
        super().__init__()
        self.owner, self.name, self.handler = owner, name, handler

    def python_type(self):
        return type(getattr(self.owner, self.name))

    def as_python_constant(self):
        return getattr(self.owner, self.name)

    def call_function(self, tx, args, kwargs):
        try:
            return self.handler(tx, *args, **kwargs)
        except TypeError as e:
            raise Unsupported(f"{self.owner.__name__}.{self.name} called with unsupported arguments: {e}") from e

    def __repr__(self):
        return f"HandlerVariable({self.owner.__name__}.{self.name})"

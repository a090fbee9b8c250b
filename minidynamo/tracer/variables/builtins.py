"""``BuiltinVariable``: Python builtins, ``operator.*`` and ``math.*``, one handler each.

Pure functions of constants are just evaluated (``math.sqrt(64)``, ``max(2, 3)``); handlers
below cover what needs the symbolic values (``len`` of a list of tensors, ``isinstance`` of
a tensor, ``getattr`` with a default, ``zip`` of two lists, ...).
"""

from __future__ import annotations

import math
import operator

import torch

from ...exc import Unsupported
from .base import AttributeMissing, KnownObjectVariable, VariableTracker, describe, maybe_constant
from .constant import ConstantVariable
from .containers import (DictVariable, IteratorVariable, ListVariable, SliceVariable,
                         TupleVariable)
from .generators import GeneratorExpressionVariable

_NO = object()


def _constants(args, kwargs):
    values = [maybe_constant(a, _NO) for a in args]
    kw = {k: maybe_constant(v, _NO) for k, v in kwargs.items()}
    if any(v is _NO for v in values) or any(v is _NO for v in kw.values()):
        return None
    return values, kw


def _fold(fn, args, kwargs):
    from ..builder import wrap_constant_result

    constants = _constants(args, kwargs)
    if constants is None:
        raise Unsupported(f"{describe(fn)} on non-constant arguments {args}")
    try:
        return wrap_constant_result(fn(*constants[0], **constants[1]))
    except Unsupported:
        raise
    except Exception as e:
        raise Unsupported(f"{describe(fn)} raised {type(e).__name__}: {e}") from e


# -- handlers: (tx, *args, **kwargs) -> VariableTracker ------------------------------------
def _len(tx, obj):
    return obj.call_method(tx, "__len__", [], {})


def _isinstance(tx, obj, classes):
    kinds = classes.as_python_constant()
    return ConstantVariable(isinstance_of(obj, kinds))


def isinstance_of(obj, kinds) -> bool:
    from .tensor import TensorVariable

    if isinstance(obj, TensorVariable):
        probe = torch.nn.Parameter if obj.python_type() is torch.nn.Parameter else torch.Tensor
        kinds_t = kinds if isinstance(kinds, tuple) else (kinds,)
        return any(isinstance(k, type) and issubclass(probe, k) for k in kinds_t)
    return isinstance_type(obj.python_type(), kinds)


def isinstance_type(kind, kinds) -> bool:
    kinds_t = kinds if isinstance(kinds, tuple) else (kinds,)
    return any(issubclass(kind, k) for k in kinds_t if isinstance(k, type))


def _getattr(tx, obj, name, default=None):
    name = name.as_python_constant()
    if default is None:
        return obj.var_getattr(tx, name)
    try:
        return obj.var_getattr(tx, name)
    except AttributeMissing:
        obj.guard_absent(tx, name)
        return default


def _hasattr(tx, obj, name):
    name = name.as_python_constant()
    try:
        obj.var_getattr(tx, name)
        return ConstantVariable(True)
    except AttributeMissing:
        obj.guard_absent(tx, name)
        return ConstantVariable(False)


def _iter_items(tx, vt):
    return vt.unpack(tx)


def _consumed_items(tx, vt):
    """The items of an iterable a builtin consumes whole (``tuple(it)``): a generator
    expression runs to its end here, in CPython's order (see generators.py)."""
    if isinstance(vt, GeneratorExpressionVariable):
        return vt.consume(tx)
    return vt.unpack(tx)


def _range(tx, *args):
    return ConstantVariable(range(*(a.as_python_constant() for a in args)))


def _enumerate(tx, iterable, start=None):
    first = start.as_python_constant() if start is not None else 0
    return IteratorVariable([TupleVariable([ConstantVariable(first + i), v])
                             for i, v in enumerate(_iter_items(tx, iterable))])


def _zip(tx, *iterables, strict=None):
    columns = [_iter_items(tx, it) for it in iterables]
    return IteratorVariable([TupleVariable(list(row)) for row in zip(*columns)])


def _reversed(tx, seq):
    return IteratorVariable(list(reversed(_iter_items(tx, seq))))


def _iter(tx, obj):
    if isinstance(obj, IteratorVariable):
        return obj
    return IteratorVariable(_iter_items(tx, obj))


def _next(tx, it, default=None):
    if not isinstance(it, IteratorVariable):
        raise Unsupported(f"next() of {it}")
    item = it.next_item()
    if item is None:
        if default is None:
            raise Unsupported("next() of an exhausted iterator (StopIteration)")
        return default
    return item


def _tuple(tx, iterable=None):
    return TupleVariable(_consumed_items(tx, iterable) if iterable is not None else [])


def _list(tx, iterable=None):
    return ListVariable(_consumed_items(tx, iterable) if iterable is not None else [])


def _dict(tx, arg=None, **kwargs):
    if isinstance(arg, GeneratorExpressionVariable):
        arg = TupleVariable(arg.consume(tx))
    result = DictVariable({})
    result.method_update(tx, arg, **kwargs)
    return result


def _minmax(fn):
    def handler(tx, *args, **kwargs):
        from .tensor import TensorVariable

        items = _consumed_items(tx, args[0]) if len(args) == 1 else list(args)
        if any(isinstance(i, TensorVariable) for i in items):
            raise Unsupported(f"{fn.__name__}() over tensors compares their data")
        return _fold(fn, [TupleVariable(items)], kwargs)
    return handler


def _abs(tx, x):
    from .tensor import TensorVariable

    if isinstance(x, TensorVariable):
        return tx.output.call_op("call_function", torch.abs, [x], {})
    return _fold(abs, [x], {})


def _sum(tx, iterable, start=None):
    from ..operators import apply

    total = start if start is not None else ConstantVariable(0)
    for item in _consumed_items(tx, iterable):
        total = apply(tx, operator.add, [total, item])
    return total


def _all_any(fn):
    """``any``/``all``: items are taken one at a time and the walk stops where CPython's does
    (``any`` at the first true item, ``all`` at the first false one)."""
    stops_on = fn is any

    def handler(tx, iterable):
        if isinstance(iterable, GeneratorExpressionVariable):
            while (item := iterable.next_item(tx)) is not None:
                if bool(item.truth(tx)) is stops_on:
                    return ConstantVariable(stops_on)
            return ConstantVariable(not stops_on)
        return ConstantVariable(fn(i.truth(tx) for i in _iter_items(tx, iterable)))
    return handler


def _sorted(tx, iterable, key=None, reverse=None):
    """``sorted(it, key=..., reverse=...)``: list.sort's rule (constant keys, stable)."""
    result = ListVariable(_consumed_items(tx, iterable))
    key = None if key is None or maybe_constant(key, _NO) is None else key
    result.method_sort(tx, key, reverse)
    return result


def _callable(tx, obj):
    from .functions import BaseFunctionVariable, UserMethodVariable
    from .nn_module import NNModuleVariable

    if isinstance(obj, (BaseFunctionVariable, UserMethodVariable, NNModuleVariable, BuiltinVariable)):
        return ConstantVariable(True)
    value = maybe_constant(obj, _NO)
    if value is not _NO:
        return ConstantVariable(callable(value))
    if hasattr(obj, "value"):
        return ConstantVariable(callable(obj.value))
    raise Unsupported(f"callable() of {obj}")


def _slice(tx, *args):
    parts = list(args) + [ConstantVariable(None)] * (3 - len(args))
    if len(args) == 1:
        parts = [ConstantVariable(None), args[0], ConstantVariable(None)]
    return SliceVariable(*parts)


def _type(tx, obj):
    from .objects import ClassVariable

    return ClassVariable(obj.python_type())


def _scalar_cast(fn):
    def handler(tx, *args, **kwargs):
        from .tensor import TensorVariable

        if any(isinstance(a, TensorVariable) for a in args):
            raise Unsupported(f"{fn.__name__}() of a tensor needs its data")
        return _fold(fn, args, kwargs)
    return handler


def _print(tx, *args, **kwargs):
    raise Unsupported("call to print (a side effect)")


def _super(tx, *args):
    from .objects import SuperVariable

    if args:
        return SuperVariable(args[0].as_python_constant(), args[1])
    return tx.implicit_super()


def _operator(fn):
    def handler(tx, *args):
        from ..operators import apply

        return apply(tx, fn, list(args))
    return handler


def _getitem(tx, obj, index):
    return tx.subscript(obj, index)


def _set(tx, iterable=None):
    from .containers import SetVariable

    result = SetVariable()
    if iterable is not None:
        result.method_update(tx, TupleVariable(_consumed_items(tx, iterable)))
    return result


def _map(tx, fn, *iterables):
    """``map(fn, xs)``: applied now, item by item (fn runs symbolically, so order is kept)."""
    columns = [_iter_items(tx, it) for it in iterables]
    return IteratorVariable([fn.call_function(tx, list(row), {}) for row in zip(*columns)])


def _filter(tx, fn, iterable):
    items = _iter_items(tx, iterable)
    if maybe_constant(fn, _NO) is None:
        return IteratorVariable([i for i in items if i.truth(tx)])
    return IteratorVariable([i for i in items if fn.call_function(tx, [i], {}).truth(tx)])


class GetterVariable(VariableTracker):
    """``operator.itemgetter(k...)`` / ``operator.attrgetter(name...)``: a pure function object."""

    def __init__(self, kind: str, keys: list):
        super().__init__()
        self.kind, self.keys = kind, keys

    def call_function(self, tx, args, kwargs):
        (obj,) = args
        picked = []
        for key in self.keys:
            if self.kind == "item":
                picked.append(tx.subscript(obj, key))
            else:
                value = obj
                for part in key.as_python_constant().split("."):
                    value = value.var_getattr(tx, part)
                picked.append(value)
        return picked[0] if len(picked) == 1 else TupleVariable(picked)


def _setattr(tx, obj, name, value):
    return tx.store_attr(obj, name.as_python_constant(), value)


BUILTIN_HANDLERS = {
    len: _len, isinstance: _isinstance, getattr: _getattr, hasattr: _hasattr, range: _range,
    enumerate: _enumerate, zip: _zip, reversed: _reversed, iter: _iter, next: _next, tuple: _tuple,
    list: _list, dict: _dict, min: _minmax(min), max: _minmax(max), abs: _abs, sum: _sum,
    all: _all_any(all), any: _all_any(any), callable: _callable, slice: _slice, type: _type,
    int: _scalar_cast(int), float: _scalar_cast(float), bool: _scalar_cast(bool), str: _scalar_cast(str),
    round: _scalar_cast(round), divmod: _scalar_cast(divmod), pow: _operator(operator.pow),
    print: _print, super: _super, setattr: _setattr, operator.getitem: _getitem,
    issubclass: _scalar_cast(issubclass), repr: _scalar_cast(repr), hash: _scalar_cast(hash),
    sorted: lambda tx, it, key=None, reverse=None: _sorted(tx, it, key, reverse),
    set: _set, map: _map, filter: _filter,
    operator.itemgetter: lambda tx, *keys: GetterVariable("item", list(keys)),
    operator.attrgetter: lambda tx, *names: GetterVariable("attr", list(names)),
    chr: _scalar_cast(chr), ord: _scalar_cast(ord), format: _scalar_cast(format),
}
# operator.add, operator.mul, ...: the same rules as the bytecode operators.
for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "neg", "pos", "invert",
              "and_", "or_", "xor", "lshift", "rshift", "lt", "le", "gt", "ge", "eq", "ne", "not_", "truth",
              "is_", "is_not", "contains", "iadd", "isub", "imul", "itruediv", "abs", "index"):
    BUILTIN_HANDLERS.setdefault(getattr(operator, _name), _operator(getattr(operator, _name)))
BUILTIN_HANDLERS[operator.abs] = _abs
BUILTIN_HANDLERS[operator.index] = _scalar_cast(operator.index)
# math.*: pure functions of numbers.
for _name in dir(math):
    _fn = getattr(math, _name)
    if callable(_fn):
        BUILTIN_HANDLERS[_fn] = _scalar_cast(_fn)


class BuiltinVariable(KnownObjectVariable):
    def call_function(self, tx, args, kwargs):
        handler = BUILTIN_HANDLERS.get(self.value)
        if handler is None:
            raise Unsupported(f"builtin {describe(self.value)}")
        try:
            return handler(tx, *args, **kwargs)
        except TypeError as e:
            raise Unsupported(f"{describe(self.value)} called with unsupported arguments: {e}") from e

    def var_getattr(self, tx, name):
        if name in ("__name__", "__qualname__"):
            return ConstantVariable(getattr(self.value, name))
        if self.value is dict and name == "fromkeys":
            raise Unsupported("dict.fromkeys")
        raise Unsupported(f"attribute {name!r} of builtin {describe(self.value)}")

    def __repr__(self):
        return f"BuiltinVariable({describe(self.value)})"

"""``BuiltinVariable``: Python builtins, ``operator.*`` and ``math.*``, one handler each.

Pure functions of constants are just evaluated (``math.sqrt(64)``, ``max(2, 3)``); handlers
below cover what needs the symbolic values (``len`` of a list of tensors, ``isinstance`` of
a tensor, ``getattr`` with a default, ``zip`` of two lists, ...).
"""

from __future__ import annotations

import collections
import functools
import math
import operator
import types

import torch

import guards as G
from ... import config
from ...exc import ProgramRaises, Unsupported
from .. import class_answers
from ..library import is_library_value
from .base import (NO_CONSTANT, KnownObjectVariable, OpaqueCallableVariable, VariableTracker, describe,
                   maybe_constant, read_or_absent)
from .constant import ConstantVariable
from .containers import (MAX_ITEMS, BaseListVariable, IteratorVariable, ListVariable, SliceVariable, pull_all,
                         TupleVariable)
from .dicts import DictVariable
from .exception_values import ExceptionVariable
from .generators import GeneratorVariable
from .stdlib import CLASS_METHODS, STDLIB_CALLS, HandlerVariable
from .copies import COPY_CALLS
from .iterators import (EnumerateVariable, FilterVariable, MapVariable, ZipVariable, make_iterator,
                        make_reversed)

def _fold(fn, args, kwargs):
    from ..operators import fold      # operators imports the trackers: imported on first use

    return fold(fn, args, kwargs)


# -- handlers: (tx, *args, **kwargs) -> VariableTracker ------------------------------------
def _len(tx, obj):
    from ..operators import protocol

    return protocol(tx, obj, "__len__", lambda: _len_of(tx, obj))


def _len_of(tx, obj):
    from .objects import UserObjectVariable

    if isinstance(obj, UserObjectVariable):
        from ..operators import special_method

        kind, method = special_method(tx, obj, "__len__")
        if kind != "python":
            raise Unsupported(f"len() of a {type(obj.value).__name__} without a Python __len__")
        result = maybe_constant(method.call_function(tx, [], {}), NO_CONSTANT)
        if type(result) is not int or result < 0:
            raise Unsupported(f"__len__ returned {result!r} (TypeError/ValueError)")
        return ConstantVariable(result)
    return obj.call_method(tx, "__len__", [], {})


_SIZED_TYPES = {list, tuple, dict, set, frozenset, str, bytes, range, collections.OrderedDict, collections.deque,
                collections.defaultdict}


def _length_hint(tx, obj, default=None):
    """``operator.length_hint(obj, default)`` answers ``len(obj)`` when that succeeds: so for the
    builtin containers (exactly those types: a subclass's ``__len__`` may raise the TypeError
    that makes it fall back) and tensors of one dimension or more; for a modelled iterator, its
    ``__length_hint__`` (``iterators.length_hint_of``), or the default where its type has none
    (``enumerate``, generators)."""
    from .containers import IteratorVariable
    from .iterators import NO_HINT, length_hint_of
    from .tensor import TensorVariable

    sized = obj.python_type() in _SIZED_TYPES or (isinstance(obj, TensorVariable) and obj.example.dim() > 0)
    if sized:
        return _len(tx, obj)
    hint = length_hint_of(obj) if isinstance(obj, IteratorVariable) else None
    if hint is None:
        raise Unsupported(f"operator.length_hint of {obj} (not a builtin container, a tensor or a modelled iterator)")
    if hint is not NO_HINT:
        return ConstantVariable(hint)
    if default is None:
        return ConstantVariable(0)
    if type(maybe_constant(default, NO_CONSTANT)) is not int:
        raise Unsupported(f"operator.length_hint default {default} (TypeError unless an int)")
    return default


def _isinstance(tx, obj, classes):
    return ConstantVariable(class_answers.isinstance_answer(tx, _class_asked(obj), classes.as_python_constant()))


def _issubclass(tx, cls, classes):
    return ConstantVariable(class_answers.issubclass_answer(tx, cls.as_python_constant(), classes.as_python_constant()))


def _class_asked(obj) -> type:
    """The class isinstance asks about: the object's exact type (guarded where the object is read
    from the frame); a tensor's is Parameter or Tensor (its exact type is in its tensor guard)."""
    from .tensor import TensorVariable

    if isinstance(obj, TensorVariable):
        return torch.nn.Parameter if obj.python_type() is torch.nn.Parameter else torch.Tensor
    return obj.python_type()


def _getattr(tx, obj, name, default=None):
    name = name.as_python_constant()
    if default is None:
        return obj.var_getattr(tx, name)
    found = read_or_absent(tx, obj, name)
    return default if found is None else found


def _hasattr(tx, obj, name):
    name = name.as_python_constant()
    fresh = _fresh_instance(obj)
    if fresh is not None:       # made in the frame, never assigned to (stores on it are refused)
        return ConstantVariable(hasattr(fresh, name))
    try:
        return ConstantVariable(read_or_absent(tx, obj, name) is not None)
    except Unsupported:
        if _library_module_has(obj, name):   # present, though its value is not modelled
            return ConstantVariable(True)
        raise


def _library_module_has(obj, name) -> bool:
    """``hasattr(torch._C, "_c10d_init")``: a library module's attribute, assumed unpatched."""
    value = getattr(obj, "value", None)
    return (config.assume_libraries_unpatched and isinstance(value, types.ModuleType)
            and is_library_value(value) and hasattr(value, name))


# C types whose instances made in the frame all have the same attributes: hasattr() is
# answered by a real instance of the type (a partial has func/args/keywords, no __name__).
FRESH_INSTANCE_ATTRIBUTES = {functools.partial: functools.partial(print)}


def _fresh_instance(obj):
    if obj.source is not None:
        return None
    try:
        return FRESH_INSTANCE_ATTRIBUTES.get(obj.python_type())
    except Unsupported:
        return None


def _iterator(tx, vt):
    """``iter(vt)`` for a builtin that pulls items one at a time (a generator is its own iterator)."""
    return make_iterator(tx, vt)


def _consumed_items(tx, vt, sized=False):
    """The items of an iterable a builtin consumes whole (``tuple(it)``), pulled one by one:
    a generator or a ``map`` runs to its end here, in CPython's order.  ``sized``: the builtin
    asks the iterable its length first, to size its result (``list``, ``tuple``, ``sorted``)."""
    if isinstance(vt, BaseListVariable):
        return list(vt.items)
    iterator = make_iterator(tx, vt)
    if sized:
        _size_asked(tx, vt)
    from .objects import UserObjectVariable

    if isinstance(iterator, UserObjectVariable):      # an iterator of the program's: its __next__
        return pull_all(tx, iterator)
    return iterator.unpack(tx)


def _size_asked(tx, vt) -> None:
    """CPython's ``PyObject_LengthHint(vt)`` after ``iter(vt)``: an object of the program's is
    asked its ``__len__``, else its ``__length_hint__`` (inlined; the answer only sizes a
    buffer, but the call is the program's code).  An answer CPython rejects: refused."""
    from .objects import UserObjectVariable

    if not isinstance(vt, UserObjectVariable):
        return
    from ..program_code import python_slot

    kind = type(vt.value)
    name = "__len__" if python_slot(kind, "__len__") is not None else \
        "__length_hint__" if python_slot(kind, "__length_hint__") is not None else None
    if name is None:
        return
    answer = maybe_constant(vt.call_method(tx, name, [], {}), None)
    if answer is not NotImplemented and not (type(answer) is int and answer >= 0):
        raise Unsupported(f"{name} of {describe(vt)} answered {answer!r} (CPython raises)")


def _pulled_items(tx, vt):
    """The items of an iterable a builtin walks while it works (``sum``, ``min``, ``max``),
    each pulled only when CPython pulls it: a generator's body then runs between the builtin's
    own steps (a key function, an ``__add__``, the sum of the items so far), as in CPython.
    (Pulling all first would let a later item's in-place op change an earlier one's sum.)"""
    if isinstance(vt, BaseListVariable):
        yield from list(vt.items)
        return
    iterator, count = make_iterator(tx, vt), 0
    while (item := iterator.next_item(tx)) is not None:
        count += 1
        if count > MAX_ITEMS:
            raise Unsupported(f"an iterator gave more than {MAX_ITEMS} items (endless?)")
        yield item


def _range(tx, *args):
    return ConstantVariable(range(*(a.as_python_constant() for a in args)))


def _enumerate(tx, iterable, start=None):
    first = start.as_python_constant() if start is not None else 0
    if type(first) is not int:
        raise Unsupported(f"enumerate() start {first!r}")
    return EnumerateVariable(make_iterator(tx, iterable), first)


def _zip(tx, *iterables, strict=None):
    strict_value = maybe_constant(strict, NO_CONSTANT) if strict is not None else False
    if strict_value is NO_CONSTANT:
        raise Unsupported("zip(strict=...) not a constant")
    return ZipVariable([make_iterator(tx, it) for it in iterables], bool(strict_value))


def _reversed(tx, seq):
    return make_reversed(tx, seq)


def _iter(tx, obj, *sentinel):
    if sentinel:
        raise Unsupported("iter(callable, sentinel)")
    return make_iterator(tx, obj)


def _next(tx, it, default=None):
    from ..program_code import python_slot
    from .objects import UserObjectVariable

    if isinstance(it, UserObjectVariable) and python_slot(type(it.value), "__next__") is not None:
        return _program_next(tx, it, default)
    if not isinstance(it, IteratorVariable):
        raise Unsupported(f"next() of {it}")
    item = it.next_item(tx)
    if item is None:
        if default is None:
            from .exception_values import stop_iteration

            raise stop_iteration(it)
        return default
    return item


def _program_next(tx, it, default):
    """``next(it[, default])`` of an iterator of the program's: its ``__next__`` inlined; its
    StopIteration propagates as raised, or gives ``default``."""
    if default is None:
        return it.call_method(tx, "__next__", [], {})
    try:
        return it.call_method(tx, "__next__", [], {})
    except ProgramRaises as error:
        if isinstance(error.exception, StopIteration):
            return default
        raise


def _tuple(tx, iterable=None):
    if (type(iterable) is TupleVariable and iterable.python_type() is tuple) or \
            (isinstance(iterable, ConstantVariable) and type(iterable.value) is tuple):
        return iterable                    # CPython: tuple(t) is t for an exact tuple
    return TupleVariable(_consumed_items(tx, iterable, sized=True) if iterable is not None else [])


def _tuple_new(tx, cls, iterable=None):
    """``tuple.__new__(cls, iterable)``: what a namedtuple's generated ``__new__`` ends in (and a
    subclass's own ``__new__`` through it): a tuple, or an instance of the namedtuple class ``cls``
    whose items are the iterable's (one per field: the model names each item)."""
    from .containers import NamedTupleVariable, check_named_tuple_model, is_named_tuple_type

    kind = cls.as_python_constant() if isinstance(cls, KnownObjectVariable) else None
    if kind is tuple:
        return _tuple(tx, iterable)
    if not (isinstance(kind, type) and kind.__flags__ & (1 << 9) and is_named_tuple_type(kind)):
        raise Unsupported(f"tuple.__new__ of {cls} (not tuple nor a namedtuple class)")
    check_named_tuple_model(tx, kind, own_new_allowed=True)
    items = _consumed_items(tx, iterable, sized=True) if iterable is not None else []
    if len(items) != len(kind._fields):
        raise Unsupported(f"tuple.__new__({kind.__name__}, ...) with {len(items)} items for {len(kind._fields)} fields")
    return NamedTupleVariable(items, kind, class_vt=cls)


def _list(tx, iterable=None):
    return ListVariable(_consumed_items(tx, iterable, sized=True) if iterable is not None else [])


def _dict(tx, arg=None, /, **kwargs):
    if isinstance(arg, GeneratorVariable):
        arg = TupleVariable(arg.consume(tx))
    result = DictVariable({})
    result.method_update(tx, arg, **kwargs)
    return result


def _minmax(fn):
    """``min``/``max``: CPython's loop, symbolically.  ``key`` is a tracker called (inlined)
    once per item in order -- never the real function on real values -- and each candidate is
    compared with the best so far by ``<`` (min) / ``>`` (max), like builtin_min_max."""
    compare = operator.lt if fn is min else operator.gt

    def handler(tx, *args, key=None, default=NO_CONSTANT):
        from ..operators import apply
        from .tensor import TensorVariable

        if not args:
            raise Unsupported(f"{fn.__name__}() with no arguments (TypeError)")
        if len(args) > 1 and default is not NO_CONSTANT:
            raise Unsupported(f"{fn.__name__}() with several arguments and a default (TypeError)")
        items = _pulled_items(tx, args[0]) if len(args) == 1 else list(args)
        if key is not None and maybe_constant(key, NO_CONSTANT) is None:
            key = None
        best = best_key = None
        for item in items:
            value = key.call_function(tx, [item], {}) if key is not None else item
            if isinstance(value, TensorVariable):
                raise Unsupported(f"{fn.__name__}() over tensors compares their data")
            if best is None or apply(tx, compare, [value, best_key]).truth(tx):
                best, best_key = item, value
        if best is None:
            if default is NO_CONSTANT:
                raise Unsupported(f"{fn.__name__}() of an empty iterable (ValueError)")
            return default
        return best
    return handler


def _abs(tx, x):
    from .tensor import TensorVariable

    if isinstance(x, TensorVariable):
        return tx.output.call_op("call_function", torch.abs, [x], {})
    return _fold(abs, [x], {})


def _sum(tx, iterable, start=None):
    from ..operators import apply

    if start is not None and isinstance(maybe_constant(start, None), (str, bytes, bytearray)):
        raise Unsupported("sum() of strings or bytes (TypeError: sum() can't sum them)")
    total = start if start is not None else ConstantVariable(0)
    for item in _pulled_items(tx, iterable):
        total = apply(tx, operator.add, [total, item])
    return total


def _all_any(fn):
    """``any``/``all``: items are taken one at a time and the walk stops where CPython's does
    (``any`` at the first true item, ``all`` at the first false one)."""
    stops_on = fn is any

    def handler(tx, iterable):
        iterator = _iterator(tx, iterable)
        while (item := iterator.next_item(tx)) is not None:
            if bool(item.truth(tx)) is stops_on:
                return ConstantVariable(stops_on)
        return ConstantVariable(not stops_on)
    return handler


def _sorted(tx, iterable, key=None, reverse=None):
    """``sorted(it, key=..., reverse=...)``: list.sort's rule (constant keys, stable)."""
    result = ListVariable(_consumed_items(tx, iterable, sized=True))
    key = None if key is None or maybe_constant(key, NO_CONSTANT) is None else key
    result.method_sort(tx, key, reverse)
    return result


def _callable(tx, obj):
    from .functions import BaseFunctionVariable, UserMethodVariable
    from .nn_module import NNModuleVariable

    # functions, methods and builtins have built-in types; a module class always finds nn.Module's
    if isinstance(obj, (BaseFunctionVariable, UserMethodVariable, NNModuleVariable, BuiltinVariable)):
        return ConstantVariable(True)
    value = maybe_constant(obj, NO_CONSTANT)
    if value is NO_CONSTANT:
        value = getattr(obj, "value", NO_CONSTANT)
    # callable(x) is "type(x) finds __call__" (tp_call): the type is enough (a tensor: False)
    cls = type(value) if value is not NO_CONSTANT else obj.python_type()
    return ConstantVariable(class_answers.callable_answer(tx, cls))


def _slice(tx, *args):
    parts = list(args) + [ConstantVariable(None)] * (3 - len(args))
    if len(args) == 1:
        parts = [ConstantVariable(None), args[0], ConstantVariable(None)]
    return SliceVariable(*parts)


def _type(tx, *args, **kwargs):
    from ..builder import class_of

    if len(args) != 1 or kwargs:  # type(name, bases, namespace): runs at a break (__module__ from
        raise Unsupported("type(name, bases, namespace) makes a class")   # the globals, as eager's)
    return class_of(tx, args[0])  # read as obj.__class__ when obj is real: its attributes are guarded


def _scalar_cast(fn):
    def handler(tx, *args, **kwargs):
        from .tensor import TensorVariable

        if fn in (int, float, complex, operator.index) and len(args) == 1 and not kwargs \
                and isinstance(args[0], TensorVariable) and args[0].known is not None \
                and args[0].known.numel() == 1:
            try:                                            # a tensor made from constants only
                return ConstantVariable(fn(args[0].known))
            except Exception as error:                      # (eager raises it: run eagerly)
                raise Unsupported(f"{fn.__name__}() of a tensor raises: {error}") from error
        if any(isinstance(a, TensorVariable) for a in args):
            raise Unsupported(f"{fn.__name__}() of a tensor needs its data")
        if fn in (str, repr) and len(args) == 1 and not kwargs and isinstance(args[0], ExceptionVariable):
            text = args[0].text(fn)
            if text is not None:
                return ConstantVariable(text)
        return _fold(fn, args, kwargs)
    return handler


def _pow(tx, base, exp, mod=None):
    """``pow(a, b)`` is ``a ** b`` (tensors too); ``pow(a, b, mod)`` is folded on numbers."""
    if mod is None:
        return _POWER(tx, base, exp)
    return _MODULAR_POWER(tx, base, exp, mod)


def _bool(tx, *args, **kwargs):
    """``bool(x)``: the truth of x (a user ``__bool__``/``__len__`` is inlined)."""
    if kwargs or len(args) > 1:
        raise Unsupported("bool() with several arguments (TypeError)")
    return ConstantVariable(args[0].truth(tx) if args else False)


def _print(tx, *args, **kwargs):
    raise Unsupported("call to print (a side effect)")


def _super(tx, *args):
    """``super()``, or ``super(klass, obj)`` checked as CPython checks it: at most two arguments,
    a class first, and ``obj`` an instance or a subclass of it (each a TypeError otherwise)."""
    from .objects import SuperVariable

    if not args:
        return tx.implicit_super()
    if len(args) > 2:
        raise _super_error(*([object] * len(args)))
    klass = maybe_constant(args[0], NO_CONSTANT)
    if klass is not NO_CONSTANT and not isinstance(klass, type):
        raise _super_error(klass, object)
    if len(args) == 1 or klass is NO_CONSTANT:
        raise Unsupported("super() with one argument, or a class not known at trace time")
    obj = maybe_constant(args[1], NO_CONSTANT)
    kind = obj if isinstance(obj, type) else args[1].python_type()
    if not (isinstance(kind, type) and issubclass(kind, klass)):
        raise _super_error(klass, 1)
    return SuperVariable(klass, args[1])


def _super_error(*args) -> ProgramRaises:
    """The TypeError CPython's ``super(*args)`` raises (made by calling it with stand-ins)."""
    try:
        super(*args)
    except TypeError as error:
        return ProgramRaises(f"super() raised TypeError: {error}", error)
    raise AssertionError(f"super{args} did not raise")


def _operator(fn):
    def handler(tx, *args):
        from ..operators import apply

        return apply(tx, fn, list(args))
    return handler


def _getitem(tx, obj, index):
    return tx.subscript(obj, index)


def _set(tx, iterable=None):
    from .sets import SetVariable

    result = SetVariable()
    if iterable is None:
        return result
    if isinstance(iterable, SetVariable) or isinstance(maybe_constant(iterable, None), (set, frozenset)):
        result.method_update(tx, iterable)      # CPython merges another set's table (set(s) is s.copy())
    else:
        result.method_update(tx, TupleVariable(_consumed_items(tx, iterable)))
    return result


def _map(tx, fn, *iterables):
    """``map(fn, xs)``: lazy; fn runs symbolically (inlined) when an item is pulled."""
    if not iterables:
        raise Unsupported("map() must have at least two arguments (TypeError)")
    return MapVariable(fn, [make_iterator(tx, it) for it in iterables])


def _filter(tx, fn, iterable):
    return FilterVariable(fn, make_iterator(tx, iterable))


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
    tx.store_attr(obj, name.as_python_constant(), value)
    return ConstantVariable(None)


def _delattr(tx, obj, name):
    tx.delete_attr(obj, name.as_python_constant())
    return ConstantVariable(None)


_POWER, _MODULAR_POWER = _operator(operator.pow), _scalar_cast(pow)

BUILTIN_HANDLERS = {
    len: _len, isinstance: _isinstance, getattr: _getattr, hasattr: _hasattr, range: _range,
    enumerate: _enumerate, zip: _zip, reversed: _reversed, iter: _iter, next: _next, tuple: _tuple,
    list: _list, dict: _dict, min: _minmax(min), max: _minmax(max), abs: _abs, sum: _sum,
    all: _all_any(all), any: _all_any(any), callable: _callable, slice: _slice, type: _type,
    int: _scalar_cast(int), float: _scalar_cast(float), bool: _bool, str: _scalar_cast(str),
    complex: _scalar_cast(complex),
    round: _scalar_cast(round), divmod: _scalar_cast(divmod), pow: _pow,
    print: _print, super: _super, setattr: _setattr, delattr: _delattr, operator.getitem: _getitem,
    issubclass: _issubclass, repr: _scalar_cast(repr), hash: _scalar_cast(hash),
    sorted: lambda tx, it, key=None, reverse=None: _sorted(tx, it, key, reverse),
    set: _set, map: _map, filter: _filter,
    operator.itemgetter: lambda tx, *keys: GetterVariable("item", list(keys)),
    operator.attrgetter: lambda tx, *names: GetterVariable("attr", list(names)),
    chr: _scalar_cast(chr), ord: _scalar_cast(ord), format: _scalar_cast(format),
    operator.length_hint: _length_hint, tuple.__new__: _tuple_new,
}
# operator.add, operator.mul, ...: the same rules as the bytecode operators.
for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "neg", "pos", "invert",
              "and_", "or_", "xor", "lshift", "rshift", "lt", "le", "gt", "ge", "eq", "ne", "not_", "truth",
              "is_", "is_not", "contains", "iadd", "isub", "imul", "itruediv", "abs", "index"):
    BUILTIN_HANDLERS.setdefault(getattr(operator, _name), _operator(getattr(operator, _name)))
BUILTIN_HANDLERS[operator.abs] = _abs
BUILTIN_HANDLERS[operator.index] = _scalar_cast(operator.index)
# itertools, functools.reduce, collections: their own table (stdlib.py).
BUILTIN_HANDLERS.update(STDLIB_CALLS)
# copy.copy / copy.deepcopy of modelled values, id() of objects read from the frame (copies.py).
BUILTIN_HANDLERS.update(COPY_CALLS)
# math.*: pure functions of numbers.
for _name in dir(math):
    _fn = getattr(math, _name)
    if callable(_fn):
        BUILTIN_HANDLERS[_fn] = _scalar_cast(_fn)


def _hashable_pair(value, name) -> bool:
    try:
        hash(value)
        return True
    except TypeError:
        return False


_HEAPTYPE = 1 << 9     # Py_TPFLAGS_HEAPTYPE: a class made by a class statement (its attributes can change)


class BuiltinVariable(KnownObjectVariable):
    def call_function(self, tx, args, kwargs):
        handler = BUILTIN_HANDLERS.get(self.value)
        if handler is None:
            raise Unsupported(f"builtin {describe(self.value)}")
        try:
            return handler(tx, *args, **kwargs)
        except TypeError as e:
            raise Unsupported(f"{describe(self.value)} called with unsupported arguments: {e}") from e

    def subscript(self, tx, index):
        """``list[int]``, ``dict[str, Tensor]``: a built-in class's ``__class_getitem__``, a
        ``types.GenericAlias`` made now from constants (``cast(list[int], x)`` reads it)."""
        from .objects import ClassVariable

        if isinstance(self.value, type):
            return ClassVariable(self.value).subscript(tx, index)
        return self.call_method(tx, "__getitem__", [index], {})

    def var_getattr(self, tx, name):
        if name in ("__name__", "__qualname__"):
            return ConstantVariable(getattr(self.value, name))
        if _hashable_pair(self.value, name) and (self.value, name) in CLASS_METHODS:
            return HandlerVariable(self.value, name, CLASS_METHODS[(self.value, name)])
        found = getattr(self.value, name, None) if isinstance(self.value, type) else None
        if found is not None and _hashable_pair(found, name) and found in BUILTIN_HANDLERS:
            return BuiltinVariable(found)          # ``tuple.__new__``: a builtin type's attributes are fixed
        if isinstance(found, (types.BuiltinMethodType, types.MethodDescriptorType, types.ClassMethodDescriptorType)) \
                and self.source is not None and not self.value.__flags__ & _HEAPTYPE:
            # ``int.from_bytes``: a C type's attribute cannot be replaced, so nothing more to guard;
            # calling it is where the frame breaks (the break re-reads it from its type)
            return OpaqueCallableVariable(found, G.AttrSource(self.source, name),
                                          f"call to unknown C method {describe(found)}")
        raise Unsupported(f"attribute {name!r} of builtin {describe(self.value)}")

    def __repr__(self):
        return f"BuiltinVariable({describe(self.value)})"

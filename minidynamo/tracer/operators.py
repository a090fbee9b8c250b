"""Python operators over VariableTrackers: one rule for the whole family.

    tensor involved      -> a graph node calling the ``operator`` function (x + 1, x > 0, -x)
    all constants        -> evaluated now (the trace specialises on them)
    sequences            -> concatenation / repetition / comparison of their items
"""

from __future__ import annotations

import collections
import operator
import types

import guards as G

from ..exc import ProgramRaises, Unsupported
from .library import refuse_user_dunders
from .variables import lazy_numbers, numpy_values
from .variables.base import NO_CONSTANT, AttributeMissing, VariableTracker, describe, maybe_constant
from .variables.constant import ConstantMethodVariable, ConstantVariable
from .variables.containers import BaseListVariable, ListVariable, TupleVariable, sequence_kind
from .variables.dicts import DictVariable, DictViewVariable, _real_operand
from .variables.iterators import make_iterator
from .variables.exception_values import ExceptionVariable
from .variables.sets import SetVariable
from .variables.nn_module import NNModuleVariable
from .variables.objects import UserObjectVariable
from .variables.tensor import TensorVariable, pin_special_methods


IN_PLACE_TO_PLAIN = {operator.iadd: operator.add, operator.isub: operator.sub, operator.imul: operator.mul,
                     operator.itruediv: operator.truediv, operator.ifloordiv: operator.floordiv,
                     operator.imod: operator.mod, operator.ipow: operator.pow, operator.imatmul: operator.matmul,
                     operator.iand: operator.and_, operator.ior: operator.or_, operator.ixor: operator.xor,
                     operator.ilshift: operator.lshift, operator.irshift: operator.rshift}


def apply(tx, fn, args: list) -> VariableTracker:
    """``fn(*args)`` for an ``operator`` function (binary, unary or comparison)."""
    counted = lazy_numbers.combine(fn, args)     # self.calls + 1: still unread
    if counted is None:
        counted = lazy_numbers.compare(tx, fn, args)   # self.calls > 10: the outcome guarded
    if counted is not None:
        return counted
    if fn in (operator.is_, operator.is_not):
        same = is_same(tx, *args)
        return ConstantVariable(same if fn is operator.is_ else not same)
    if fn is operator.contains:
        return contains(tx, *args)
    if fn is operator.not_:
        return ConstantVariable(not args[0].truth(tx))
    if fn is operator.truth:
        return ConstantVariable(args[0].truth(tx))
    if any(isinstance(a, UserObjectVariable) for a in args):
        return _user_op(tx, fn, args)        # the user's own dunders, as CPython would call them
    if any(isinstance(a, TensorVariable) for a in args):
        if fn in IN_PLACE_TO_PLAIN and not isinstance(args[0], TensorVariable):
            # ``n += t`` with n a number: numbers have no __iadd__, so Python computes n + t
            if not isinstance(args[0], ConstantVariable):
                raise Unsupported(f"{fn.__name__} of a {args[0].python_type().__name__} and a tensor")
            fn = IN_PLACE_TO_PLAIN[fn]
        from .variables.torch_function_modes import operator_call

        _pin_tensor_dunders(tx, fn, args)
        return operator_call(tx, fn, args, lambda: tx.output.call_op("call_function", fn, args, {}))
    if len(args) == 2:
        result = _container_op(tx, fn, *args)     # before folding: lists, dicts, sets are mutable
        if result is not None:
            return result
        if IN_PLACE_TO_PLAIN.get(fn, fn) in (operator.add, operator.mul) and any(map(_holds_mutable, args)):
            # ``[a] * 3``, ``[a] + [a]``: the same item objects, not folded copies (folding would
            # turn the inner lists into new, unrelated ones: ``a.append(1)`` then missed them)
            return _sequence_op(tx, fn, args)
    if any(isinstance(a, NNModuleVariable) and _module_overrides(a, fn) for a in args):
        raise Unsupported(f"{fn.__name__} on a module whose class defines it in Python")
    if all(maybe_constant(a, NO_CONSTANT) is not NO_CONSTANT for a in args):
        return fold(fn, args, what=fn.__name__)
    return _sequence_op(tx, fn, args)


def _pin_tensor_dunders(tx, fn, args) -> None:
    """An operator recorded on tensors runs what their classes find for its special methods."""
    plain = IN_PLACE_TO_PLAIN.get(fn, fn).__name__.strip("_")
    pin_special_methods(tx, (f"__{plain}__", f"__r{plain}__", f"__i{plain}__"), args)


def fold(fn, args, kwargs=None, what=None) -> VariableTracker:
    """``fn(*args, **kwargs)`` computed now, every argument a constant: constant folding, for
    operators, builtins and torch's constant functions alike.  A constant whose class runs
    Python code for the call is refused; an exception becomes ``Unsupported``."""
    what = what or describe(fn)
    values = [maybe_constant(a, NO_CONSTANT) for a in args]
    kw = {k: maybe_constant(v, NO_CONSTANT) for k, v in (kwargs or {}).items()}
    if any(v is NO_CONSTANT for v in [*values, *kw.values()]):
        raise Unsupported(f"{what} on non-constant arguments {args}")
    refuse_user_dunders([*values, *kw.values()], what)      # str(enum with a __str__)
    try:
        with numpy_values.errstate_free(what):          # (numpy scalars anywhere among the values)
            result = fn(*values, **kw)
    except Unsupported:
        raise
    except Exception as e:
        raise ProgramRaises(f"{what} on constants raised {type(e).__name__}: {e}", e) from e
    from .builder import wrap_constant_result

    for arg, value in zip(args, values):
        if result is value and is_exact_tuple(arg):
            return arg                 # CPython gave the tuple back (t * 1, t + (), t[:]): itself
    return wrap_constant_result(result)


def _sequence_op(tx, fn, args):
    plain = IN_PLACE_TO_PLAIN.get(fn, fn)
    if len(args) == 2:
        a, b = args
        if isinstance(a, BaseListVariable) and isinstance(b, BaseListVariable) and plain is operator.add:
            if _sequence_kind(a) is not _sequence_kind(b):
                raise Unsupported(f"{a.python_type().__name__} + {b.python_type().__name__} (TypeError)")
            for kept, other in ((a, b), (b, a)):      # CPython's tuple concat: an empty side gives
                if is_exact_tuple(kept) and is_exact_tuple(other, empty=True):    # the other back
                    return kept
            return _sequence_result(a)(a.items + b.items)
        if plain is operator.mul and isinstance(a, BaseListVariable) and isinstance(maybe_constant(b), int):
            if is_exact_tuple(a) and b.as_python_constant() == 1:
                return a                               # CPython's t * 1 is t
            return _sequence_result(a)(a.items * b.as_python_constant())
        if plain is operator.mul and isinstance(b, BaseListVariable) and isinstance(maybe_constant(a), int):
            return _sequence_op(tx, fn, [b, a])
        if plain in COMPARISONS and isinstance(a, BaseListVariable) and isinstance(b, BaseListVariable):
            return _compare_sequences(tx, plain, a, b)
        if plain in (operator.eq, operator.ne) and isinstance(a, DictVariable) and isinstance(b, DictVariable):
            same = _dicts_equal(tx, a, b)
            return ConstantVariable(same if plain is operator.eq else not same)
        if plain in (operator.eq, operator.ne) and _method_parts(a) and _method_parts(b):
            (self_a, key_a), (self_b, key_b) = _method_parts(a), _method_parts(b)
            same = key_a == key_b and is_same(tx, self_a, self_b)
            return ConstantVariable(same if plain is operator.eq else not same)
        if plain in (operator.eq, operator.ne) and _bound_c_methods(a, b):
            same = a.value == b.value
            return ConstantVariable(same if plain is operator.eq else not same)
        if plain in (operator.eq, operator.ne) and not _comparable(a, b):
            if not (_equal_by_identity(a) and _equal_by_identity(b)):
                raise Unsupported(f"== of {describe(a)} and {describe(b)}, whose classes compare "
                                  "otherwise than by identity")
            same = is_same(tx, a, b)
            return ConstantVariable(same if plain is operator.eq else not same)
    raise Unsupported(f"operator {fn.__name__} on {', '.join(type(a).__name__ for a in args)}")


def _equal_by_identity(vt) -> bool:
    """Does ``vt``'s class compare with object's ``==`` (identity)?  A weak reference compares
    its referents, a slice its bounds: not answered by identity."""
    try:
        kind = vt.python_type()
    except Unsupported:
        return False
    return G.class_lookup(kind, "__eq__") is object.__dict__["__eq__"] and \
        G.class_lookup(kind, "__ne__") is object.__dict__["__ne__"]


def _real_subtype(tb, ta) -> bool:
    """Whether the right operand's class derives from the left's, as CPython decides who goes
    first (CPython's PyType_IsSubtype: the MRO; not ``issubclass``, which an ABC's ``register`` and
    ``__subclasscheck__`` answer)."""
    return ta in tb.__mro__


def _method_parts(vt):
    """A bound method's (self, what it calls), or None: two bound methods are equal when they
    bind the same function to the very same object (``l.append == l.append``), though each
    attribute read makes a new method object."""
    from .variables.base import BoundMethodVariable
    from .variables.functions import UserMethodVariable
    from .variables.tensor import TensorMethodVariable

    if isinstance(vt, BoundMethodVariable):
        return vt.obj, (vt.obj.python_type(), vt.name)
    if isinstance(vt, TensorMethodVariable):
        return vt.tensor, ("tensor", vt.name)
    if isinstance(vt, UserMethodVariable):
        fn = _identity(vt.fn)
        return vt.self_vt, (fn if fn is not NO_CONSTANT else id(vt.fn))
    if isinstance(vt, ConstantMethodVariable):            # "a".upper
        return vt.owner, (type(vt.owner.value), vt.name)
    return None


def _bound_c_methods(a, b) -> bool:
    """Both are C methods bound to an object, read at trace time (``C.__init_subclass__``,
    ``x.__add__``): their ``==`` is C's (same ``__self__`` and same function), not identity."""
    from .variables.base import OpaqueCallableVariable

    return all(isinstance(vt, OpaqueCallableVariable) and type(vt.value) in _C_METHOD_TYPES
               and not isinstance(getattr(vt.value, "__self__", None), types.ModuleType) for vt in (a, b))


_C_METHOD_TYPES = (types.BuiltinMethodType, types.MethodWrapperType)


def _holds_mutable(vt) -> bool:
    """A list or tuple with a list, dict or set among its items (at any depth), whose identity
    a folded constant copy would lose."""
    return isinstance(vt, BaseListVariable) and any(
        isinstance(item, (ListVariable, DictVariable, SetVariable)) or _holds_mutable(item) for item in vt.items)


def is_exact_tuple(vt, empty=None) -> bool:
    """A tuple (not a subclass: CPython hands back only exact tuples as themselves); with
    ``empty=True``, an empty one."""
    return (type(vt) is TupleVariable and vt.python_type() is tuple
            and (empty is None or (len(vt.items) == 0) == empty))


def _sequence_kind(vt):
    """What ``+`` and comparisons match on: tuple (any tuple subclass), list, or deque."""
    kind = vt.python_type()
    return tuple if issubclass(kind, tuple) else kind


def _sequence_result(vt):
    """The tracker class of ``a + b`` / ``a * n``: a new list, a deque keeps its type, tuples
    (namedtuples included) give a plain tuple."""
    if isinstance(vt, ListVariable):
        if getattr(vt, "maxlen", None) is not None:      # a bounded deque keeps its bound
            return lambda items: type(vt)(items, vt.maxlen)
        return ListVariable if sequence_kind(vt) is list else type(vt)    # (a caller's list too)
    return TupleVariable


def _comparable(a, b) -> bool:
    return isinstance(a, (ConstantVariable, BaseListVariable)) and isinstance(b, (ConstantVariable, BaseListVariable))


def is_same(tx, a: VariableTracker, b: VariableTracker) -> bool:
    """``a is b`` for values known at trace time."""
    if isinstance(a, TensorVariable) and isinstance(b, TensorVariable):
        a, b = a.the_object(), b.the_object()
        if a.example is b.example:
            return True
        if a.is_input and b.is_input:
            return _guarded_identity(tx, a.source, b.source)
        return False
    if isinstance(a, TensorVariable) or isinstance(b, TensorVariable):
        return False
    if getattr(a, "by_structure", False) or getattr(b, "by_structure", False):
        return _module_identity(tx, a, b)
    va, vb = _identity(a), _identity(b)
    if is_exact_tuple(a, empty=True) and is_exact_tuple(b, empty=True):
        return True                  # CPython has one empty tuple
    if va is NO_CONSTANT or vb is NO_CONSTANT:
        if a is b:
            return True
        if type(a) is not type(b):
            return False
        if getattr(a, "source", None) is None or getattr(b, "source", None) is None:
            return False            # one was made by the trace: no caller's object is it
        return _guarded_identity(tx, a.source, b.source)
    return va is vb


def _guarded_identity(tx, source_a, source_b) -> bool:
    """``a is b`` for two values read from the frame: the answer now, guarded for later calls."""
    real_values = tx.output.wrapped_values       # every value wrap() read, tensors included
    if source_a not in real_values or source_b not in real_values:
        raise Unsupported(f"identity test between {source_a.name()} and {source_b.name()} (values not recorded)")
    same = real_values[source_a] is real_values[source_b]
    tx.output.add_guard(G.alias_match(source_a, ((source_b, same),)))
    return same


def _module_identity(tx, a, b) -> bool:
    """``a is b`` where a module guarded by structure (module_sharing.py) is involved: another
    call may bring another object there.  Between two values read from the frame: guarded;
    otherwise the shared module keeps its identity guard after all."""
    if a is b:
        return True
    if getattr(a, "source", None) is not None and getattr(b, "source", None) is not None:
        return _guarded_identity(tx, a.source, b.source)
    from .module_sharing import sharing_of

    for vt in (a, b):
        if getattr(vt, "by_structure", False):
            sharing_of(tx.output).pin(vt.source, "the trace compared its identity")
    return _identity(a) is _identity(b)


def _identity(vt):
    if hasattr(vt, "value"):
        return vt.value
    if type(vt) is ExceptionVariable:      # the trace's own object: every tracker of it is it
        return vt.exception                # (``except E as e`` and ``e.__context__`` make new ones)
    return NO_CONSTANT


def identical_or_equal(tx, a, b) -> bool:
    """What ``list.index`` / ``in`` compare (PyObject_RichCompareBool): identity first, then
    ``a == b`` (a user ``__eq__`` is inlined)."""
    if isinstance(a, (UserObjectVariable, BaseListVariable, DictVariable)) or \
            isinstance(b, (UserObjectVariable, BaseListVariable, DictVariable)):
        if a is b or (_identity(a) is not NO_CONSTANT and _identity(a) is _identity(b)):
            return True
        return apply(tx, operator.eq, [a, b]).truth(tx)
    if isinstance(a, TensorVariable) or isinstance(b, TensorVariable):
        if isinstance(a, TensorVariable) and isinstance(b, TensorVariable) and a.example is b.example:
            return True
        if isinstance(a, TensorVariable) and isinstance(b, TensorVariable):
            raise Unsupported("== between tensors inside a container test (data dependent)")
        other = maybe_constant(b if isinstance(a, TensorVariable) else a, NO_CONSTANT)
        if other is None or isinstance(other, (str, bytes)):
            return False                  # Tensor.__eq__ answers False itself: nothing to compare
        raise Unsupported("== between a tensor and a number inside a container test (its truth reads the data)")
    ca, cb = maybe_constant(a, NO_CONSTANT), maybe_constant(b, NO_CONSTANT)
    if ca is not NO_CONSTANT and cb is not NO_CONSTANT:
        if ca is cb:                      # identity first: ``nan in [nan]`` is True
            return True
        refuse_user_dunders([ca, cb], "==")
        return ca == cb
    if _bound_c_methods(a, b) or (_method_parts(a) and _method_parts(b)):   # equal, each read a new object
        return is_same(tx, a, b) or apply(tx, operator.eq, [a, b]).truth(tx)
    return is_same(tx, a, b)


# The protocol operations, as CPython runs them on a real value: asked for the TypeError it
# raises where the value's type lacks the method (never the AttributeError a lookup of the
# method by name would give), worded as CPython words it for that type.
PROTOCOLS = {
    "__len__": len,
    "__contains__": lambda container, item: item in container,
    "__getitem__": operator.getitem,
    "__setitem__": operator.setitem,
    "__delitem__": operator.delitem,
}


def protocol(tx, obj, dunder: str, operation, operands=()):
    """``operation()`` (``len(obj)``, ``x in obj``, ``obj[i]``, ``obj[i] = v``, ``del obj[i]``),
    which looks up ``dunder`` on ``obj``; where ``obj`` has none, CPython's TypeError for the
    program's ``try`` to catch (the absence guarded)."""
    try:
        return operation()
    except AttributeMissing as missing:
        if missing.owner is not obj or missing.name != dunder:
            raise
        error = _cpython_error(obj, dunder, operands)
        if error is None:
            raise Unsupported(f"{missing.reason}: CPython's error for it unknown") from None
        missing.guard(tx)
        raise ProgramRaises(f"{error} (TypeError)", error) from None


def _cpython_error(obj, dunder, operands):
    """The TypeError CPython raises for ``dunder``'s operation on ``obj``: asked of the value
    itself where it is a constant (immutable: nothing to change), else of a bare instance of
    its type (``object.__new__``: no program code runs); None where neither can tell."""
    value = maybe_constant(obj, NO_CONSTANT)
    if value is NO_CONSTANT:
        try:
            value = object.__new__(obj.python_type())
        except Exception:     # noqa: BLE001  (a type object.__new__ cannot make)
            return None
    arguments = [maybe_constant(o, 0 if k == 0 else None) for k, o in enumerate(operands)]
    try:
        PROTOCOLS[dunder](value, *arguments)
    except TypeError as error:
        return TypeError(*error.args)
    except Exception:         # noqa: BLE001
        return None
    return None


def contains(tx, container, item) -> VariableTracker:
    """``item in container`` (CONTAINS_OP, operator.contains): always a bool, as in CPython."""
    return protocol(tx, container, "__contains__", lambda: _contains(tx, container, item), [item])


def _contains(tx, container, item) -> VariableTracker:
    if isinstance(container, TensorVariable):
        raise Unsupported("`in` on a tensor (data dependent)")
    if isinstance(container, UserObjectVariable):
        kind, method = special_method(tx, container, "__contains__")
        if kind == "python":
            return ConstantVariable(method.call_function(tx, [item], {}).truth(tx))
        if kind == "absent" and special_method(tx, container, "__iter__")[0] == "python":
            # CPython walks iter(container) up to the first item that is or equals item
            walk = make_iterator(tx, container)
            while (candidate := walk.next_item(tx)) is not None:
                if identical_or_equal(tx, candidate, item):
                    return ConstantVariable(True)
            return ConstantVariable(False)
        raise Unsupported(f"`in` on a {container.python_type().__name__} without a Python __contains__")
    return ConstantVariable(container.call_method(tx, "__contains__", [item], {}).truth(tx))


# -- mutable containers: in-place operators, dict | dict, views, comparisons -----------------
COMPARISONS = (operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge)
SET_OPS = (operator.and_, operator.or_, operator.sub, operator.xor)


def _container_op(tx, fn, a, b):
    """Operators whose meaning depends on a container being mutable (``xs += ys`` changes xs
    itself: every name for it, and the caller's list, see the change), and dict views.
    None: not one of these (constant folding and the sequence rules apply)."""
    if sequence_kind(a) is list and fn is operator.iadd:
        return a.method_iadd(tx, b)
    if sequence_kind(a) is list and fn is operator.imul:
        return a.method_imul(tx, b)
    if isinstance(a, DictVariable) and fn is operator.ior:
        return a.method_ior(tx, b)
    if isinstance(a, SetVariable) and fn in (operator.ior, operator.iand, operator.isub, operator.ixor):
        result = a.inplace(tx, fn, b)
        if result is not None:
            return result
        fn = IN_PLACE_TO_PLAIN[fn]
    plain = IN_PLACE_TO_PLAIN.get(fn, fn)
    if isinstance(a, DictVariable) and isinstance(b, DictVariable) and plain is operator.or_:
        return a.method_or(tx, b)
    if isinstance(a, DictViewVariable) or isinstance(b, DictViewVariable):
        return _view_op(tx, plain, a, b)
    return None


def _view_op(tx, fn, a, b):
    """A dict view in an operator: values views compare by identity only; keys/items views
    are set-like and computed on real views with the same contents (CPython's own result)."""
    values_view = [v for v in (a, b) if isinstance(v, DictViewVariable) and v.kind == "values"]
    if values_view and fn in (operator.eq, operator.ne):
        return ConstantVariable((a is b) == (fn is operator.eq))
    if values_view:
        raise Unsupported(f"{fn.__name__} on a dict values view (TypeError)")
    if fn not in COMPARISONS + SET_OPS:
        raise Unsupported(f"{fn.__name__} on a dict view")
    if any(isinstance(v, TensorVariable) for v in (a, b)):
        raise Unsupported("a dict view compared with a tensor")
    try:
        value = fn(_real_operand(tx, a), _real_operand(tx, b))
    except Unsupported:
        raise
    except Exception as e:
        raise ProgramRaises(f"{fn.__name__} on a dict view raised {type(e).__name__}: {e}", e) from e
    from .builder import wrap_constant_result

    return wrap_constant_result(value)


def _compare_sequences(tx, fn, a, b):
    """list/tuple comparison item by item (items need not be constants), as CPython does."""
    if _sequence_kind(a) is not _sequence_kind(b):
        if fn in (operator.eq, operator.ne):
            return ConstantVariable(fn is operator.ne)
        raise Unsupported(f"{fn.__name__} between a {a.python_type().__name__} and a {b.python_type().__name__} (TypeError)")
    xs, ys = list(a.items), list(b.items)
    if fn in (operator.eq, operator.ne) and len(xs) != len(ys):
        return ConstantVariable(fn is operator.ne)
    for x, y in zip(xs, ys):
        if not identical_or_equal(tx, x, y):
            if fn in (operator.eq, operator.ne):
                return ConstantVariable(fn is operator.ne)
            return apply(tx, fn, [x, y])
    return ConstantVariable(fn(len(xs), len(ys)))


def _dicts_equal(tx, a, b) -> bool:
    if len(a.items) != len(b.items):
        return False
    for key, value in list(a.items.items()):
        if key not in b.items or not identical_or_equal(tx, value, b.items[key]):
            return False
    if issubclass(a.python_type(), collections.OrderedDict) and issubclass(b.python_type(), collections.OrderedDict):
        return list(a.items) == list(b.items)       # two OrderedDicts: equal in order too
    return True


# -- user objects: their Python dunders, in CPython's order ----------------------------------
def _module_overrides(vt, fn) -> bool:
    names = [f"__{BINARY_DUNDERS[IN_PLACE_TO_PLAIN.get(fn, fn)]}__"] if IN_PLACE_TO_PLAIN.get(fn, fn) in BINARY_DUNDERS \
        else list(REFLECTED_COMPARISON.get(fn, ())) + ([UNARY_DUNDERS[fn]] if fn in UNARY_DUNDERS else [])
    klass = type(vt.value)
    for name in names + [n.replace("__", "__r", 1) for n in names] + [n.replace("__", "__i", 1) for n in names]:
        for base in klass.__mro__:
            if name in base.__dict__:
                if isinstance(base.__dict__[name], types.FunctionType):
                    return True
                break
    return False

BINARY_DUNDERS = {
    operator.add: "add", operator.sub: "sub", operator.mul: "mul", operator.truediv: "truediv",
    operator.floordiv: "floordiv", operator.mod: "mod", operator.pow: "pow", operator.matmul: "matmul",
    operator.and_: "and", operator.or_: "or", operator.xor: "xor", operator.lshift: "lshift",
    operator.rshift: "rshift",
}
REFLECTED_COMPARISON = {operator.eq: ("__eq__", "__eq__"), operator.ne: ("__ne__", "__ne__"),
                        operator.lt: ("__lt__", "__gt__"), operator.le: ("__le__", "__ge__"),
                        operator.gt: ("__gt__", "__lt__"), operator.ge: ("__ge__", "__le__")}
UNARY_DUNDERS = {operator.neg: "__neg__", operator.pos: "__pos__", operator.invert: "__invert__",
                 operator.abs: "__abs__"}
_NOT_IMPLEMENTED = object()


def special_method(tx, vt, name):
    """How ``type(obj).name`` resolves for a user object (on the class: an instance attribute of
    that name is not what CPython's implicit lookups see): ("python", bound method tracker),
    ("object", None) for object's own default, ("absent", None), or ("c", None) for any other
    C implementation (which we cannot run symbolically)."""
    from .variables.objects import lookup_class_attribute

    klass = type(vt.value)
    for base in klass.__mro__:
        if name in base.__dict__:
            attr = base.__dict__[name]
            if isinstance(attr, types.FunctionType):      # guarded by identity, read from the class,
                from .class_answers import guard_class     # and the class's lookup of the name (a
                                                           # library's function a user's subclass finds)
                guard_class(tx, klass, lookups=(name,))
                class_source = G.AttrSource(vt.source, "__class__") if vt.source is not None else None
                return "python", lookup_class_attribute(tx, klass, name, vt, None, class_source=class_source)
            if base is object:                            # a later class-level definition recompiles
                if vt.source is not None:
                    tx.output.add_guard(G.id_match(G.AttrSource(G.AttrSource(vt.source, "__class__"), name), attr))
                return "object", None
            return "c", None
    if vt.source is not None:
        tx.output.add_guard(G.absent_match(vt.source, vt.value, name))
    return "absent", None


def user_truth(tx, vt) -> bool:
    """``bool(obj)``: a Python ``__bool__``, else a Python ``__len__``, else True."""
    for name in ("__bool__", "__len__"):
        kind, method = special_method(tx, vt, name)
        if kind == "python":
            result = maybe_constant(method.call_function(tx, [], {}), NO_CONSTANT)
            if name == "__bool__" and type(result) is bool:
                return result
            if name == "__len__" and type(result) is int and result >= 0:
                return result != 0
            raise Unsupported(f"{name} of a {type(vt.value).__name__} returned {result!r}")
        if kind == "c":
            raise Unsupported(f"truth value of a {type(vt.value).__name__} object ({name} in C)")
    return True


def _is_not_implemented(vt) -> bool:
    return isinstance(vt, ConstantVariable) and vt.value is NotImplemented


def _same_object(a, b) -> bool:
    if a is b:
        return True
    va, vb = _identity(a), _identity(b)
    return va is not NO_CONSTANT and va is vb


def _other_side(tx, x, name, y):
    """``x.name(y)`` where x is not a user object: what a builtin type does with a user
    object on the other side.  Only cases known to be NotImplemented are answered."""
    if isinstance(x, TensorVariable):
        raise Unsupported(f"a tensor and a user object in {name}")
    value = getattr(x, "value", None) if isinstance(x, ConstantVariable) else None
    if value is not None and isinstance(getattr(type(value), name, None), types.FunctionType):
        raise Unsupported(f"{type(value).__name__}.{name} is Python code on a constant")
    if name in ("__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__"):
        return _NOT_IMPLEMENTED
    sequence = isinstance(x, BaseListVariable) or isinstance(value, (str, bytes))
    if sequence and name.strip("_").lstrip("ri") in ("mul", "mod"):      # repetition (__index__), formatting
        raise Unsupported(f"{name} of a {x.python_type().__name__} with a user object")
    if isinstance(x, (ConstantVariable, BaseListVariable, DictVariable, SetVariable)):
        return _NOT_IMPLEMENTED
    raise Unsupported(f"{name} of {x} with a user object")


def _call_side(tx, x, name, y):
    """``type(x).name(x, y)``: a tracker, or _NOT_IMPLEMENTED."""
    if not isinstance(x, UserObjectVariable):
        return _other_side(tx, x, name, y)
    kind, method = special_method(tx, x, name)
    if kind == "python":
        result = method.call_function(tx, [y], {})
        return _NOT_IMPLEMENTED if _is_not_implemented(result) else result
    if kind == "absent":
        return _NOT_IMPLEMENTED
    if kind == "object":
        if name == "__eq__":
            return ConstantVariable(True) if _same_object(x, y) else _NOT_IMPLEMENTED
        if name == "__ne__":                       # object.__ne__ inverts type(x).__eq__
            eq = _call_side(tx, x, "__eq__", y)
            return eq if eq is _NOT_IMPLEMENTED else ConstantVariable(not eq.truth(tx))
        return _NOT_IMPLEMENTED
    raise Unsupported(f"{type(x.value).__name__}.{name} is implemented in C")


def _user_op(tx, fn, args):
    """An operator with a user object among its operands: the user's Python dunders are
    inlined in CPython's dispatch order; anything else is refused, never defaulted."""
    if len(args) == 1:
        (a,) = args
        name = UNARY_DUNDERS.get(fn)
        kind, method = special_method(tx, a, name) if name else ("c", None)
        if kind != "python":
            raise Unsupported(f"{fn.__name__} of a {type(a.value).__name__} object")
        return method.call_function(tx, [], {})
    a, b = args
    ta, tb = a.python_type(), b.python_type()
    if fn in REFLECTED_COMPARISON:
        name, reflected = REFLECTED_COMPARISON[fn]
        order = [(a, name, b), (b, reflected, a)]
        if tb is not ta and _real_subtype(tb, ta):
            order.reverse()
        for x, method_name, y in order:
            result = _call_side(tx, x, method_name, y)
            if result is not _NOT_IMPLEMENTED:
                return result
        if fn in (operator.eq, operator.ne):
            return ConstantVariable(_same_object(a, b) == (fn is operator.eq))
        raise Unsupported(f"{fn.__name__} not supported between {ta.__name__} and {tb.__name__} (TypeError)")
    if fn in IN_PLACE_TO_PLAIN:
        plain = IN_PLACE_TO_PLAIN[fn]
        if isinstance(a, UserObjectVariable):
            result = _call_side(tx, a, f"__i{BINARY_DUNDERS[plain]}__", b)
            if result is not _NOT_IMPLEMENTED:
                return result
        elif not isinstance(a, (ConstantVariable, TupleVariable)):
            raise Unsupported(f"{fn.__name__} of a {ta.__name__} with a user object")
        fn = plain
    if fn not in BINARY_DUNDERS:
        raise Unsupported(f"{fn.__name__} with a user object")
    base = BINARY_DUNDERS[fn]
    order = [(a, f"__{base}__", b)]
    if tb is not ta:
        order.append((b, f"__r{base}__", a))
        if _real_subtype(tb, ta) and isinstance(b, UserObjectVariable) and \
                special_method(tx, b, f"__r{base}__")[0] == "python":
            order.reverse()
    for x, method_name, y in order:
        result = _call_side(tx, x, method_name, y)
        if result is not _NOT_IMPLEMENTED:
            return result
    raise Unsupported(f"unsupported operand types for {fn.__name__}: {ta.__name__} and {tb.__name__} (TypeError)")

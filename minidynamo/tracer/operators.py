"""Python operators over VariableTrackers: one rule for the whole family.

    tensor involved      -> a graph node calling the ``operator`` function (x + 1, x > 0, -x)
    all constants        -> evaluated now (the trace specialises on them)
    sequences            -> concatenation / repetition / comparison of their items
"""

from __future__ import annotations

import operator

from ..exc import Unsupported
from .variables.base import VariableTracker, maybe_constant
from .variables.constant import ConstantVariable
from .variables.containers import BaseListVariable, ListVariable, TupleVariable
from .variables.tensor import TensorVariable

_NO_CONSTANT = object()

IN_PLACE_TO_PLAIN = {operator.iadd: operator.add, operator.isub: operator.sub, operator.imul: operator.mul,
                     operator.itruediv: operator.truediv, operator.ifloordiv: operator.floordiv,
                     operator.imod: operator.mod, operator.ipow: operator.pow, operator.imatmul: operator.matmul,
                     operator.iand: operator.and_, operator.ior: operator.or_, operator.ixor: operator.xor,
                     operator.ilshift: operator.lshift, operator.irshift: operator.rshift}


def apply(tx, fn, args: list) -> VariableTracker:
    """``fn(*args)`` for an ``operator`` function (binary, unary or comparison)."""
    if fn in (operator.is_, operator.is_not):
        same = is_same(tx, *args)
        return ConstantVariable(same if fn is operator.is_ else not same)
    if fn is operator.contains:
        return contains(tx, *args)
    if fn is operator.not_:
        return ConstantVariable(not args[0].truth(tx))
    if fn is operator.truth:
        return ConstantVariable(args[0].truth(tx))
    if any(isinstance(a, TensorVariable) for a in args):
        if fn in IN_PLACE_TO_PLAIN and not isinstance(args[0], TensorVariable):
            # ``n += t`` with n a number: numbers have no __iadd__, so Python computes n + t
            if not isinstance(args[0], ConstantVariable):
                raise Unsupported(f"{fn.__name__} of a {args[0].python_type().__name__} and a tensor")
            fn = IN_PLACE_TO_PLAIN[fn]
        return tx.output.call_op("call_function", fn, args, {})
    constants = [maybe_constant(a, _NO_CONSTANT) for a in args]
    if all(c is not _NO_CONSTANT for c in constants):
        try:
            value = fn(*constants)
        except Exception as e:
            raise Unsupported(f"{fn.__name__} on constants raised {type(e).__name__}: {e}") from e
        from .builder import wrap_constant_result

        return wrap_constant_result(value)
    return _sequence_op(tx, fn, args)


def _sequence_op(tx, fn, args):
    plain = IN_PLACE_TO_PLAIN.get(fn, fn)
    if len(args) == 2:
        a, b = args
        if isinstance(a, ListVariable) and fn is operator.iadd:
            return a.method_iadd(tx, b)
        if isinstance(a, BaseListVariable) and isinstance(b, BaseListVariable) and plain is operator.add:
            if a.python_type() is not b.python_type() and not issubclass(a.python_type(), tuple) == issubclass(b.python_type(), tuple):
                raise Unsupported(f"{a.python_type().__name__} + {b.python_type().__name__} (TypeError)")
            return (ListVariable if isinstance(a, ListVariable) else TupleVariable)(a.items + b.items)
        if plain is operator.mul and isinstance(a, BaseListVariable) and isinstance(maybe_constant(b), int):
            return (ListVariable if isinstance(a, ListVariable) else TupleVariable)(a.items * b.as_python_constant())
        if plain is operator.mul and isinstance(b, BaseListVariable) and isinstance(maybe_constant(a), int):
            return _sequence_op(tx, fn, [b, a])
        if plain in (operator.eq, operator.ne) and not _comparable(a, b):
            same = is_same(tx, a, b)
            return ConstantVariable(same if plain is operator.eq else not same)
    raise Unsupported(f"operator {fn.__name__} on {', '.join(type(a).__name__ for a in args)}")


def _comparable(a, b) -> bool:
    return isinstance(a, (ConstantVariable, BaseListVariable)) and isinstance(b, (ConstantVariable, BaseListVariable))


def is_same(tx, a: VariableTracker, b: VariableTracker) -> bool:
    """``a is b`` for values known at trace time."""
    if isinstance(a, TensorVariable) and isinstance(b, TensorVariable):
        if a.example is b.example:
            return True
        if a.is_input and b.is_input:
            raise Unsupported("identity test between two input tensors")
        return False
    if isinstance(a, TensorVariable) or isinstance(b, TensorVariable):
        return False
    va, vb = _identity(a), _identity(b)
    if va is _NO_CONSTANT or vb is _NO_CONSTANT:
        if a is b:
            return True
        if type(a) is not type(b):
            return False
        raise Unsupported(f"identity test between {a} and {b}")
    return va is vb


def _identity(vt):
    if hasattr(vt, "value"):
        return vt.value
    return _NO_CONSTANT


def identical_or_equal(tx, a, b) -> bool:
    """What ``list.index`` / ``in`` compare: identity first, then ``==`` of constants."""
    if isinstance(a, TensorVariable) or isinstance(b, TensorVariable):
        if isinstance(a, TensorVariable) and isinstance(b, TensorVariable) and a.example is b.example:
            return True
        if isinstance(a, TensorVariable) and isinstance(b, TensorVariable):
            raise Unsupported("== between tensors inside a container test (data dependent)")
        return False
    ca, cb = maybe_constant(a, _NO_CONSTANT), maybe_constant(b, _NO_CONSTANT)
    if ca is not _NO_CONSTANT and cb is not _NO_CONSTANT:
        return ca == cb
    return is_same(tx, a, b)


def contains(tx, container, item) -> VariableTracker:
    """``item in container`` (CONTAINS_OP, operator.contains)."""
    if isinstance(container, TensorVariable):
        raise Unsupported("`in` on a tensor (data dependent)")
    return container.call_method(tx, "__contains__", [item], {})

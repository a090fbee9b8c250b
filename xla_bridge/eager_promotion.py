"""Formulas for binary ops whose XLA lowering does not promote operands of different dtypes.

Part of ``eager_faithful``'s table (its docstring says how formulas are chosen and run). Eager
computes a binary op in the dtype both operands promote to (``torch.result_type``: a 0-dim
tensor counts for less than a dimensioned one, a Python number for less still). Several of
torch_xla's lowerings take their result dtype from one operand instead, found by a sweep of
dtype pairs against the device (tests/fuzz/FINDINGS.md, D12; device fuzz seed 415 i95:
``torch.where(y > 0, t4, y)`` of an int64 ``t4`` and a float32 ``y`` came back int64):

- ``where(c, a, b)``, ``remainder`` and ``bitwise_and``/``or``/``xor`` take ``a``'s dtype
  (``where(c, int64, float32)`` is int64, ``bool & int64`` is bool);
- ``maximum``/``minimum`` and the shifts take a 0-dim operand's dtype as if it had dimensions
  (``maximum(int32 vector, int64 0-dim)`` is int64, eager int32);
- ``atan2`` and ``xlogy`` of float16 with an integer or a 0-dim float32 compute in float32;
- ``clamp`` by tensor bounds or by a float (an integer tensor clamped by ``-0.5`` stayed
  integer), ``addcmul`` and ``addcdiv`` likewise (``addcmul`` of an int64 tensor and uint8
  factors multiplied the factors in uint8, wrapping at 256).

Each formula converts the operands to eager's promoted dtype and calls the op again, which the
mode then runs on operands of one dtype (through the op's other formulas, if it has any).

A bool operand of a product or a quotient whose result is floating (``x * mask``, ``mask *
inf``, ``mask / 0.0``, ``mask // 0.5``) is converted by the lowering itself, and XLA's
simplifier turns ``y * convert(mask)`` into ``select(mask, y, 0)``: 0 where eager's ``inf * 0``
and ``nan * 0`` give NaN (and ``-3 * 0`` -0.0). Such an operand is converted first, as
``where(mask, 1, 0)`` (a select of constants the simplifier leaves alone: ``bools_as_floats``).
"""

import torch
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes

from .eager_formulas import in_place, is_bool, mask_to_float_as_eager

_aten = torch.ops.aten
_DEFAULT = ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT
_INT_TO_FLOAT = ELEMENTWISE_TYPE_PROMOTION_KIND.INT_TO_FLOAT


def promoting(op, positions=(0, 1), kind=None):
    """``op`` with its operands at ``positions`` (None: left out) converted to the dtype eager
    gives the result (``elementwise_dtypes``: the same rule as ``torch.result_type``, for any
    number of operands; ``kind``: the op's own, integers made float for ``atan2``)."""
    def formula(*args, **kwargs):
        operands = [args[p] for p in positions if p < len(args) and args[p] is not None]
        tensors = [o for o in operands if isinstance(o, torch.Tensor)]
        if not tensors:
            return NotImplemented
        _, dtype = elementwise_dtypes(*operands, type_promotion_kind=kind or _DEFAULT)
        if all(t.dtype == dtype for t in tensors):
            return NotImplemented
        args = list(args)
        for p in positions:
            if p < len(args) and isinstance(args[p], torch.Tensor) and args[p].dtype != dtype:
                args[p] = _converted(args[p], dtype)
        return op(*args, **kwargs)
    return formula


_BINARY = (
    _aten.remainder.Tensor, _aten.remainder.Scalar, _aten.remainder.Scalar_Tensor,
    _aten.bitwise_and.Tensor, _aten.bitwise_and.Scalar,
    _aten.bitwise_or.Tensor, _aten.bitwise_or.Scalar,
    _aten.bitwise_xor.Tensor, _aten.bitwise_xor.Scalar,
    _aten.bitwise_left_shift.Tensor, _aten.bitwise_right_shift.Tensor,
    _aten.__lshift__.Tensor, _aten.__rshift__.Tensor,
    _aten.maximum.default, _aten.minimum.default,
    _aten.atan2.default, _aten.xlogy.Tensor,
    # comparisons of two tensors (inside a decomposition: ``isin``'s ``eq`` of a uint8 and an
    # int8 tensor read -1 as 255)
    *(getattr(_aten, name).Tensor for name in ("eq", "ne", "lt", "le", "gt", "ge")),
)

# ``clamp`` by tensor bounds (a 0-dim int64 bound made an int32 tensor int64), ``addcmul`` and
# ``addcdiv`` (``uint8`` factors multiplied in uint8 beside an int64 tensor)
_TERNARY = (_aten.clamp.Tensor, _aten.clamp_min.Tensor, _aten.clamp_max.Tensor,
            _aten.addcmul.default, _aten.addcdiv.default,
            # and by Python numbers: an integer tensor clamped by a float is float in eager,
            # stayed integer on the device (device fuzz seed 425 i193: ``t.clamp(min=-0.5)``)
            _aten.clamp.default, _aten.clamp_min.default, _aten.clamp_max.default)

# the op names a graph calls them by (``eager_faithful._calls``)
PROMOTED_OP_NAMES = ("where", "remainder", "bitwise_and", "bitwise_or", "bitwise_xor",
                     "bitwise_left_shift", "bitwise_right_shift", "__lshift__", "__rshift__",
                     "__and__", "__or__", "__xor__", "__mod__", "__rmod__", "__rand__", "__ror__",
                     "__rxor__", "maximum", "minimum", "atan2", "arctan2", "xlogy",
                     "clamp", "clip", "clamp_min", "clamp_max", "addcmul", "addcdiv")


def _converted(tensor, dtype):
    """``tensor.to(dtype)``; a bool tensor to a floating dtype as ``where(mask, 1, 0)``."""
    if is_bool(tensor) and (dtype.is_floating_point or dtype.is_complex):
        return mask_to_float_as_eager(tensor, dtype=dtype)
    return tensor.to(dtype)


def bools_as_floats(op, kind=_DEFAULT):
    """``op`` with its bool tensor operands (the first two) given as ``where(mask, 1, 0)`` in the
    floating dtype eager gives the result (by ``kind``: true division makes integers float)."""
    def formula(*args, in_place=False, **kwargs):
        operands = args[:2]
        if not any(map(is_bool, operands)) or (in_place and is_bool(operands[0])):
            return NotImplemented         # (a bool written in place with a float: eager raises)
        _, dtype = elementwise_dtypes(*operands, type_promotion_kind=kind)
        if not (dtype.is_floating_point or dtype.is_complex):
            return NotImplemented
        converted = [_converted(o, dtype) if is_bool(o) else o for o in operands]
        return op(*converted, *args[2:], **kwargs)
    return formula


# products and quotients (in place too): the result's dtype by eager's rule for each
_PRODUCTS = {
    _aten.mul.Tensor: _DEFAULT, _aten.mul.Scalar: _DEFAULT,
    _aten.div.Tensor: _INT_TO_FLOAT, _aten.div.Scalar: _INT_TO_FLOAT,
    _aten.div.Tensor_mode: _DEFAULT, _aten.div.Scalar_mode: _DEFAULT,
    _aten.floor_divide.default: _DEFAULT, _aten.floor_divide.Scalar: _DEFAULT,
}
_IN_PLACE_PRODUCTS = {
    _aten.mul_.Tensor: _DEFAULT, _aten.mul_.Scalar: _DEFAULT,
    _aten.div_.Tensor: _INT_TO_FLOAT, _aten.div_.Scalar: _INT_TO_FLOAT,
    _aten.div_.Tensor_mode: _DEFAULT, _aten.div_.Scalar_mode: _DEFAULT,
    _aten.floor_divide_.Tensor: _DEFAULT, _aten.floor_divide_.Scalar: _DEFAULT,
}


def products_of_bools() -> dict:
    """{op: formula} for the products and quotients above (``bools_as_floats``)."""
    table = {op: bools_as_floats(op, kind) for op, kind in _PRODUCTS.items()}
    table.update({op: in_place(bools_as_floats(op, kind)) for op, kind in _IN_PLACE_PRODUCTS.items()})
    return table


# ops that compute integers in floating point: their operands are each converted to the float
# dtype (``atan2(uint8, int8 -100)`` reads -100, not the 156 it is as a uint8)
_INT_TO_FLOAT_OPS = (_aten.atan2.default, _aten.xlogy.Tensor)


def promotions() -> dict:
    """{op: formula} for every op above (``where``'s operands are its second and third)."""
    table = {op: promoting(op, kind=_INT_TO_FLOAT if op in _INT_TO_FLOAT_OPS else _DEFAULT) for op in _BINARY}
    table[_aten.where.self] = promoting(_aten.where.self, positions=(1, 2))
    for op in _TERNARY:
        table[op] = promoting(op, positions=(0, 1, 2))
    return table

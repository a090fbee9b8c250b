"""While a graph is traced on the device, check each op's result dtypes against eager's.

torch_xla computes most ops' result dtypes the PyTorch way, but not all: ``torch.where(mask,
f32, f64)`` is float64 in eager and float32 lazily, so the whole result loses precision and
changes dtype. Every aten op has a meta kernel that follows eager's type promotion, so the
trace runs each op once more on meta tensors shaped like its arguments and compares the
dtypes of the results (once per capture: nothing is computed, the trace is the slow path
already). An op whose device result has another dtype (of another kind, or another floating
width; integer widths are let through, see ``_values_differ``) makes the trace fail with the reason
(``DtypeDiffers``), and the graph runs eagerly. An op with no meta kernel is not checked.
"""

from __future__ import annotations

import contextlib
import functools

import torch
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

from . import device as dev

META = torch.device("meta")

# Dtypes torch_xla gets wrong whatever the op, so every graph that holds one runs eagerly: a
# complex128 tensor loses its imaginary part on the way to the device (``x.to(xla).cpu()`` of
# ``1+2j`` is ``1+0j``); the wide unsigned integers come back as the signed type of their width.
UNSOUND_ON_DEVICE = {
    torch.complex128: "torch_xla loses the imaginary part of complex128 values",
    torch.uint16: "torch_xla returns uint16 results as int16",
    torch.uint32: "torch_xla returns uint32 results as int32",
    torch.uint64: "torch_xla returns uint64 results as int64",
}


class DtypeWatch(TorchDispatchMode):
    """Notes ``(op, device dtype, eager dtype)`` for every result whose dtype differs, and gives
    a pointwise op its operands in the dtype eager computes it in (``_operands_in``)."""

    def __init__(self):
        super().__init__()
        self.differences = []
        self.converts = False     # some operand or integer result was converted to eager's dtype

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        try:
            with _disable_current_modes():    # eager's answer, not the other modes' business
                expected = func(*pytree.tree_map(_on_meta, args), **pytree.tree_map(_on_meta, kwargs))
        except Exception:                 # noqa: BLE001  (no meta kernel for these arguments:
            expected = None               # not compared)
        if expected is not None and torch.Tag.pointwise in func.tags:
            converted = _operands_in(func, args, expected)
            if converted is not None:
                self.converts, args = True, converted
        out = dev.run_functionally(func, args, kwargs)
        unsound = [t.dtype for t in pytree.tree_leaves((args, kwargs, out))
                   if isinstance(t, torch.Tensor) and t.dtype in UNSOUND_ON_DEVICE]
        if unsound:
            self.differences.append((str(func), unsound[0], None))
            return out
        if expected is None:
            return out
        got = [t for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]
        want = [t for t in pytree.tree_leaves(expected) if isinstance(t, torch.Tensor)]
        if len(got) != len(want):
            return out
        self.differences += [(str(func), g.dtype, w.dtype) for g, w in zip(got, want)
                             if _values_differ(g.dtype, w.dtype)]
        widths = {id(g): w.dtype for g, w in zip(got, want) if g.dtype != w.dtype}
        if widths and not func._schema.is_mutable:   # an integer width: eager's dtype from here on
            self.converts = True
            out = pytree.tree_map_only(torch.Tensor, lambda t: t.to(widths[id(t)]) if id(t) in widths else t, out)
        return out

    def reason(self) -> str | None:
        if not self.differences:
            return None
        op, got, want = self.differences[0]
        if want is None:
            return f"{op} on {got}: {UNSOUND_ON_DEVICE[got]}"
        return f"the device computes {op} as {got} where eager gives {want}"


def converting_dtypes(enabled: bool):
    """A ``DtypeWatch`` for every run of a graph whose trial trace converted an operand or a
    result (its runs convert the same ones), or nothing to enter when it converted none."""
    return DtypeWatch() if enabled else contextlib.nullcontext()


# -- the dtype a pointwise op computes in ----------------------------------------------------------

def _category(dtype: torch.dtype) -> int:
    return 0 if dtype == torch.bool else 3 if dtype.is_complex else 2 if dtype.is_floating_point else 1


def _operand_promotion(tensors) -> torch.dtype:
    """PyTorch's promotion of tensor operands: a 0-dim tensor takes part only when it is of a
    higher category (bool < integer < floating < complex) than the dimensioned ones."""
    dims = [t.dtype for t in tensors if t.dim() > 0]
    zeros = [t.dtype for t in tensors if t.dim() == 0]
    common = functools.reduce(torch.promote_types, dims) if dims else None
    if zeros:
        zero = functools.reduce(torch.promote_types, zeros)
        if common is None or _category(zero) > _category(common):
            common = zero if common is None else torch.promote_types(common, zero)
    return common


def _operands_in(func, args, expected):
    """``args`` with each tensor operand of another dtype than the one eager computes ``func``
    in converted to it, or None when none needs it.

    Eager's pointwise kernels convert their operands to one common dtype first. torch_xla
    reports that dtype but computes in the widest operand's: ``f32 + f64 0-dim`` (a 0-dim
    tensor does not widen in eager) ran in float64 (``(x + s) - x`` kept a 1 that float32
    rounds away; ``x > s`` compared 0.1 in float64), ``i32 * i64 0-dim`` did not wrap,
    ``bf16 + f16`` rounded one operand to the other's type; and the result's data stayed
    float64 under a float32 dtype, which a replayed backward graph then refused. The common
    dtype is the functional op's result dtype, or the operands' promotion for a comparison and
    for an in-place op (its result is its first operand, left as it is). Bool operands (a
    ``where`` condition) are not operands of the arithmetic."""
    in_place = func._schema.is_mutable
    if in_place and not func.__name__.split(".")[0].endswith("_"):
        return None                               # an ``out=`` variant: not one of the graph's
    operands = [(i, a) for i, a in enumerate(args) if isinstance(a, torch.Tensor) and a.dtype != torch.bool]
    if len({a.dtype for _, a in operands}) < 2:
        return None
    results = [t.dtype for t in pytree.tree_leaves(expected) if isinstance(t, torch.Tensor)]
    if in_place or not results or results[0] == torch.bool:
        common = _operand_promotion([a for _, a in operands])
    else:
        common = results[0]
    halves = {torch.bfloat16, torch.float16}
    both_halves = halves <= {a.dtype for _, a in operands}
    # (only operands torch_xla computes otherwise with: one wider than the common dtype, and
    # the two 16-bit floats; an integer operand of a float op it converts as eager does)
    # and signed with unsigned integers: ``int8 + uint8`` widened the int8 as if unsigned)
    mixed_sign = common.is_signed and not common.is_floating_point and not common.is_complex \
        and torch.uint8 in {a.dtype for _, a in operands}
    converting = [i for i, a in operands if not (in_place and i == 0) and a.dtype != common
                  and (torch.promote_types(a.dtype, common) != common or (both_halves and a.dtype in halves)
                       or mixed_sign)]
    if not converting:
        return None
    return tuple(a.to(common) if i in converting else a for i, a in enumerate(args))


def _values_differ(got: torch.dtype, want: torch.dtype) -> bool:
    """Whether computing in ``got`` instead of ``want`` changes values: another kind (float,
    integer, bool) or another floating width (rounding). Integer widths are let through (XLA
    sums int32 where eager widens ``cumsum`` to int64): equal values short of an overflow; the
    result is converted to eager's dtype, so later ops and the outputs have it."""
    if got == want:
        return False
    kinds = (got.is_floating_point or got.is_complex, want.is_floating_point or want.is_complex)
    return kinds != (False, False) or (got == torch.bool) != (want == torch.bool)


def _on_meta(value):
    if isinstance(value, torch.Tensor):
        return torch.empty(value.shape, dtype=value.dtype, device=META)
    if isinstance(value, torch.device):
        return META
    return value

"""The formulas of ``eager_faithful``'s table: each op computed as eager computes it, where
torch_xla's lowering answers otherwise on ordinary data (the list, and why each differs, is in
``eager_faithful``'s docstring).

A formula is called by ``decompose.Decomposing`` in place of the op while a graph is traced. It
answers ``NotImplemented`` for calls its lowering gets right (the mode then runs the op itself),
and calls the lowered op itself where it can (under ``lowered``), so it costs one or two more
ops, not a decomposition.
"""

import contextlib
import functools
import math
import threading

import torch

_aten = torch.ops.aten


class _Reentry(threading.local):
    active = False


reentry = _Reentry()


def first_answer(*formulas):
    """One formula: the answer of the first of ``formulas`` that answers (not NotImplemented)."""
    def formula(*args, **kwargs):
        for candidate in formulas:
            out = candidate(*args, **kwargs)
            if out is not NotImplemented:
                return out
        return NotImplemented
    return formula


@contextlib.contextmanager
def lowered():
    """Inside a formula: the op it calls runs as the device's own lowering (the formula, asked
    again by the mode, answers NotImplemented)."""
    reentry.active = True
    try:
        yield
    finally:
        reentry.active = False


def linear_flattened(x, weight, bias):
    """``F.linear`` as eager's CPU kernel computes a contiguous input of three or more dimensions
    with a 1-D bias: flattened to rows, one ``addmm`` (the bias added to the float32 sum: one
    rounding in 16 bits), viewed back.  torch_xla's ``linear`` is ``matmul`` then ``add_``."""
    rows = torch.addmm(bias, x.view(-1, x.shape[-1]), weight.t())
    return rows.view(*x.shape[:-1], weight.shape[0])


def cummax_as_eager(x, dim):
    """``cummax`` whose index among tied values is the last one, as eager's kernels give (XLA's
    lowering keeps the first). The values are XLA's; the index at j is the last i <= j where x
    reached its running maximum (after it nothing new came, so x[i] is the maximum at j). Its
    own ``cummax`` calls are the lowered op (NotImplemented: the mode runs the op itself)."""
    if reentry.active or x.dim() == 0:
        return NotImplemented
    with lowered():
        values = _aten.cummax.default(x, dim)[0]
        dim = dim % x.dim()
        shape = [1] * x.dim()
        shape[dim] = x.shape[dim]
        positions = torch.arange(x.shape[dim], device=x.device).view(shape).expand(x.shape)
        reached = torch.where(x == values, positions, torch.zeros_like(positions))
        return values, _aten.cummax.default(reached, dim)[0]


def arange_as_eager(start, end, step=1, *, dtype=None, layout=None, device=None, pin_memory=None):
    """``arange`` with a float bound or step as eager's CPU kernel makes it: the length is
    ``ceil((end - start) / step)`` in double, value i is ``start + i * step`` in double, then
    cast (XLA's lowering gives ``arange(0.0, 1.0, 0.1)`` an eleventh element, 1.0)."""
    if reentry.active or all(type(v) is int for v in (start, end, step)):
        return NotImplemented
    length = math.ceil((end - start) / step)
    if length <= 0:
        return NotImplemented
    with lowered():
        positions = _aten.arange.default(length, dtype=torch.float64, device=device)
    return (positions * step + start).to(dtype or torch.get_default_dtype())


def _bound_inside(bound, size):
    """A slice bound as eager reads it, moved inside XLA's accepted range: eager counts a bound
    below ``-size`` as 0 (so does ``-size``); XLA's lowering refuses it ("Value out of range")."""
    return -size if isinstance(bound, int) and bound < -size else bound


def _slice_bounds_past_the_start(size, start, end) -> bool:
    return any(isinstance(b, int) and b < -size for b in (start, end))


def slices_as_eager():
    """``slice`` (``x[-4095:]`` of 8 rows: Mistral's sliding-window cache), its backward and its
    scatter (a store through such a slice), with a bound below ``-size`` read as eager reads it.
    Other calls keep the lowering (NotImplemented)."""
    def slicing(op):
        def slice_(x, dim=0, start=None, end=None, step=1):
            size = x.shape[dim]
            if reentry.active or not _slice_bounds_past_the_start(size, start, end):
                return NotImplemented
            with lowered():
                return op(x, dim, _bound_inside(start, size), _bound_inside(end, size), step)
        return slice_

    def slice_backward(grad, input_sizes, dim, start, end, step):
        size = input_sizes[dim]
        if reentry.active or not _slice_bounds_past_the_start(size, start, end):
            return NotImplemented
        with lowered():
            return _aten.slice_backward.default(grad, input_sizes, dim, _bound_inside(start, size),
                                                _bound_inside(end, size), step)

    def slice_scatter(x, src, dim=0, start=None, end=None, step=1):
        size = x.shape[dim]
        if reentry.active or not _slice_bounds_past_the_start(size, start, end):
            return NotImplemented
        with lowered():
            return _aten.slice_scatter.default(x, src, dim, _bound_inside(start, size), _bound_inside(end, size),
                                               step)

    return {_aten.slice.Tensor: slicing(_aten.slice.Tensor),   # (under functionalization: slice_copy)
            _aten.slice_copy.Tensor: slicing(_aten.slice_copy.Tensor),
            _aten.slice_backward.default: slice_backward, _aten.slice_scatter.default: slice_scatter}


_NARROW_INTEGERS = (torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32)


def cumsum_as_eager(x, dim, *, dtype=None):
    """``cumsum`` of a narrow integer (or bool) tensor sums in int64, as eager does; XLA sums in
    the input's type (``uint8`` wraps at 256, ``bool`` stays True)."""
    if dtype is not None or x.dtype not in _NARROW_INTEGERS:
        return NotImplemented
    return _aten.cumsum.default(x.to(torch.int64), dim)


def _arithmetic_shift(op, in_place=False):
    """``x >> k`` of a signed integer as eager's arithmetic shift (XLA shifts a negative value's
    bits in as zeros: ``-1 >> 1`` gives 0, eager -1): a negative x is ``~(~x >> k)``. A tensor
    ``k`` shifts through ``bitwise_right_shift``: torch_xla's ``__rshift__.Tensor`` lowering
    swaps its operands (``[-50, 50] >> [1, 2]`` gave [0, 0])."""
    swapped = op in (_aten.__rshift__.Tensor, _aten.__irshift__.Tensor)
    if swapped:
        op = _aten.bitwise_right_shift.Tensor

    def shift(x, k):
        if reentry.active or not isinstance(x, torch.Tensor) or x.is_floating_point() or x.is_complex() \
                or x.dtype == torch.bool or not (x.dtype.is_signed or swapped):
            return NotImplemented
        with lowered():
            result = torch.where(x < 0, ~op(~x, k), op(x, k)) if x.dtype.is_signed else op(x, k)
        return x.copy_(result) if in_place else result
    return shift


def shifts():
    table = {}
    for packet, in_place_packet in ((_aten.__rshift__, _aten.__irshift__),
                                    (_aten.bitwise_right_shift, _aten.bitwise_right_shift_)):
        for overload in ("Scalar", "Tensor", "Tensor_Scalar"):
            op = getattr(packet, overload, None)
            if op is None:
                continue
            table[op] = _arithmetic_shift(op)
            in_place = getattr(in_place_packet, overload, None)
            if in_place is not None:
                table[in_place] = _arithmetic_shift(op, in_place=True)
    return table


def _scalar_like(x, value):
    """``value`` as a 0-dim tensor of x's dtype and device (a Python number in ``where`` would
    cost a convert per use)."""
    return torch.full((), value, dtype=x.dtype, device=x.device)


def _held(x, low=None, high=None):
    """x held to ``[low, high]`` as eager's kernels compare: ``x < low ? low : x``, then
    ``> high``. An x equal to a bound stays x, so -0.0 stays -0.0 (XLA's ``max(-0.0, 0.0)`` is
    0.0), a NaN stays NaN, and ``low > high`` gives ``high``."""
    held = x if low is None else torch.where(x < (low := _scalar_like(x, low)), low, x)
    return held if high is None else torch.where(held > (high := _scalar_like(x, high)), high, held)


def _is_plain_float_tensor(x) -> bool:
    return isinstance(x, torch.Tensor) and x.is_floating_point()


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _clamp_as_eager(x, low=None, high=None, *, in_place=False):
    """``clamp`` by Python bounds as eager gives it. XLA's lowering is ``min(max(x, low), high)``:
    it turns -0.0 into 0.0 at a bound of 0 (``relu(-0.0)``: eager -0.0), and, given one bound,
    clamps an infinity to the dtype's largest value on the other side (``inf.clamp(min=0)`` gave
    3.4e38 for float32). Tensor bounds keep the lowering."""
    if not _is_plain_float_tensor(x) or (low is None and high is None) \
            or not all(bound is None or _number(bound) for bound in (low, high)):
        return NotImplemented
    result = _held(x, low, high)
    return x.copy_(result) if in_place else result


def _hardtanh_as_eager(x, low=-1.0, high=1.0, *, in_place=False):
    """``hardtanh`` is ``clamp`` to ``[low, high]``, except that a NaN bound makes every value NaN
    in eager (the device's grad-mode lowering kept x)."""
    if not _is_plain_float_tensor(x) or not (_number(low) and _number(high)):
        return NotImplemented
    if math.isnan(low) or math.isnan(high):
        result = x * math.nan
        return x.copy_(result) if in_place else result
    return _clamp_as_eager(x, low, high, in_place=in_place)


def in_place(formula):
    """The in-place variant of a formula (it writes its result into its first argument)."""
    return functools.partial(formula, in_place=True)


def clamps():
    """``clamp`` (and in place), ``clamp_min`` / ``clamp_max``, ``hardtanh`` (``relu6``), ``relu``."""
    return {_aten.clamp.default: _clamp_as_eager,
            _aten.clamp_.default: in_place(_clamp_as_eager),
            _aten.clamp_min.default: lambda x, bound: _clamp_as_eager(x, bound),
            _aten.clamp_min_.default: lambda x, bound: _clamp_as_eager(x, bound, in_place=True),
            _aten.clamp_max.default: lambda x, bound: _clamp_as_eager(x, None, bound),
            _aten.clamp_max_.default: lambda x, bound: _clamp_as_eager(x, None, bound, in_place=True),
            _aten.hardtanh.default: _hardtanh_as_eager,
            _aten.hardtanh_.default: in_place(_hardtanh_as_eager),
            _aten.relu.default: lambda x: _clamp_as_eager(x, 0),
            _aten.relu_.default: lambda x: _clamp_as_eager(x, 0, in_place=True)}


def _elu_as_eager(x, alpha=1.0, scale=1.0, input_scale=1.0, *, in_place=False):
    """``elu`` (``selu``) as eager's kernel: ``x <= 0 ? expm1(x * input_scale) * alpha * scale :
    x * scale``. The lowering's ``exp(x) - 1`` turns -0.0 into 0.0 (and loses digits near 0)."""
    if not _is_plain_float_tensor(x) or not all(map(_number, (alpha, scale, input_scale))) \
            or not math.isfinite(input_scale):
        return NotImplemented
    result = torch.where(x <= 0, torch.expm1(x * input_scale) * (alpha * scale), x * scale)
    return x.copy_(result) if in_place else result


def _celu_as_eager(x, alpha=1.0, *, in_place=False):
    """``celu`` is ``elu`` with ``input_scale = 1 / alpha`` (alpha 0: the lowering's answer)."""
    if not _number(alpha) or alpha == 0:
        return NotImplemented
    return _elu_as_eager(x, alpha, 1.0, 1.0 / alpha, in_place=in_place)


def _softshrink_as_eager(x, lambd=0.5):
    """``softshrink``: ``x * 0`` between the bounds, as eager (the lowering's 0 loses -0.0)."""
    if not _is_plain_float_tensor(x) or not _number(lambd):
        return NotImplemented
    return torch.where(x > lambd, x - lambd, torch.where(x < -lambd, x + lambd, x * 0))


def _sign_as_eager(x, *, in_place=False):
    """``sign`` of a float: 1, -1 or 0.0 (eager's sign of -0.0 and of NaN is 0.0; XLA's of -0.0
    is -0.0)."""
    if not _is_plain_float_tensor(x):
        return NotImplemented
    result = torch.where(x > 0, _scalar_like(x, 1), torch.where(x < 0, _scalar_like(x, -1), _scalar_like(x, 0)))
    return x.copy_(result) if in_place else result


def _plus_zero_as_eager(x, other, *, alpha=1, in_place=False, subtract=False):
    """``x + 0`` (``x - (-0.0)``): XLA's simplifier drops the addition, so -0.0 stays -0.0;
    eager's ``-0.0 + 0.0`` is 0.0. Only a zero added with a plus sign changes x: adding -0.0
    (``x.add(0, alpha=-1)``, ``x - 0``) leaves every x as it is, as the simplifier does."""
    if not _is_plain_float_tensor(x) or not _number(other) or not _number(alpha) or other != 0:
        return NotImplemented
    added = float(alpha) * float(other)      # the product as eager's kernel forms it, in floats
    if math.copysign(1.0, -added if subtract else added) < 0:
        return NotImplemented
    result = torch.where(x == 0, _scalar_like(x, 0), x)
    return x.copy_(result) if in_place else result


def _minus_zero_as_eager(x, other, *, alpha=1, in_place=False):
    return _plus_zero_as_eager(x, other, alpha=alpha, in_place=in_place, subtract=True)


def _remainder_as_eager(x, other, *, in_place=False):
    """Float ``remainder`` as eager's kernel: ``m = fmod(x, other)``, plus ``other`` where m is
    nonzero and of the other sign. The lowering's answer is 0.0 where eager keeps fmod's -0.0
    (``remainder(-1.0, 1.0)`` is -0.0 in eager)."""
    if not _is_plain_float_tensor(x) or not (_number(other) or _is_plain_float_tensor(other)):
        return NotImplemented
    mod = torch.fmod(x, other)
    other_negative = other < 0
    result = torch.where((mod != 0) & ((mod < 0) != other_negative), mod + other, mod)
    return x.copy_(result) if in_place else result


def _extreme_at_its_index(op):
    """``max(x, dim)`` / ``min(x, dim)`` whose values are x at the returned (first) indices, as
    eager's are: XLA's reduction gives 0.0 for a row whose first maximum is -0.0."""
    def extreme(x, dim, keepdim=False):
        if reentry.active or not x.is_floating_point() or x.dim() == 0:
            return NotImplemented
        with lowered():
            _, indices = op(x, dim, keepdim)
        at = indices if keepdim else indices.unsqueeze(dim)
        values = torch.gather(x, dim, at)
        return (values if keepdim else values.squeeze(dim)), indices
    return extreme


def signed_zero_selects() -> dict:
    """Activations whose eager kernel selects by a comparison, keeping a -0.0 that XLA's
    lowerings (``max``, ``exp(x) - 1``, a constant 0) make 0.0, ``x + 0`` (``x - (-0.0)``),
    which eager makes 0.0 and XLA leaves -0.0, ``remainder`` and ``max``/``min`` along a dim."""
    return {_aten.elu.default: _elu_as_eager,
            _aten.elu_.default: in_place(_elu_as_eager),
            _aten.celu.default: lambda x, alpha=1.0: _celu_as_eager(x, alpha),
            _aten.celu_.default: lambda x, alpha=1.0: _celu_as_eager(x, alpha, in_place=True),
            _aten.softshrink.default: _softshrink_as_eager,
            _aten.sign.default: _sign_as_eager,
            _aten.sign_.default: in_place(_sign_as_eager),
            _aten.sgn.default: _sign_as_eager,
            _aten.sgn_.default: in_place(_sign_as_eager),
            _aten.add.Tensor: _plus_zero_as_eager,
            _aten.add_.Tensor: in_place(_plus_zero_as_eager),
            _aten.add.Scalar: _plus_zero_as_eager,
            _aten.add_.Scalar: in_place(_plus_zero_as_eager),
            _aten.sub.Tensor: _minus_zero_as_eager,
            _aten.sub_.Tensor: in_place(_minus_zero_as_eager),
            _aten.sub.Scalar: _minus_zero_as_eager,
            _aten.sub_.Scalar: in_place(_minus_zero_as_eager),
            _aten.remainder.Tensor: _remainder_as_eager,
            _aten.remainder.Scalar: _remainder_as_eager,
            _aten.remainder_.Tensor: in_place(_remainder_as_eager),
            _aten.remainder_.Scalar: in_place(_remainder_as_eager),
            _aten.max.dim: _extreme_at_its_index(_aten.max.dim),
            _aten.min.dim: _extreme_at_its_index(_aten.min.dim)}


# Reductions whose empty ``dim`` list means every dimension in eager and none in torch_xla's
# lowerings (``x.amax()`` gave ``x`` itself; ``var`` over no dimension NaN per element).
EVERY_DIM_WHEN_EMPTY = tuple(getattr(getattr(_aten, packet), overload) for packet, overload in (
    ("amax", "default"), ("amin", "default"), ("sum", "dim_IntList"), ("mean", "dim"),
    ("var", "correction"), ("std", "correction"), ("var_mean", "correction"),
    ("std_mean", "correction"), ("linalg_vector_norm", "default")))


def every_dim_when_empty(op):
    """``op`` with an empty ``dim`` list given as the list of every dimension, as eager reads
    it (a 0-dim input has none to list: the lowering answers as eager)."""
    arguments = op._schema.arguments
    position = [a.name for a in arguments].index("dim")
    default = arguments[position].default_value if arguments[position].has_default_value() else None

    def reduce(*args, **kwargs):
        given_by_name = "dim" in kwargs
        dim = kwargs["dim"] if given_by_name else args[position] if len(args) > position else default
        if not isinstance(dim, (list, tuple)) or len(dim) or args[0].dim() == 0:
            return NotImplemented
        every = list(range(args[0].dim()))
        if given_by_name:
            kwargs = {**kwargs, "dim": every}
        elif len(args) > position:
            args = (*args[:position], every, *args[position + 1:])
        else:
            kwargs = {**kwargs, "dim": every}
        return op(*args, **kwargs)
    return reduce


NORM_OVERLOADS = ("Scalar", "ScalarOpt_dim", "ScalarOpt_dtype", "ScalarOpt_dim_dtype")


def norm_as_eager(x, p=2, dim=None, keepdim=False, *, dtype=None):
    """``norm`` of order +-infinity (every overload) as ``linalg_vector_norm``: torch_xla's
    ``norm`` lowering gives 1 for ``x.norm(p=inf)`` (eager: the largest absolute value)."""
    if not (isinstance(p, float) and math.isinf(p)):
        return NotImplemented
    return _nan_kept(x, _aten.linalg_vector_norm.default(x, p, dim, keepdim, dtype=dtype), dim, keepdim)


def dist_as_eager(x, y, p=2):
    """``dist`` of order +-infinity, which torch_xla's lowering gives as 1."""
    if not (isinstance(p, float) and math.isinf(p)):
        return NotImplemented
    difference = x - y
    return _nan_kept(difference, _aten.linalg_vector_norm.default(difference, p), None, False)


def means_every_dim(dim, left_out: bool) -> bool:
    """Whether a reduction's ``dim`` means every dimension: an empty list, or (``left_out``) no
    dim given at all."""
    return (dim is None and left_out) or (isinstance(dim, (list, tuple)) and not dim)


def _nan_kept(x, norm, dim, keepdim):
    """An infinity norm is NaN where eager's reads a NaN (XLA's max and min reductions skip it)."""
    if not x.is_floating_point():
        return norm
    dims = None if means_every_dim(dim, left_out=True) else dim
    found = x.isnan().any() if dims is None else x.isnan().any(dim=dims, keepdim=keepdim)
    return torch.where(found, torch.full_like(norm, float("nan")), norm)


def logit_as_eager(x, eps=None, *, in_place=False):
    """``logit(x, eps)`` reads x clamped to ``[eps, 1 - eps]``; torch_xla's lowering leaves
    values below ``eps`` alone (NaN for a negative x), and its clamp turns a NaN into a bound."""
    if eps is None:
        return NotImplemented
    if not x.is_floating_point():          # eager clamps in the result's float dtype (an integer
        if in_place:                       # clamp would round eps to 0); in place eager raises
            return NotImplemented
        x = x.to(torch.result_type(x, 1.0))
    clamped = x.clamp(eps, 1 - eps)
    clamped = torch.where(x.isnan(), x, clamped)      # eager's clamp keeps a NaN, XLA's does not
    result = _aten.logit.default(clamped)
    return x.copy_(result) if in_place else result


def lerp_as_eager(x, end, weight, *, in_place=False):
    """``lerp(x, end, w)`` as eager's kernel: ``x + w * (end - x)`` while ``|w| < 0.5``, else
    ``end - (end - x) * (1 - w)``, so that ``w = 1`` gives ``end`` exactly; torch_xla's lowering
    always takes the first form (``lerp(1e10, 1, 1.0)`` is 0 there, 1 in eager)."""
    if x.dtype not in (torch.float32, torch.float64):
        return NotImplemented
    w = weight if isinstance(weight, torch.Tensor) else _scalar_like(x, weight)
    diff = end - x
    result = torch.where(w.abs() < 0.5, x + w * diff, end - diff * (1 - w))
    return x.copy_(result) if in_place else result


def mask_to_float_as_eager(x, *, dtype=None, layout=None, device=None, pin_memory=None,
                           non_blocking=False, memory_format=None):
    """A bool tensor converted to a floating dtype (``mask.float()``) as ``where(mask, 1, 0)``:
    XLA's simplifier rewrites ``y * convert(mask)`` as ``select(mask, y, 0)``, through views,
    copies and ``* 1`` (``y.view(2, 2) * mask.float().view(2, 2)``, ``einsum``), which gives 0
    where eager's ``inf * 0`` and ``nan * 0`` give NaN. A select of constants it leaves alone."""
    if not is_bool(x) or dtype is None or not (dtype.is_floating_point or dtype.is_complex) \
            or (device is not None and torch.device(device) != x.device):
        return NotImplemented
    return torch.where(x, torch.ones((), dtype=dtype, device=x.device),
                       torch.zeros((), dtype=dtype, device=x.device))


def is_bool(value) -> bool:
    return isinstance(value, torch.Tensor) and value.dtype == torch.bool


def gelu_as_eager(x, *, approximate="none", in_place=False):
    """Exact ``gelu`` as ``x * erfc(-x / sqrt(2)) / 2``: torch_xla's ``1 + erf(x / sqrt(2))``
    is one ulp (1.2e-7) where it should be ~0, so ``gelu(-1e4)`` gave -8.9e-4 (eager -0.0).
    A 16-bit ``x`` (either form) is computed in float32 and rounded once, as eager's kernel
    does, a zero keeping x's sign (the device flushes what eager rounds to a signed zero)."""
    if x.dtype in (torch.bfloat16, torch.float16):
        wide = x.float()
        if approximate == "none":
            value = wide * torch.special.erfc(wide * -math.sqrt(0.5)) * 0.5
        else:
            with lowered():
                value = torch.ops.aten.gelu.default(wide, approximate=approximate)
        value = value.to(x.dtype)
        result = torch.where(value == 0, x * 0, value)
    elif approximate != "none":
        return NotImplemented
    else:
        result = x * torch.special.erfc(x * -math.sqrt(0.5)) * 0.5
    return x.copy_(result) if in_place else result


def sorting_zeros_as_equal(op):
    """``op`` (``sort``) ordering by keys in which -0.0 is 0.0, as eager compares;
    XLA's sort orders by the bits (-0.0 first: ``sort([0.0, -0.0])`` gave index 1 first, and a
    stable sort then broke eager's index order). The values are gathered back from ``x`` (a
    -0.0 stays -0.0)."""
    def sort(x, *args, **kwargs):
        if reentry.active or not x.is_floating_point() or x.dim() == 0:
            return NotImplemented
        # sort.default(x, dim=-1, descending=False); sort.stable(x, *, stable, dim=-1, ...)
        dim = kwargs.get("dim", args[0] if args else -1)
        with lowered():
            keys = torch.where(x == 0, torch.zeros_like(x), x)
            _, indices = op(keys, *args, **kwargs)
        return torch.gather(x, dim, indices), indices
    return sort


_UPSAMPLES = ("upsample_nearest1d", "upsample_nearest2d", "upsample_nearest3d",
              "_upsample_nearest_exact1d", "_upsample_nearest_exact2d", "_upsample_nearest_exact3d",
              "upsample_linear1d", "upsample_bilinear2d", "upsample_trilinear3d",
              "upsample_bicubic2d", "_upsample_bilinear2d_aa")


def upsample_references() -> dict:
    from torch._decomp import decomposition_table

    ops = (getattr(getattr(_aten, name), overload) for name in _UPSAMPLES for overload in ("default", "vec")
           if hasattr(getattr(_aten, name), overload))
    return {op: decomposition_table[op] for op in ops if op in decomposition_table}


def reference(*ops):
    """PyTorch's own decomposition of each op (its definition, in ops whose lowerings agree)."""
    from torch._decomp import decomposition_table

    return {op: decomposition_table[op] for op in ops}

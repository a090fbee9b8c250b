"""Out-of-range indices (and zero integer divisors, and NaN): eager raises or answers otherwise,
XLA computes; the graph computes which happened.

XLA's gather and scatter clamp an index that is out of range, so ``x[torch.tensor([7])]`` on
three rows returns a row where eager raises ``IndexError`` (and a write through such an index
lands somewhere).  While a graph is traced lazily, ``IndexWatch`` adds to it, for every index
tensor an aten op reads, one flag: all its values in the range eager accepts.  The flags become
one more output of the graph (``LazyGraph.index_check``), read after each run before anything
is written back; when it is false, ``IndexOutOfRange`` sends the call to eager PyTorch, which
raises its own error (after the side effects it makes first, as always).

Only for programs whose tensors come from the host: there the call waits for its results
anyway, so the flag costs one more small transfer, not a wait.  A program on device tensors keeps XLA's semantics,
as the lazy PyTorch/XLA baseline does: reading the flag would make every call wait for the
device.

The same flag covers the other data eager refuses and XLA computes with: an integer division
(``//``, ``%``, ``fmod``, ``div`` with a rounding mode) by a tensor holding a zero, where eager
raises ZeroDivisionError and XLA returns a value (a Python ``0`` divisor is refused while
tracing, ``minidynamo.tracer.eager_checks``).

And special values: the ops whose lowering treats a NaN or an infinity otherwise than eager's
kernels (``argmax`` and ``argmin`` point elsewhere, ``max(dim)`` and ``cummax`` give other
indices or values, ``threshold`` replaces a NaN eager keeps, ``logsumexp`` of ``inf`` is NaN,
``%`` and ``//`` by or of an infinity, ``sort`` and its kin put a negative NaN first; the max and
min reductions and max pools too when the runtime could not be told to propagate NaN,
``device.reductions_propagate_nan``) add the flag "no NaN (or no infinity) in the input"
(``_SPECIAL_VALUES``). (A NaN converted to an integer
type is left alone: the value is undefined in C++, eager's kernels give whatever the CPU gives.)

And the data a backward will read (``require_finite``): on a training path every tensor saved
for the backward (and every argument it reads again) adds "no NaN, no infinity". The device's
backward kernels branch on such values otherwise than eager's: relu's gradient at a NaN, the
index a max pool's gradient goes to, ``amax``'s gradient where a mask multiplies an infinity
(XLA simplifies ``x * mask`` to a select), elu's, mish's, cumprod's; and eager's own answer
there changes with the vector width (hardtanh's gradient at a NaN is 1 in a 5-element tensor,
0 in a 16-element one). No formula can follow that; a training call whose saved data holds a
non-finite value runs eagerly instead.

And the values a loss's kernel validates (``_DOMAINS``): ``binary_cross_entropy`` raises for an
input or a target outside [0, 1] (a NaN included), ``nll_loss`` (``cross_entropy``) and
``multi_margin_loss`` for a class index outside the classes (``ignore_index`` aside); XLA
computed NaN, or a loss with a clamped index. ``embedding_bag``'s offsets must start at 0, not
decrease and end within the indices, and ``masked_scatter`` needs a source element for every
place its mask selects; XLA dropped what was missing.

Ranges per op (what eager's CPU kernels accept; a stricter range only sends a call to eager):
``[-size, size)`` for advanced indexing, ``index_put``, ``index_fill``, ``take`` and ``put``;
``[0, size)`` for ``index_select``, ``gather``, the scatters, ``embedding``, ``embedding_bag``,
``index_add``, ``index_copy`` and ``max_unpool`` (a place in the output plane).
"""

from __future__ import annotations

import contextlib
import math
import threading

import torch
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

from . import device as dev
from .aten_recorder import active_recorder

aten = torch.ops.aten


_tracing = threading.local()     # .watch: the IndexWatch a trace on this thread runs under


class IndexOutOfRange(Exception):
    """A run of the graph read data eager treats otherwise; ``reason`` says so."""

    reason = ("an index is out of range, an integer divisor is zero or a NaN or an infinity "
              "meets an op the device computes otherwise: eager raises or answers differently")


class IndexWatch(TorchDispatchMode):
    """Collects one lazy flag per index tensor read while tracing: all values in range."""

    def __init__(self):
        super().__init__()
        self.flags: list = []
        # floating tensors converted from bool while tracing, by identity (kept for the trace: a
        # WeakSet compares a found tensor with ``==``, elementwise; seed 288 i233)
        self.masks = {}

    def __enter__(self):
        self.outer, _tracing.watch = getattr(_tracing, "watch", None), self
        return super().__enter__()

    def __exit__(self, *exc):
        _tracing.watch = self.outer
        return super().__exit__(*exc)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        rule = _RULES.get(func.overloadpacket)
        if rule is not None:
            for index, size, negative_ok in rule(*args, **kwargs):
                if isinstance(index, torch.Tensor) and not index.is_floating_point() \
                        and index.dtype != torch.bool and index.numel() > 0:
                    low = -size if negative_ok else 0
                    self._add(torch.all((index >= low) & (index < size)))
        domain = _DOMAINS.get(func.overloadpacket)
        if domain is not None:
            for accepted in domain(*args, **kwargs):
                if accepted.numel() > 0:
                    self._add(accepted.all())
        divisor = _integer_divisor(func, args, kwargs)
        if divisor is not None:
            self._add(torch.all(divisor != 0))
        for value, usual in _special_values(func, args):
            self._add(usual(value).all())
        for value in self._multiplied_by_a_mask(func, args):
            self._add(torch.isfinite(value).all())
        out = dev.run_functionally(func, args, kwargs)
        if func in _CONVERSIONS and _is_bool(args[0]) and isinstance(out, torch.Tensor):
            self.masks[id(out)] = out
        return out

    def _multiplied_by_a_mask(self, func, args):
        """The floating factor of ``x * mask`` (a bool tensor, or one converted from bool in
        this trace): XLA rewrites the product as ``select(mask, x, 0)``, which gives 0 where
        eager's ``inf * 0`` and ``nan * 0`` give NaN. (A bool factor is also traced as eager
        answers, ``eager_faithful``, keeping eager's -0.0.)"""
        if func not in _MULTIPLICATIONS or len(args) < 2:
            return
        for value, factor in (args[:2], args[1::-1]):
            if isinstance(value, torch.Tensor) and value.is_floating_point() and value.numel() > 0 \
                    and (_is_bool(factor) or id(factor) in self.masks):
                yield value

    def _add(self, flag) -> None:
        if not dev.is_xla(flag):     # a host tensor made while tracing: a constant
            flag = flag.to(dev.xla_device())
        self.flags.append(flag)

    def all_in_range(self):
        """One lazy boolean for every flag, or None when nothing was indexed."""
        return torch.stack(self.flags).all() if self.flags else None


def require_finite(tensors) -> None:
    """The run being traced answers as eager only if these tensors (saved for a backward)
    hold no NaN and no infinity: add that to its flag (nothing when no watch is tracing).

    Asked while an aten graph is being recorded on meta tensors (a formula of ``eager_faithful``
    inside a joint graph, which is traced lazily only later), the graph records the question
    instead (``finite_required``), to be asked when it runs."""
    watch = getattr(_tracing, "watch", None)
    if watch is None:
        recorder = active_recorder()
        if recorder is not None:
            tensors = [t for t in tensors if isinstance(t, torch.Tensor) and t.is_floating_point()]
            if tensors:
                recorder.record_call(finite_required, *tensors)
        return
    with _disable_current_modes():    # the check is not the program's: no mode is to see it
        for tensor in tensors:
            if isinstance(tensor, torch.Tensor) and tensor.is_floating_point() and tensor.numel() > 0:
                watch._add(torch.isfinite(tensor.detach()).all())


def finite_required(*tensors) -> None:
    """A recorded graph's ``require_finite`` (see there), asked when the graph runs."""
    require_finite(tensors)


class _NoWatch(contextlib.nullcontext):
    """What ``watching_indices(False)`` gives: watches nothing, finds nothing to check."""

    def __enter__(self):
        return self

    def all_in_range(self):
        return None


def watching_indices(enabled: bool):
    """An ``IndexWatch`` to trace under, or when not ``enabled`` one that sees nothing."""
    return IndexWatch() if enabled else _NoWatch()


def reads_indices(node) -> bool:
    """Does this fx node call an aten op whose indices (or integer divisor) are checked? (Those
    make eager raise even when the result is unused; a NaN only changes a result.)"""
    target = getattr(node, "target", None)
    return isinstance(target, torch._ops.OpOverload) and (target.overloadpacket in _RULES
                                                         or target.overloadpacket in _DOMAINS
                                                         or target.overloadpacket in _INTEGER_DIVISIONS)


def _size(tensor: torch.Tensor, dim: int) -> int:
    return tensor.shape[dim] if tensor.dim() else 1


def _advanced(self, indices, *rest, **kwargs):
    """``x[i, :, j]``: integer index tensors by the dim they index (None takes one dim, a
    boolean mask as many as it has)."""
    dim = 0
    for index in indices:
        if isinstance(index, torch.Tensor) and index.dtype in (torch.bool, torch.uint8):
            dim += index.dim()
            continue
        if index is not None:
            yield index, _size(self, dim), True
        dim += 1


def _along(negative_ok):
    def rule(self, dim, index, *rest, **kwargs):
        yield index, _size(self, dim), negative_ok
    return rule


def _embedding(weight, indices, *rest, **kwargs):
    yield indices, weight.shape[0], False


def _take(self, index, *rest, **kwargs):
    yield index, self.numel(), True


def _unpool(self, indices, output_size, *rest, **kwargs):
    """Each index is a place in one output plane (``output_size``: its spatial sizes)."""
    yield indices, math.prod(output_size), False


_MULTIPLICATIONS = {aten.mul.Tensor, aten.mul_.Tensor}
_CONVERSIONS = {aten._to_copy.default, aten.to.dtype, aten.to.dtype_layout, aten.type_as.default}


def _is_bool(value) -> bool:
    return isinstance(value, torch.Tensor) and value.dtype == torch.bool


_INTEGER_DIVISIONS = {aten.floor_divide, aten.floor_divide_, aten.remainder, aten.remainder_,
                      aten.fmod, aten.fmod_, aten.div, aten.div_}


def _integer_divisor(func, args, kwargs):
    """The divisor tensor of an integer division (``//``, ``%``, ``fmod``, ``div`` with a
    rounding mode) whose zero makes eager raise ZeroDivisionError, or None."""
    if func.overloadpacket not in _INTEGER_DIVISIONS or len(args) < 2:
        return None
    if func.overloadpacket in (aten.div, aten.div_) and kwargs.get("rounding_mode", args[2] if len(args) > 2 else None) is None:
        return None
    dividend, divisor = args[0], args[1]
    integral = [not (t.is_floating_point() or t.is_complex()) for t in (dividend, divisor)
                if isinstance(t, torch.Tensor)]
    if not isinstance(divisor, torch.Tensor) or not all(integral) or divisor.numel() == 0:
        return None
    if isinstance(dividend, torch.Tensor) and dividend.numel() == 0:
        return None
    return divisor


def _not_nan(t):
    return ~torch.isnan(t)


def _square_finite(t):
    """A float32 variance of values past 1.8e19 overflows on the device; eager's CPU kernel
    accumulates in double (``x.var()`` of ``[1e30, 0]`` is 5e59 there, inf on the device)."""
    return torch.isfinite(t * t)


# Ops whose lowering treats a NaN (``_not_nan``) or any non-finite value (``torch.isfinite``)
# in the arguments at these positions otherwise than eager's kernels (measured on XLA:CPU:
# argmax of [1, nan] points at 1, logsumexp of [inf, 1] is nan, logsigmoid(-inf) is nan,
# 3 % inf is nan and inf // 2 is inf where eager gives 3 and nan, softshrink(nan) is 0,
# gelu(inf) is inf where eager's kernel gives nan).
# XLA's sort orders floats by their bits: a NaN whose sign bit is set (``sigmoid`` of a NaN gives
# one) comes before every number; eager's kernels order every NaN above every number.
_SORTS = tuple(getattr(getattr(aten, name), overload) for name, overload in (
    ("sort", "default"), ("sort", "stable"), ("argsort", "default"), ("argsort", "stable"),
    ("topk", "default"), ("kthvalue", "default"), ("median", "default"), ("median", "dim"),
    ("msort", "default"), ("mode", "default")) if hasattr(getattr(aten, name, None), overload))

_SPECIAL_VALUES = {
    **dict.fromkeys((aten.argmax.default, aten.argmin.default, aten.max.dim, aten.min.dim,
                     aten.cummax.default, aten.cummin.default, aten.threshold.default,
                     aten.threshold_.default, aten.softshrink.default, aten.hardshrink.default) + _SORTS,
                    (_not_nan, (0,))),
    **dict.fromkeys((aten.logsumexp.default, aten.log_sigmoid_forward.default, aten.gelu.default,
                     aten.gelu_.default), (torch.isfinite, (0,))),
    # eager's SVD raises for a matrix holding NaN or inf ("failed to converge"); the device's
    # answers NaN (``svdvals``, ``pinv``, ``svd`` all reach it)
    aten._linalg_svd.default: (torch.isfinite, (0,)),
    **dict.fromkeys((aten.var.correction, aten.std.correction, aten.var_mean.correction,
                     aten.std_mean.correction), (_square_finite, (0,))),
    **dict.fromkeys((aten.remainder.Tensor, aten.remainder_.Tensor, aten.remainder.Scalar,
                     aten.remainder_.Scalar, aten.floor_divide.default, aten.floor_divide_.Tensor,
                     aten.floor_divide.Scalar, aten.floor_divide_.Scalar, aten.div.Tensor_mode,
                     aten.div_.Tensor_mode, aten.div.Scalar_mode, aten.div_.Scalar_mode),
                    (torch.isfinite, (0, 1))),
}
# ... and these, unless the runtime propagates NaN through min and max (by name: torch_xla
# registers its own max pool op, ``xla.max_pool2d_forward``).
_NAN_DROPPING_MIN_MAX = {f"aten.{name}" for name in (
    "max.default", "min.default", "amax.default", "amin.default", "aminmax.default",
    "max_pool1d.default", "max_pool2d.default", "max_pool3d.default",
    "max_pool2d_with_indices.default", "max_pool3d_with_indices.default",
    "adaptive_max_pool2d.default")} | {"xla.max_pool2d_forward.default"}


def _special_values(func, args):
    """(argument, its "usual values" test) for each floating argument of ``func`` that must
    hold no NaN (or no infinity either) for the device to answer as eager does."""
    rule = _SPECIAL_VALUES.get(func)
    if rule is None and str(func) in _NAN_DROPPING_MIN_MAX and not dev.reductions_propagate_nan():
        rule = (_not_nan, (0,))
    if rule is None:
        return
    usual, positions = rule
    for position in positions:
        value = args[position] if position < len(args) else None
        if isinstance(value, torch.Tensor) and value.is_floating_point() and value.numel() > 0:
            yield value, usual


_RULES = {
    **dict.fromkeys((aten.index, aten.index_put, aten.index_put_, aten._index_put_impl_), _advanced),
    **dict.fromkeys((aten.index_select, aten.gather, aten.scatter, aten.scatter_, aten.scatter_add,
                     aten.scatter_add_, aten.scatter_reduce, aten.scatter_reduce_, aten.index_add,
                     aten.index_add_, aten.index_copy, aten.index_copy_), _along(False)),
    **dict.fromkeys((aten.index_fill, aten.index_fill_), _along(True)),
    # (weight, indices, ...): a bag's indices are embedding rows too
    **dict.fromkeys((aten.embedding, aten._embedding_bag, aten._embedding_bag_forward_only), _embedding),
    **dict.fromkeys((aten.take, aten.put, aten.put_), _take),
    **dict.fromkeys((aten.max_unpool2d, aten.max_unpool3d), _unpool),
}


# -- the values a kernel validates (a loss's targets, a bag's offsets, a scatter's source) ----------

def _probabilities(self, target, *rest, **kwargs):
    for values in (self, target):
        if isinstance(values, torch.Tensor) and values.is_floating_point():
            yield (values >= 0) & (values <= 1)          # a NaN is outside too


def _class_indices(ignore_index_at=None):
    """Targets that index the classes (dim 1, or 0 of a 1-d input), or equal ``ignore_index``
    (the argument after self and target at ``ignore_index_at``)."""
    def rule(self, target, *rest, **kwargs):
        if not isinstance(target, torch.Tensor) or target.is_floating_point():
            return
        accepted = (target >= 0) & (target < _size(self, 1 if self.dim() > 1 else 0))
        ignore_index = None
        if ignore_index_at is not None:
            ignore_index = kwargs.get("ignore_index",
                                      rest[ignore_index_at] if len(rest) > ignore_index_at else None)
        yield accepted if ignore_index is None else accepted | (target == ignore_index)
    return rule


def _bag_offsets(weight, indices, offsets, *rest, **kwargs):
    """Offsets start at 0, do not decrease, and end within the indices."""
    if offsets.numel() > 0:
        yield torch.stack([offsets[0] == 0, (offsets.diff() >= 0).all(), offsets[-1] <= indices.numel()])


def _enough_source(self, mask, source):
    """``masked_scatter``: a source element for every place the mask selects."""
    yield torch.broadcast_to(mask, self.shape).sum() <= source.numel()


_DOMAINS = {
    aten.binary_cross_entropy: _probabilities,
    # (self, target, weight, reduction, ignore_index)
    aten.nll_loss_forward: _class_indices(ignore_index_at=2),
    aten.nll_loss2d_forward: _class_indices(ignore_index_at=2),
    aten.multi_margin_loss: _class_indices(),     # (self, target, p, margin, weight, reduction)
    **dict.fromkeys((aten._embedding_bag, aten._embedding_bag_forward_only), _bag_offsets),
    **dict.fromkeys((aten.masked_scatter, aten.masked_scatter_), _enough_source),
}

"""Layer, group, batch and instance norm with their statistics computed as eager computes them.

torch_xla lowers these norms through XLA's batch-norm operation, whose expansion takes the
variance as ``E[x^2] - E[x]^2``.  When a row's mean is large next to its spread (hidden states
after a residual add, activations with an offset) the two terms cancel: at mean -0.9 and spread
0.05, ``layer_norm``'s output is off by 5e-4 where eager's kernel (a two-pass, Welford-style
reduction) is off by 6e-6 (tests/fuzz/FINDINGS.md X73).  The formulas below take the mean
first, then the mean square of ``x - mean``; they return what the aten op returns (the output,
the mean and the reciprocal standard deviation its backward reads), so autograd's own backward
formula runs on these statistics.

Each answers ``NotImplemented`` where the lowering is kept: a dtype other than float32/float64
(eager's kernels accumulate 16-bit floats in float32, as ``eager_precision`` handles), mixed
dtypes, or an empty input.

A variance that is not finite (a row holding values past 1.8e19, whose squares overflow float32,
or an infinity or NaN) is where these formulas and eager's kernels part (``[1e30, 0.5]``: eager
NaN, here the bias): the run's watch (``index_check.require_finite``) then answers that call
eagerly.
"""

import torch

from .eager_formulas import lowered, reentry
from .index_check import require_finite

_aten = torch.ops.aten
_FLOATS = (torch.float32, torch.float64)


def _plain(input, *others) -> bool:
    return input.dtype in _FLOATS and input.numel() > 0 and all(t is None or t.dtype == input.dtype for t in others)


def _moments(x, dims):
    """Mean and ``x - mean`` and the biased variance over ``dims`` (kept), in two passes."""
    mean = x.mean(dims, keepdim=True)
    centered = x - mean
    variance = (centered * centered).mean(dims, keepdim=True)
    require_finite((variance,))
    return mean, centered, variance


def _affine(out, weight, bias, shape):
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out


def layer_norm_as_eager(input, normalized_shape, weight, bias, eps):
    """``native_layer_norm``: (output, mean, rstd), the statistics shaped as eager's
    (``input.shape[:axis]`` then ones)."""
    if reentry.active or not _plain(input, weight, bias) or len(normalized_shape) == 0:
        return NotImplemented
    dims = list(range(input.dim() - len(normalized_shape), input.dim()))
    mean, centered, variance = _moments(input, dims)
    rstd = torch.rsqrt(variance + eps)
    return _affine(centered * rstd, weight, bias, tuple(normalized_shape)), mean, rstd


def group_norm_as_eager(input, weight, bias, n, channels, hw, groups, eps):
    """``native_group_norm``: (output, mean, rstd), the statistics of shape (n, groups)."""
    if reentry.active or not _plain(input, weight, bias):
        return NotImplemented
    mean, centered, variance = _moments(input.reshape(n, groups, -1), [2])
    rstd = torch.rsqrt(variance + eps)
    out = (centered * rstd).reshape(input.shape)
    per_channel = (1, channels) + (1,) * (input.dim() - 2)
    return _affine(out, weight, bias, per_channel), mean.reshape(n, groups), rstd.reshape(n, groups)


def batch_norm_as_eager(input, weight, bias, running_mean, running_var, training, momentum, eps):
    """``native_batch_norm`` in training mode: the batch statistics in two passes, and the
    running statistics updated as eager updates them (the mean, and the *unbiased* variance,
    where torch_xla's lowering takes the biased one: 1.3% apart at 48 values a channel).
    Inference (running statistics read, none computed) keeps the lowering."""
    if reentry.active or not training:
        return NotImplemented
    dims = [0, *range(2, input.dim())]
    if _plain(input, weight, bias):
        per_channel = (1, input.shape[1]) + (1,) * (input.dim() - 2)
        mean, centered, variance = _moments(input, dims)
        invstd = torch.rsqrt(variance + eps)
        out = (_affine(centered * invstd, weight, bias, per_channel), mean.reshape(-1), invstd.reshape(-1))
        mean, variance = mean.detach().reshape(-1), variance.detach().reshape(-1)
    elif running_mean is not None and running_var is not None:
        with lowered():
            out = _aten.native_batch_norm.default(input, weight, bias, None, None, True, momentum, eps)
        variance, mean = torch.var_mean(input.detach(), dims, correction=0)
    else:
        return NotImplemented
    if running_mean is not None and running_var is not None:
        count = input.numel() // input.shape[1]
        running_mean.mul_(1 - momentum).add_(mean.to(running_mean.dtype), alpha=momentum)
        unbiased = variance * (count / max(count - 1, 1))
        running_var.mul_(1 - momentum).add_(unbiased.to(running_var.dtype), alpha=momentum)
    return out


# For graphs that call layer or group norm.  torch_xla has no kernel of its own for either: they
# reach the device as ``native_batch_norm`` of the input reshaped (a batch of one, a channel per
# row or group), which is why the batch-norm formula is among theirs.  Traced as recorded aten
# ops (the training path), they are ``native_layer_norm`` / ``native_group_norm`` themselves.
NORMS = {
    _aten.native_layer_norm.default: layer_norm_as_eager,
    _aten.native_group_norm.default: group_norm_as_eager,
    _aten.native_batch_norm.default: batch_norm_as_eager,
}

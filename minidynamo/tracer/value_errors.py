"""Which graph ops can raise at run time because of the values they meet.

A graph that runs after a Python side effect of its frame must, if it raises, let the frame run
again eagerly (``capture._why_rerun``): eager had made the side effects that come before the
failing op, and only a re-run reproduces them.  A graph that changes its inputs in place cannot
run twice, so such a frame used to run eagerly whole: a cache module that advances a Python
position and then writes its buffer (``self.pos += 1; self.store[row] = t``) never compiled.

Yet most ops cannot raise once the trace has run them on tensors of the shapes and dtypes the
guards pin: their errors (shapes that do not broadcast, a dtype an op refuses) were the trace's
own.  ``SHAPE_DECIDED`` lists such ops by name; an in-place variant (``add_``) is decided when
its op is (it only adds a check of the result's dtype).  An op not in it may raise for its
values, and so may one in it that indexes by a tensor (an index out of range; a mask whose count
of True values must match), divides integers (by zero) or raises them to a power (a negative
one).  Errors no op can rule out (memory, an interrupt) are not the program's, and a re-run
would not reproduce them either.
"""

from __future__ import annotations

import torch
import torch.fx as fx
from torch.utils import _pytree as pytree

# By the name a node's target goes by (``torch.add``, ``Tensor.add``, ``operator.add``: "add").
SHAPE_DECIDED = frozenset("""
    add sub mul neg pos abs iadd isub imul rsub truediv itruediv div
    exp log log2 log1p expm1 sqrt rsqrt sin cos tan tanh sigmoid relu gelu silu elu leaky_relu
    hardtanh softplus softmax log_softmax erf reciprocal square sign floor ceil round trunc
    pow maximum minimum clamp clamp_min clamp_max lerp where masked_fill
    sum mean amax amin prod var std norm cumsum logsumexp
    matmul mm bmm addmm baddbmm linear einsum conv1d conv2d conv3d
    layer_norm batch_norm group_norm instance_norm scaled_dot_product_attention dropout
    cat stack reshape view view_as flatten unflatten permute transpose t contiguous clone detach
    expand expand_as unsqueeze squeeze repeat tile flip roll narrow select split chunk unbind
    getitem setitem to float double half bfloat16 type_as fill zero copy zeros_like ones_like
    full_like empty_like eq ne lt le gt ge logical_and logical_or logical_not
    tensor zeros ones full empty eye arange linspace rand randn rand_like randn_like
    nan_to_num long int bool isnan isinf isfinite any all max min argmax argmin sort argsort topk
    outer dot vdot mv normalize cosine_similarity getattr as_tensor
    floordiv floor_divide remainder fmod mod ifloordiv imod
    pad constant_pad_nd interpolate upsample avg_pool1d avg_pool2d avg_pool3d max_pool1d max_pool2d
    max_pool3d adaptive_avg_pool1d adaptive_avg_pool2d adaptive_avg_pool3d adaptive_max_pool1d
    adaptive_max_pool2d conv_transpose1d conv_transpose2d conv_transpose3d rms_norm local_response_norm
    hardswish hardsigmoid relu6 mish glu logsigmoid softsign softmin tanhshrink threshold celu selu prelu
    addmv addbmm addcmul addcdiv triu tril diag_embed diagonal movedim moveaxis swapaxes swapdims
    split_with_sizes tensor_split new_zeros new_ones new_full new_empty cumprod diff unfold
    asin acos atan atan2 sinh cosh asinh acosh atanh exp2 logaddexp hypot logit erfc erfinv sgn
    bitwise_not bitwise_and bitwise_or bitwise_xor logical_xor var_mean std_mean cummax cummin
    ravel broadcast_to real imag conj angle frac clip view_as_real view_as_complex
""".split())

# Of integers, these raise for some values: a division by zero ("ZeroDivisionError"), a negative
# power ("Integers to negative integer powers are not allowed").
_INTEGER_HAZARDS = frozenset("""
    truediv itruediv div div_ floordiv floor_divide remainder fmod mod ifloordiv imod pow
""".split())


def may_raise_on_values(node: fx.Node, name: str) -> bool:
    """Whether ``node`` (an op of the graph, called ``name``) can raise at run time for the
    values of its tensors, not only for their shapes and dtypes."""
    if name.endswith("_") and not name.startswith("_"):
        name = name[:-1]       # an in-place variant: the out-of-place op's checks, plus a dtype cast
    if name not in SHAPE_DECIDED:
        return True
    if name in ("getitem", "setitem") and _has_tensor(node.args[1:2]):
        return True
    if name in _INTEGER_HAZARDS or node.kwargs.get("rounding_mode") is not None:
        return not all(_floating(a) for a in (*node.args[:2], node.meta.get("example_value")) if _tensor_like(a))
    return False


def _example(value):
    return value.meta.get("example_value") if isinstance(value, fx.Node) else value


def _tensor_like(value) -> bool:
    return isinstance(_example(value), torch.Tensor)


def _floating(value) -> bool:
    example = _example(value)
    return example.is_floating_point() or example.is_complex()


def _has_tensor(args) -> bool:
    leaves = pytree.tree_leaves(args, is_leaf=lambda v: isinstance(v, (fx.Node, slice)))
    bounds = [b for leaf in leaves if isinstance(leaf, slice) for b in (leaf.start, leaf.stop, leaf.step)]
    return any(isinstance(_example(v), torch.Tensor) for v in leaves + bounds)

"""Ops whose XLA lowering answers otherwise than eager on ordinary data, traced as formulas
that answer as eager does.

Eager PyTorch is the oracle; most lowerings agree with it, a few do not on plain inputs (found
by sweeping ops against the device, tests/fuzz/FINDINGS.md X33, X34, X36, X40):

- ``cummax`` keeps the first index among tied values, eager the last;
- batch norm in training mode updates ``running_var`` with the biased batch variance;
- layer, group, batch (training) and instance norm take the variance as ``E[x^2] - E[x]^2``,
  which cancels when the mean is large next to the spread (``eager_norms``);
- ``arange`` with a float bound or step gets another length (``arange(0.0, 1.0, 0.1)``: 11);
- ``cumsum`` of a narrow integer or bool sums in the input's type (eager widens to int64);
- ``>>`` of a negative integer shifts zeros in (eager's shift is arithmetic);
- ``clamp`` (``relu``, ``hardtanh``, ``relu6``) turns -0.0 into 0.0 at a bound of 0 (eager's
  kernels compare and keep x), and by one bound an infinity into the dtype's largest value;
- ``elu`` (``selu``, ``celu``) and ``softshrink`` of -0.0 give 0.0, eager -0.0; ``sign(-0.0)``
  gives -0.0, eager 0.0; so do ``x + 0`` and ``x - (-0.0)`` (XLA's simplifier drops them);
  ``remainder(-1.0, 1.0)`` and ``max(x, dim)`` of a row whose first maximum is -0.0 give 0.0,
  eager -0.0;
- a reduction over an empty ``dim`` list (``x.amax()``, ``x.sum(dim=[])``, ``x.var(dim=())``)
  reduces nothing (eager: every dimension);
- ``norm`` and ``dist`` of order infinity give 1 (``linalg.vector_norm``'s lowering is right);
- ``logit`` with ``eps`` does not clamp its input from below (NaN where eager gives a value);
- ``x * mask`` of a bool mask is a select for XLA's simplifier: 0.0 where eager's ``-3 * 0`` is
  -0.0 (and ``inf * 0`` NaN), and so are ``mask * inf``, ``mask / 0.0`` and ``mask // 0.5``
  (``eager_promotion.bools_as_floats``); so is ``x * mask.float()``, seen through views, copies
  and ``einsum`` (the conversion is traced as a select of 1 and 0, which the simplifier keeps);
- upsampling with a scale factor or size that does not divide (nearest at 1.7x picks other
  source pixels; bilinear to 9 of 5 columns puts ``x[3]`` where eager's weights give ``x[2]``):
  PyTorch's reference decompositions;
- ``sort`` orders -0.0 before 0.0 (eager: equal, in index order);
- a slice bound below ``-size`` (``x[-4095:]`` of 8 rows) is refused ("Value out of range"),
  where eager reads it as 0 (Mistral's sliding-window cache), in ``slice``, its backward and
  its scatter;
- ``gelu`` far out on the left is ``-x`` times one ulp (``gelu(-1e4)`` = -8.9e-4, eager -0.0):
  ``1 + erf`` cancels where ``erfc`` does not;
- binary ops of operands of different dtypes (``where``, ``remainder``, the bitwise ops,
  ``maximum`` with a 0-dim operand): the result takes one operand's dtype, where eager promotes
  (``eager_promotion.py``);
- ops computed in another precision: 16-bit float reductions, integer division, floats
  converted to integers out of range, complex numbers as truth values (``eager_precision.py``);
- backward formulas: elu's (celu's, selu's) gradient for x < 0, and the kinks of hardtanh,
  relu6, hardsigmoid, hardswish (traced as PyTorch's reference formulas on trace_once's
  training path; trivial's, whose backward torch_xla's autograd runs, refuses them).

Each formula (``eager_formulas.py``) is an entry of ``EAGER_FAITHFUL`` below, run by
``decompose.Decomposing`` while a graph is traced, and only for graphs that reach the op
(``eager_faithful``): a graph without them traces with no dispatch mode. A graph reaches an op
by calling it (its nodes, by name) or through anything that dispatches it: a composite
(``F.pairwise_distance`` dispatches ``norm``), an alias (``torch.special.logit``), a module.
The second is what ``FormulaProbe`` sees, below autograd, in the one run of the graph on meta
tensors the bridge makes anyway (``aliasing.analyse_memory``): the formulas that answered
there for the arguments they met. (A NaN or an infinity is ``index_check``'s: data no trace can
decide.)
"""

import math

import torch
import torch.fx as fx
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from .eager_formulas import (
    EVERY_DIM_WHEN_EMPTY, NORM_OVERLOADS, arange_as_eager, clamps, cummax_as_eager, first_answer,
    cumsum_as_eager, dist_as_eager, every_dim_when_empty, gelu_as_eager, in_place, is_bool, lerp_as_eager,
    linear_flattened, logit_as_eager, mask_to_float_as_eager, means_every_dim, norm_as_eager, reference, shifts,
    signed_zero_selects, slices_as_eager, sorting_zeros_as_equal, upsample_references,
)
from .eager_norms import NORMS, batch_norm_as_eager
from .eager_precision import (accumulations_in_float32, comparisons, complex_as_truth, copies_as_eager,
                              integer_divisions, numbers_in_float32, to_integer_as_eager)
from .eager_promotion import PROMOTED_OP_NAMES, products_of_bools, promotions

_aten = torch.ops.aten

# -- which graph nodes call an op a formula replaces ------------------------------------------


def op_name(target) -> str:
    """A node's op by name: ``aten.add.Tensor`` and ``torch.add`` are both ``add``."""
    if isinstance(target, torch._ops.OpOverload):
        return target.overloadpacket.__name__
    return target if isinstance(target, str) else getattr(target, "__name__", "")


def _calls(*names):
    return lambda node: op_name(node.target) in names


def _dim_argument(node, position=1):
    """The ``dim`` a reduction node passes, by name or at ``position`` (None: left out)."""
    return node.kwargs.get("dim", node.args[position] if len(node.args) > position else None)


_SIGNED_ZERO_OPS = ("elu", "elu_", "selu", "selu_", "celu", "celu_", "softshrink", "sign", "sign_", "sgn", "sgn_",
                    "remainder", "remainder_", "__mod__", "__rmod__", "__imod__", "mod", "imod", "max", "min")


def _adds_a_zero(node) -> bool:
    return op_name(node.target) in ("add", "add_", "iadd", "__add__", "__radd__", "__iadd__",
                                     "sub", "sub_", "isub", "__sub__", "__isub__") and any(
        type(a) in (int, float) and a == 0 for a in node.args)


def _converts_a_bool(node) -> bool:
    value = node.meta.get("example_value")
    return any(isinstance(a, fx.Node) and is_bool(a.meta.get("example_value")) for a in node.args[:1]) \
        and isinstance(value, torch.Tensor) and (value.is_floating_point() or value.is_complex())


def _upsampling(node) -> bool:
    return op_name(node.target).startswith(("interpolate", "upsample", "_upsample"))


_REDUCTIONS = ("amax", "amin", "aminmax", "sum", "mean", "var", "std", "var_mean", "std_mean", "norm",
               "linalg_vector_norm", "vector_norm", "nanmean", "nansum")


def _may_reduce_over_no_dim(node) -> bool:
    """A reduction node whose ``dim`` may be an empty list: given as one, computed (a node), or
    left out of ``amax``/``amin``, whose default is ``[]`` (``aminmax``'s is None, which its
    decomposition on the device passes to them as ``[]``); or a norm over every dimension,
    whose backward sums over ``[]`` (autograd's ``linalg_vector_norm_backward`` counts the ties
    of an infinity norm so: eager splits the gradient among them)."""
    name = op_name(node.target)
    if name not in _REDUCTIONS:
        return False
    norm = name in ("norm", "linalg_vector_norm", "vector_norm")
    dim = _dim_argument(node, 2 if norm else 1)
    if dim is None:
        return name in ("amax", "amin", "aminmax") or norm
    return isinstance(dim, fx.Node) or (isinstance(dim, (list, tuple)) and
                                        (not dim or any(isinstance(d, fx.Node) for d in dim)))


def _norm_in_training(node) -> bool:
    """A batch or instance norm node that may update running statistics (its ``training`` /
    ``use_input_stats`` argument, the sixth, is not a constant False)."""
    name = op_name(node.target)
    if name not in ("batch_norm", "native_batch_norm", "instance_norm"):
        return False
    default = name == "instance_norm"
    flag = node.args[5] if len(node.args) > 5 else \
        node.kwargs.get("training", node.kwargs.get("use_input_stats", default))
    return flag is not False


def _by_dispatch_only(node) -> bool:
    """No node name: the formulas are for what dtypes the ops meet, which ``FormulaProbe`` sees."""
    return False


def _slices_past_the_start(node) -> bool:
    """A node indexing with a slice whose constant bound lies below minus a dimension of its
    tensor (which dimension it slices is not worked out: any dimension as short counts)."""
    tensor = node.args[0].meta.get("example_value") if node.args and isinstance(node.args[0], fx.Node) else None
    if not isinstance(tensor, torch.Tensor) or tensor.dim() == 0:
        return False
    shortest = min(tensor.shape)
    bounds = [b for s in pytree.tree_leaves(node.args[1:], is_leaf=lambda v: isinstance(v, slice))
              if isinstance(s, slice) for b in (s.start, s.stop)]
    bounds += [b for b in (*node.args[2:], *node.kwargs.values()) if op_name(node.target) in ("slice", "narrow")]
    return any(type(b) is int and b < -shortest for b in bounds)


def _arange_with_a_float(node) -> bool:
    return op_name(node.target) == "arange" and any(type(a) is float for a in (*node.args, *node.kwargs.values()))


_PROMOTED = _calls(*PROMOTED_OP_NAMES)

# -- the table ------------------------------------------------------------------------------

# Backward formulas torch_xla lowers otherwise: elu's gradient for x < 0 (elu'(-3) is -2.0 on the
# device, 0.0498 in eager; celu and selu too), and the kinks of hardtanh, relu6, hardsigmoid and
# hardswish (eager's gradient at x == 1 of hardtanh is 0, the device's 1).
_BACKWARDS_THAT_DIFFER = ("elu", "celu", "selu", "hardtanh", "relu6", "hardsigmoid", "hardswish")
_BACKWARDS_THAT_DIFFER += tuple(f"{name}_" for name in _BACKWARDS_THAT_DIFFER)   # in place

# (which graph nodes reach the formulas, {op: formula}, the paths that need them: the inference
# path traces forward ops only, the grad-mode paths their backward ops too).
INFERENCE, TRAINING = "inference", "training"
EAGER_FAITHFUL = (
    # first: the other formulas of these ops then see operands of one dtype
    (_PROMOTED, promotions(), {INFERENCE, TRAINING}),
    (_by_dispatch_only, products_of_bools(), {INFERENCE, TRAINING}),
    (_calls("cummax"), {_aten.cummax.default: cummax_as_eager}, {INFERENCE, TRAINING}),
    (_norm_in_training, {_aten.native_batch_norm.default: batch_norm_as_eager}, {INFERENCE, TRAINING}),
    (_calls("layer_norm", "native_layer_norm", "group_norm", "native_group_norm"), NORMS, {INFERENCE, TRAINING}),
    (_arange_with_a_float, {_aten.arange.start_step: arange_as_eager,
                            _aten.arange.start: arange_as_eager,
                            _aten.arange.default: lambda end, **kw: arange_as_eager(0, end, **kw)},
     {INFERENCE, TRAINING}),
    (_calls("cumsum"), {_aten.cumsum.default: cumsum_as_eager}, {INFERENCE, TRAINING}),
    (_calls("rshift", "__rshift__", "irshift", "__irshift__", "bitwise_right_shift", "bitwise_right_shift_"),
     shifts(), {INFERENCE, TRAINING}),
    (_calls("clamp", "clamp_", "clip", "clip_", "clamp_min", "clamp_min_", "clamp_max", "clamp_max_",
            "relu", "relu_", "hardtanh", "hardtanh_", "relu6", "relu6_"), clamps(), {INFERENCE, TRAINING}),
    (lambda node: _calls(*_SIGNED_ZERO_OPS)(node) or _adds_a_zero(node), signed_zero_selects(),
     {INFERENCE, TRAINING}),
    (_may_reduce_over_no_dim, {op: every_dim_when_empty(op) for op in EVERY_DIM_WHEN_EMPTY},
     {INFERENCE, TRAINING}),
    (_calls("norm", "normalize", "dist"),
     {_aten.dist.default: dist_as_eager,
      **{getattr(_aten.norm, overload): norm_as_eager for overload in NORM_OVERLOADS}},
     {INFERENCE, TRAINING}),
    (_calls("lerp", "lerp_"), {_aten.lerp.Scalar: lerp_as_eager, _aten.lerp.Tensor: lerp_as_eager,
                               _aten.lerp_.Scalar: in_place(lerp_as_eager),
                               _aten.lerp_.Tensor: in_place(lerp_as_eager)},
     {INFERENCE, TRAINING}),
    (_calls("logit", "logit_"), {_aten.logit.default: logit_as_eager,
                                 _aten.logit_.default: in_place(logit_as_eager)},
     {INFERENCE, TRAINING}),
    (_converts_a_bool, {_aten._to_copy.default: mask_to_float_as_eager}, {INFERENCE, TRAINING}),
    (_upsampling, upsample_references(), {INFERENCE, TRAINING}),
    (_calls("sort", "argsort", "msort"),
     {op: sorting_zeros_as_equal(op) for op in (_aten.sort.default, _aten.sort.stable)},
     {INFERENCE, TRAINING}),
    (_calls("gelu", "gelu_"), {_aten.gelu.default: gelu_as_eager,
                               _aten.gelu_.default: in_place(gelu_as_eager)},
     {INFERENCE, TRAINING}),
    (_slices_past_the_start, slices_as_eager(), {INFERENCE, TRAINING}),
    # (reached through the ops a graph dispatches: FormulaProbe)
    (_by_dispatch_only, accumulations_in_float32(), {INFERENCE, TRAINING}),
    (_by_dispatch_only, integer_divisions(), {INFERENCE, TRAINING}),
    (_by_dispatch_only, comparisons(), {INFERENCE, TRAINING}),
    (_by_dispatch_only, numbers_in_float32(), {INFERENCE, TRAINING}),
    (_by_dispatch_only, {_aten._to_copy.default: to_integer_as_eager, **copies_as_eager()},
     {INFERENCE, TRAINING}),
    (_by_dispatch_only, complex_as_truth(), {INFERENCE, TRAINING}),
    (_calls(*_BACKWARDS_THAT_DIFFER),
     reference(_aten.elu_backward.default, _aten.hardtanh_backward.default,
               _aten.hardsigmoid_backward.default, _aten.hardswish_backward.default), {TRAINING}),
)


def _flattened_by_eager(node) -> bool:
    """An ``F.linear`` node eager's CPU kernel computes as one ``addmm`` of its rows (a contiguous
    input of three or more dimensions, a 1-D bias: ``_flatten_nd_linear``), in a 16-bit float,
    where that and the device's ``matmul`` then ``add_`` round differently."""
    if node.op != "call_function" or node.target is not torch._C._nn.linear:
        return False
    args = (*node.args, *[node.kwargs[k] for k in ("bias",) if k in node.kwargs])
    if len(args) < 3 or not all(isinstance(a, fx.Node) for a in args[:3]):
        return False
    x, weight, bias = (a.meta.get("example_value") for a in args[:3])
    if not all(isinstance(t, torch.Tensor) for t in (x, weight, bias)):
        return False
    return (x.dtype in (torch.bfloat16, torch.float16) and x.dim() >= 3 and x.is_contiguous()
            and x.layout == weight.layout == torch.strided and bias.dim() == 1)


def linear_paths_as_eager(graph_module: fx.GraphModule) -> None:
    """Point each ``F.linear`` node eager computes as one ``addmm`` (``_flattened_by_eager``) at
    ``linear_flattened``, which computes it so on the device too (where torch's own ``linear``
    never takes that path: it checks for XLA tensors)."""
    nodes = [node for node in graph_module.graph.nodes if _flattened_by_eager(node)]
    for node in nodes:
        node.target = linear_flattened
        if "bias" in node.kwargs:
            node.args, node.kwargs = (*node.args, node.kwargs["bias"]), {}
    if nodes:
        graph_module.recompile()


def eager_faithful(graph_module: fx.GraphModule, training: bool = False, answered=frozenset()) -> dict:
    """The ``EAGER_FAITHFUL`` formulas for the ops ``graph_module`` reaches (on a grad-mode path
    when ``training``): those its nodes call, and those of the ops in ``answered`` (what a
    ``FormulaProbe`` saw answer), so that a graph without them traces with no mode."""
    nodes = list(graph_module.graph.nodes)
    path = TRAINING if training else INFERENCE
    return _merged((op, fn) for reaches, table, paths in EAGER_FAITHFUL
                   if path in paths and (not answered.isdisjoint(table) or any(map(reaches, nodes)))
                   for op, fn in table.items())


def dispatched_formulas() -> dict:
    """The formulas that decide by the arguments they meet alone (not by the graph's nodes):
    those the ops a graph dispatches choose, and the promotions."""
    return _merged((op, fn) for reaches, table, _ in EAGER_FAITHFUL
                   if reaches is _by_dispatch_only or reaches is _PROMOTED for op, fn in table.items())


def _merged(pairs) -> dict:
    """{op: formula}, where an op with formulas in several entries (``_to_copy``: a bool mask,
    a float to an integer) gets the first of them that answers."""
    formulas = {}
    for op, fn in pairs:
        formulas.setdefault(op, []).append(fn)
    return {op: fns[0] if len(fns) == 1 else first_answer(*fns) for op, fns in formulas.items()}


class FormulaProbe(TorchDispatchMode):
    """Notes in ``answered`` each dispatched op whose formula answers for the arguments it met
    (on meta stand-ins: formulas decide by dtypes and Python arguments, never by data), and
    runs every op as it is, so the run it watches is unchanged.

    It sees what a graph's nodes do not name: ``F.pairwise_distance(p=inf)`` reaches
    ``norm``'s formula through the composite's own ops (the device gave 1 where eager gives
    the largest difference)."""

    def __init__(self):
        super().__init__()
        self.formulas = _merged((op, fn) for _, table, _ in EAGER_FAITHFUL for op, fn in table.items())
        self.answered = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        formula = self.formulas.get(func)
        if formula is not None and func not in self.answered and _answers(formula, args, kwargs):
            self.answered.add(func)
        return func(*args, **kwargs)


def _answers(formula, args, kwargs) -> bool:
    """Does ``formula`` answer (not NotImplemented) for these arguments? Asked on fresh meta
    tensors like them (a formula in place writes its stand-in, not the watched run's tensor),
    in grad mode, as the program's forward runs; a formula that fails there is taken to answer
    (the trace will tell)."""
    stand_ins = pytree.tree_map_only(torch.Tensor, lambda t: torch.empty_strided(
        t.shape, t.stride(), dtype=t.dtype, device="meta"), (args, kwargs))
    try:
        with torch.enable_grad():
            return formula(*stand_ins[0], **stand_ins[1]) is not NotImplemented
    except Exception:
        return True


def backward_differs(graph_module: fx.GraphModule):
    """Why a grad-mode path whose backward runs in torch_xla's own autograd kernels (trivial's:
    no trace of ours sees the backward) would give another gradient than eager, or None."""
    called = {op_name(node.target) for node in graph_module.graph.nodes}
    differing = sorted(called.intersection(_BACKWARDS_THAT_DIFFER))
    if differing:
        return (f"torch_xla's backward of {', '.join(differing)} gives other gradients than "
                f"eager's (elu for x < 0, the kinks of hardtanh)")
    if any(map(_variance_over_no_dim, graph_module.graph.nodes)):
        return "torch_xla's backward of a variance over an empty dim list reduces nothing"
    if any(map(_ties_counted_over_no_dim, graph_module.graph.nodes)):
        return ("torch_xla's backward of amax/amin or an infinity norm over every dimension counts its ties "
                "with a sum over an empty dim list, which reduces nothing (each tie gets the whole gradient)")
    if any(map(_sparse_gradient, graph_module.graph.nodes)):
        return "an embedding with sparse=True: its gradient is a sparse tensor, which torch_xla has not"
    if any(map(_batch_norm_in_eval, graph_module.graph.nodes)):
        return "torch_xla's backward of a batch norm in eval mode raises (\"offset factor is 0\")"
    if any(map(_by_a_bool, graph_module.graph.nodes)):
        return ("torch_xla's backward of a product by a bool mask is a select (0 where eager's gradient "
                "is NaN or -0.0)")
    return None


_PRODUCT_NAMES = ("mul", "mul_", "__mul__", "__rmul__", "__imul__", "div", "div_", "true_divide",
                  "__truediv__", "__rtruediv__", "__itruediv__", "truediv")


def _by_a_bool(node) -> bool:
    """A product or quotient with a bool tensor operand (``x * mask``)."""
    return op_name(node.target) in _PRODUCT_NAMES and any(
        isinstance(a, fx.Node) and is_bool(a.meta.get("example_value")) for a in node.args)


def _batch_norm_in_eval(node) -> bool:
    """A batch norm that uses its running statistics (``training`` a constant False): the lazy
    backward torch_xla runs for it fails, where eager's answers (trace_once records eager's)."""
    return op_name(node.target) in ("batch_norm", "native_batch_norm") and not _norm_in_training(node)


def _ties_counted_over_no_dim(node) -> bool:
    """``x.amax()`` (dim left out or empty), a norm over every dimension: their backward splits
    the gradient among ties, counted by a sum over the same (empty) dim list."""
    name = op_name(node.target)
    if name in ("amax", "amin"):
        return means_every_dim(_dim_argument(node), left_out=True)
    if name in ("norm", "linalg_vector_norm", "vector_norm"):
        order = node.kwargs.get("ord", node.kwargs.get("p", node.args[1] if len(node.args) > 1 else 2))
        return isinstance(order, float) and math.isinf(order) and \
            means_every_dim(_dim_argument(node, 2), left_out=True)
    return False



def _sparse_gradient(node) -> bool:
    """``F.embedding(..., sparse=True)`` / ``embedding_bag``: a sparse gradient (by name or at
    its place in the signature: 6th and 7th argument)."""
    name = op_name(node.target)
    position = {"embedding": 6, "embedding_bag": 7}.get(name)
    if position is None:
        return False
    return bool(node.kwargs.get("sparse", node.args[position] if len(node.args) > position else False))


def _variance_over_no_dim(node) -> bool:
    """``x.var(dim=[])`` and kin: the forward is traced as eager reads it (every dim), the
    backward torch_xla's autograd runs still reduces over none."""
    if op_name(node.target) not in ("var", "std", "var_mean", "std_mean"):
        return False
    return means_every_dim(_dim_argument(node), left_out=False)

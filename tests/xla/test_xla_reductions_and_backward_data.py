"""Lowerings that answer otherwise than eager on the reading of an argument (X42) and on the
data a backward meets (X39); tests/fuzz/FINDINGS.md. Eager PyTorch is the oracle.

X42 a reduction over an empty ``dim`` list: eager reduces every dimension, torch_xla's
    lowerings none (``x.amax()`` returned ``x``)
X43 ``norm`` and ``dist`` of order infinity gave 1
X44 ``logit(x, eps)`` did not clamp x from below (NaN for a negative x)
X39 a NaN or an infinity a backward reads: the device's backward kernels branch on it otherwise
    than eager's (whose own answer even depends on the vector width), so a training call whose
    saved tensors hold one runs eagerly
X45 ``x * mask`` (a bool tensor, or one converted from bool): XLA rewrites it as a select, 0
    where eager's ``inf * 0`` is NaN
X47 an op whose CPU kernel has no kernel for an integer or bool dtype (``gelu`` of an int64
    tensor): eager raises, the device computed
X48 a tensor made inside the graph and written through a view (``torch.vander``, ``zeros`` then
    ``z.narrow(..).add_(x)``): made under a dispatch mode it was not functional, the write was lost
X49 a partitioned graph whose in-place write was cut from the view it writes
X50 upsampling by a factor or to a size that does not divide
X51 ``sort`` of -0.0 and 0.0 (XLA orders them, eager treats them as equal)
X52 signed zeros: ``relu``/``clamp``/``hardtanh``/``elu``/``softshrink`` of -0.0 gave 0.0 (eager's
    kernels compare and keep x), ``sign(-0.0)`` -0.0 (eager 0.0), ``x + 0`` kept -0.0 (XLA's
    simplifier drops the addition)
X74 ``sort`` and its kin (``argsort``, ``topk``, ``kthvalue``, ``median``) put a NaN whose sign bit
    is set first (XLA orders by the bits; eager puts every NaN last)
X53 trace_once training: an in-place op on a slice of an intermediate (``t[:, 1:].fill_(w)``)
    got the wrong gradient (the recorded backward wrote through an ``as_strided`` view, which
    torch_xla writes to other elements)
X54 an argument that does not require grad, written in place through a view with a value that
    does (``y.unsqueeze(0).copy_(x)``): eager gives it an autograd history, the bridge wrote data
X46 ``gelu`` far out on the left (``1 + erf`` cancels to one ulp), ``gelu(inf)``, and a variance
    of values whose squares overflow float32 (eager accumulates in double)
"""

import pytest
import torch

import minidynamo
import xla_bridge
from tests.xla.xla_testing import BACKENDS, assert_same

# --- X42: a reduction over an empty dim list reduces every dimension ----------------------------

EMPTY_DIM_REDUCTIONS = {
    "x.amax()": lambda x: x.amax(),
    "x.amin()": lambda x: x.amin() + 1,
    "torch.amax(x, [])": lambda x: torch.amax(x, []),
    "x.sum(dim=[])": lambda x: x.sum(dim=[]),
    "x.sum(()) keepdim": lambda x: x.sum((), keepdim=True),
    "x.mean(dim=())": lambda x: (x * 2).mean(dim=()),
    "x.var(dim=[])": lambda x: x.var(dim=[]),
    "torch.std(x, [])": lambda x: torch.std(x, []),
    "var_mean(x, dim=[])": lambda x: torch.var_mean(x, dim=[]),
    "linalg.vector_norm(x, dim=[])": lambda x: torch.linalg.vector_norm(x, dim=[]),
    "x.nanmean(dim=[])": lambda x: x.nanmean(dim=[]),
    "x.amax(dim=[], keepdim=True) * x": lambda x: x.amax(dim=[], keepdim=True) * x,
    # (probe AI r4: decomposed on the device into amin and amax over [])
    "torch.aminmax(x)": lambda x: torch.aminmax(x).min + 1,
    "x.aminmax(keepdim=True)": lambda x: tuple(x.aminmax(keepdim=True)),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", EMPTY_DIM_REDUCTIONS)
def test_a_reduction_over_an_empty_dim_list_reduces_every_dimension(backend, case):
    """``x.amax()`` on the device gave ``x`` itself and ``x.var(dim=[])`` NaN per element: an
    empty list means "every dimension" to eager, "no dimension" to torch_xla's lowerings."""
    op = EMPTY_DIM_REDUCTIONS[case]
    x = torch.tensor([[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]])
    assert_same(minidynamo.optimize(backend)(op)(x), op(x))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", ["x.amax()", "x.mean(dim=())", "x.var(dim=[])", "var_mean(x, dim=[])"])
def test_gradients_through_a_reduction_over_an_empty_dim_list_are_eagers(backend, case):
    """The backward reads the same ``dim``: trace_once records it as eager's autograd does;
    trivial's backward (torch_xla's own) would reduce a variance over nothing and trains such
    graphs eagerly."""
    op = EMPTY_DIM_REDUCTIONS[case]

    def gradient(fn):
        x = torch.tensor([[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]], requires_grad=True)
        out = torch.stack(fn(x)) if isinstance(fn(x), tuple) else fn(x)
        return out.detach(), torch.autograd.grad(out, x, torch.ones_like(out))[0]

    assert_same(gradient(minidynamo.optimize(backend)(op)), gradient(op))


# --- X43, X44: norm of order infinity, logit with eps ---------------------------------------------

INF = float("inf")
ARGUMENT_READINGS = {
    "x.norm(p=inf)": lambda x: x.norm(p=INF),
    "x.norm(p=inf, dim=1)": lambda x: x.norm(p=INF, dim=1, keepdim=True),
    "x.norm(p=-inf)": lambda x: x.norm(p=-INF),
    "torch.dist(x, y, inf)": lambda x: torch.dist(x, x.flip(0) * 2, INF),
    "F.normalize(x, p=inf)": lambda x: torch.nn.functional.normalize(x, p=INF),
    "torch.logit(x, eps=0.1)": lambda x: torch.logit(x / 10, eps=0.1),
    "x.logit_(0.2)": lambda x: (x / 10).logit_(0.2),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", ARGUMENT_READINGS)
def test_norms_of_order_infinity_and_logit_with_eps_answer_as_eager(backend, case):
    """torch_xla's ``norm`` lowering gives ``x.norm(p=inf)`` as 1 (eager: the largest absolute
    value) and its ``logit`` leaves values below ``eps`` unclamped; traced as
    ``linalg_vector_norm`` and as ``logit`` of the clamped input, forward and backward."""
    op = ARGUMENT_READINGS[case]

    def run(fn):
        x = torch.tensor([[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]], requires_grad=True)
        out = fn(x * 1)
        return out.detach(), torch.autograd.grad(out, x, torch.ones_like(out))[0]

    with torch.no_grad():
        x = torch.tensor([[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]])
        assert_same(minidynamo.optimize(backend)(op)(x), op(x))
    minidynamo.reset()
    assert_same(run(minidynamo.optimize(backend)(op)), run(op))


# --- X39: NaN and infinities a backward reads -------------------------------------------------------

F = torch.nn.functional
BACKWARDS_ON_SPECIAL_VALUES = {
    "relu": torch.relu,
    "relu6": F.relu6,
    "hardtanh": F.hardtanh,
    "elu": F.elu,
    "mish": F.mish,
    "max_pool1d": lambda x: F.max_pool1d(x.view(1, 1, -1), 2),
    "amax(dim)": lambda x: x.view(4, -1).amax(1),
    "cumprod": lambda x: x.cumprod(0),
    "smooth_l1_loss": lambda x: F.smooth_l1_loss(x, torch.zeros_like(x), reduction="none"),
    "clamp(min=)": lambda x: x.clamp(min=-0.5),
}
SPECIAL = [float("nan"), float("inf"), float("-inf"), -0.0, 0.0, 1.0, -1.0, 0.5, 3.0, -3.0, 6.0, -6.0,
           1e30, -1e30, 2.0, -0.5]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", BACKWARDS_ON_SPECIAL_VALUES)
def test_gradients_at_nan_and_infinity_are_eagers(backend, name):
    """Seed 181 i114: relu's gradient at a NaN is 1 in eager (``nan <= 0`` is false), 0 replayed.
    Every backward kernel that branches on its data has such a case (and eager's own answer for
    hardtanh at a NaN changes with the tensor's length), so a training call whose saved tensors
    hold a NaN or an infinity runs eagerly; the flag is computed by the forward graph."""
    op = BACKWARDS_ON_SPECIAL_VALUES[name]

    def run(fn):
        x = torch.tensor(SPECIAL, requires_grad=True)
        out = fn(x)
        return out.detach(), torch.autograd.grad(out, x, torch.ones_like(out))[0]

    expected = run(op)
    actual = run(minidynamo.optimize(backend)(op))
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a, e, equal_nan=True)


def test_a_training_call_with_finite_data_still_replays():
    """The flag sends only calls with non-finite saved data to eager: finite data replays."""
    w = torch.nn.Parameter(torch.tensor([0.5, -1.0, 2.0, 1.5]))
    f = minidynamo.optimize("torchxla_trace_once")(lambda x: torch.relu(x * w).sum())
    for _ in range(3):
        f(torch.tensor([1.0, 2.0, -3.0, 4.0])).backward()
    replays = xla_bridge.counters.replays
    f(torch.tensor([1.0, 2.0, -3.0, 4.0])).backward()
    assert xla_bridge.counters.replays > replays
    w.grad = None
    f(torch.tensor([float("nan"), 2.0, -3.0, 4.0])).backward()      # relu'(nan) passes the grad
    assert w.grad[0].isnan() and w.grad[1:].tolist() == [0.0, 0.0, 4.0]


# --- X45, X46: a product with a mask, gelu far out, a variance past float32 ------------------------

FORWARDS_ON_SPECIAL_VALUES = {
    "x * (x > 1)": lambda x: x * (x > 1),
    "x * (x > 1).float()": lambda x: x * (x > 1).float(),
    "x * mask.type_as(x)[None]": lambda x: x.view(2, 8) * (x.view(2, 8)[0] < 3).type_as(x)[None],
    "x.mul_(x > 1)": lambda x: x.clone().mul_(x > 1),
    "(x * (x < 0)).sum()": lambda x: (x * (x < 0)).sum(),
    "gelu": F.gelu,
    "gelu far left": lambda x: F.gelu(-x.abs().nan_to_num(0.0, 0.0, 0.0) * 1000),
    "x.var()": lambda x: x.nan_to_num(0.0, 0.0, 0.0).var(),
    "x.std(0)": lambda x: x.nan_to_num(0.0, 0.0, 0.0).view(4, 4).std(0),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", FORWARDS_ON_SPECIAL_VALUES)
def test_products_with_masks_gelu_and_variances_answer_as_eager(backend, case):
    """``x * (x > 1)`` of ``[nan, -inf]`` is ``[nan, nan]`` in eager and ``[0, 0]`` on XLA (its
    simplifier makes the product a select): the other factor is checked finite on every call.
    ``gelu(-1e4)`` gave -8.9e-4 (traced as ``erfc``), ``gelu(inf)`` inf (eager: NaN), and the
    variance of ``[1e30, ...]`` inf (eager accumulates in double): calls with such data run
    eagerly."""
    op = FORWARDS_ON_SPECIAL_VALUES[case]
    x = torch.tensor(SPECIAL)
    torch.testing.assert_close(minidynamo.optimize(backend)(op)(x.clone()), op(x.clone()), equal_nan=True)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("requires_grad", [False, True])
def test_a_product_with_a_bool_mask_keeps_eagers_negative_zero(backend, requires_grad):
    """Seeds 186 i739, 191 i25: ``print(x * (x > 0))`` printed ``-0.`` in eager and ``0.``
    replayed (XLA's select): a bool factor is traced as ``where(mask, x, x * 0)`` (in a forward;
    a recorded backward keeps its own products); ``1 / (x * mask)`` shows it."""
    def f(x):
        y = x * (x > 0)
        return y, 1 / y

    def run(fn):
        x = torch.tensor([-3.0, -0.5, 0.0, 2.0], requires_grad=requires_grad)
        y, z = fn(x)
        grad = torch.autograd.grad(y.sum(), x)[0] if requires_grad else torch.zeros(4)
        return y.detach(), z.detach(), grad

    for got, want in zip(run(minidynamo.optimize(backend)(f)), run(f)):
        torch.testing.assert_close(got, want)
        assert torch.equal(torch.signbit(got), torch.signbit(want))


# --- X47: dtypes a CPU kernel lacks ---------------------------------------------------------------

NO_KERNEL_FOR_THE_DTYPE = {
    "gelu of int64": lambda x: F.gelu(x.long()),
    "hardswish of int32": lambda x: F.hardswish(x.int()),
    "lerp of int64": lambda x: torch.lerp(x.long(), x.long(), 0.5),
    "dot of bools": lambda x: torch.dot(x > 0, x > 1),
    "addcdiv of bools": lambda x: torch.addcdiv(x > 0, x > 0, x > 1),
    # where one-element stand-ins fail for their size: asked at the real (small) shapes
    "topk(k=2) of bools": lambda x: torch.topk(x > 0, 2),
    "local_response_norm of bf16 (avg_pool3d)": lambda x: F.local_response_norm(x.bfloat16().view(1, 3, 1, 1), 2),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", NO_KERNEL_FOR_THE_DTYPE)
def test_an_op_eager_has_no_kernel_for_raises_as_in_eager(backend, case):
    """Seed 187 i421: ``F.gelu`` of an int64 tensor raises NotImplementedError in eager ("not
    implemented for 'Long'"); meta kernels do not check, the device computed. The tracer asks
    the CPU kernel once per op and dtypes (one-element tensors, or the real shapes when those are
    too small for the op) and leaves a refused op to eager."""
    op = NO_KERNEL_FOR_THE_DTYPE[case]
    x = torch.tensor([1.0, 2.0, -3.0])
    with pytest.raises((RuntimeError, NotImplementedError)) as eager_error:
        op(x)
    with pytest.raises(type(eager_error.value)):
        minidynamo.optimize(backend)(op)(x)


# --- X48, X49: writes through views of tensors made in the graph -------------------------------

WRITES_THROUGH_VIEWS = {
    "torch.vander": lambda x: torch.vander(x[0], 4),
    "zeros then narrow().add_": lambda x: torch.zeros(3, 4, device=x.device).narrow(1, 1, 2).add_(x[:, :2]).sum()
    + torch.zeros(3, 4, device=x.device).sum(),
    "ones, then a view written": lambda x: _written_through_a_view(torch.ones(3, 4, device=x.device), x),
    "host ones, then a view written (partition)": lambda x: _written_through_a_view(torch.ones(3, 4), x),
    "cumprod(out=view)": lambda x: torch.cumprod(x, 1, out=torch.empty(3, 3, device=x.device)),
}


def _written_through_a_view(z, x):
    z.narrow(1, 1, 2).add_(x[:, :2])
    z.select(1, 0).fill_(7.0)
    return z * 2


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", WRITES_THROUGH_VIEWS)
def test_writes_through_views_of_tensors_made_in_the_graph_reach_their_base(backend, case):
    """``torch.vander(x, 4)`` came back all zeros: its ``empty`` and the writes into slices of
    it ran while the bridge's dispatch modes were active, where torch_xla makes a factory's
    tensor without its functionalization wrapper, so writes through views were lost
    (``device.run_functionally``). A host tensor written through a view in an eager piece of a
    partitioned graph lost the write too (the piece got a copy of the view): such graphs run
    eagerly."""
    op = WRITES_THROUGH_VIEWS[case]
    x = torch.arange(9.0).reshape(3, 3) / 4
    assert_same(minidynamo.optimize(backend)(op)(x.clone()), op(x.clone()))


# --- X50: upsampling ---------------------------------------------------------------------------

UPSAMPLINGS = {
    "nearest x1.7": lambda x: F.interpolate(x, scale_factor=1.7, mode="nearest"),
    "bilinear to 7x9": lambda x: F.interpolate(x, size=(7, 9), mode="bilinear"),
    "bilinear x(1.3, 0.7)": lambda x: F.interpolate(x, scale_factor=(1.3, 0.7), mode="bilinear"),
    "bicubic to 5x7 corners": lambda x: F.interpolate(x, size=(5, 7), mode="bicubic", align_corners=True),
    "nn.Upsample x2.5": lambda x: torch.nn.Upsample(scale_factor=2.5)(x),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", UPSAMPLINGS)
def test_upsampling_by_factors_that_do_not_divide_answers_as_eager(backend, case):
    """torch_xla's bilinear upsampling of 5 columns to 9 gave ``x[3]`` at output 4 (eager's
    weights give ``x[2]``; the row was not even monotonic), its nearest at 1.7x picked other
    source pixels: traced as PyTorch's reference decompositions, forward and backward."""
    op = UPSAMPLINGS[case]

    def run(fn):
        x = torch.arange(2 * 3 * 4 * 5, dtype=torch.float32).reshape(2, 3, 4, 5).sin().requires_grad_()
        out = fn(x)
        return out.detach(), torch.autograd.grad(out, x, torch.ones_like(out))[0]

    assert_same(run(minidynamo.optimize(backend)(op)), run(op))


# --- X51: sorting signed zeros ---------------------------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("stable", [False, True])
def test_sort_treats_negative_and_positive_zero_as_equal(backend, stable):
    """``(x * 0.3 - 0.1).round()`` makes -0.0 of small negatives: XLA's sort put every -0.0
    before every 0.0, eager keeps them in index order (they compare equal)."""
    def f(x):
        values, indices = x.sort(dim=-1, stable=stable)
        return values, indices, torch.argsort(x, descending=True, stable=True)

    x = torch.tensor([[0.0, -0.0, 1.0, -0.0, 0.0, -1.0], [-0.0, 2.0, 0.0, 0.0, -0.0, 0.0]])
    got, want = minidynamo.optimize(backend)(f)(x), f(x)
    for g, w in zip(got, want):
        assert torch.equal(g, w)
    assert torch.equal(torch.signbit(got[0]), torch.signbit(want[0]))


# --- X52: signed zeros -----------------------------------------------------------------------------

F = torch.nn.functional
SIGNED_ZERO_OPS = {
    "relu": torch.relu, "relu_": lambda x: x.clone().relu_(), "clamp(min=0)": lambda x: x.clamp(min=0),
    "clamp(0, 1)": lambda x: x.clamp(0, 1), "clamp(max=0) of -x": lambda x: (-x).clamp(max=0),
    "clamp(2, 1)": lambda x: x.clamp(2, 1), "clamp_(min=-0.5)": lambda x: x.clone().clamp_(min=-0.5),
    "clamp_min": lambda x: torch.clamp_min(x, 0.0), "hardtanh": F.hardtanh, "relu6": F.relu6,
    "clamp(min=nan)": lambda x: x.clamp(min=float("nan")), "hardtanh(nan, 1)": lambda x: F.hardtanh(x, float("nan"), 1.0),
    "elu": F.elu, "selu": F.selu, "celu(2)": lambda x: F.celu(x, 2.0), "elu_": lambda x: F.elu_(x.clone()),
    "softshrink": F.softshrink, "sign": torch.sign, "sgn": torch.sgn, "x + 0": lambda x: x + 0,
    "0.0 + x": lambda x: 0.0 + x, "add_(0)": lambda x: x.clone().add_(0),
    "x % 1.0": lambda x: x % 1.0, "remainder(x, -1.5)": lambda x: torch.remainder(x, -1.5),
    "remainder(x, y)": lambda x: torch.remainder(x, x.flip(0) + 0.25),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(SIGNED_ZERO_OPS))
@pytest.mark.parametrize("specials", [False, True])
def test_signed_zeros_come_out_as_eager_gives_them(backend, name, specials):
    """Seed 195 i166: ``print(y.relu() * 2)`` showed 0. where eager shows -0.: XLA's ``max(-0.0,
    0.0)`` is 0.0, eager's kernels compare and keep x. Values, and the sign of every zero, as eager.
    (With a NaN or an infinity among the inputs some of these calls run eagerly: index_check.)"""
    op = SIGNED_ZERO_OPS[name]
    x = torch.tensor([-0.0, 0.0, -0.3, 0.3, -0.7, 0.7, -2.0, 5.0, -1.0, 1.5, -3.0])
    if specials:
        x[-3:] = torch.tensor([float("nan"), float("inf"), -float("inf")])
    minidynamo.reset()
    got, want = minidynamo.optimize(backend)(lambda x: op(x) * 2)(x), op(x) * 2
    torch.testing.assert_close(got, want, equal_nan=True)
    zeros = want == 0
    assert torch.equal(torch.signbit(got[zeros]), torch.signbit(want[zeros])), (got, want)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(SIGNED_ZERO_OPS))
def test_signed_zeros_and_gradients_in_grad_mode(backend, name):
    """The same ops on a tensor that requires grad: values with the sign of every zero, and the
    gradient (eager's at x == 0 and at a bound: relu'(0) is 0, clamp'(bound) 1, hardtanh'(bound) 0)."""
    op = SIGNED_ZERO_OPS[name]
    weights = torch.linspace(-1.0, 2.0, 11)

    def run(fn):
        x = torch.tensor([-0.0, 0.0, -0.3, 0.3, -0.7, 0.7, -2.0, 5.0, -1.0, 1.5, -0.5], requires_grad=True)
        out = fn(x.clone() if name.endswith("_") or "_(" in name else x)
        grad = torch.autograd.grad((out * weights).sum(), x, allow_unused=True)[0] if out.requires_grad else None
        return out.detach(), grad

    minidynamo.reset()
    (got, got_grad), (want, want_grad) = run(minidynamo.optimize(backend)(lambda x: op(x) * 2)), run(lambda x: op(x) * 2)
    torch.testing.assert_close(got, want, equal_nan=True)
    zeros = want == 0
    assert torch.equal(torch.signbit(got[zeros]), torch.signbit(want[zeros])), (got, want)
    if want_grad is None:
        assert got_grad is None
    else:
        torch.testing.assert_close(got_grad, want_grad)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("keepdim", [False, True])
def test_max_and_min_along_a_dim_give_the_element_at_their_index(backend, keepdim):
    """Eager's values are x at the first extreme index: -0.0 when that is a -0.0 (XLA's reduction
    gave 0.0), 0.0 for ``min`` of ``[0.0, -0.0]``."""
    def f(x):
        return torch.max(x, 1, keepdim=keepdim), x.min(dim=0, keepdim=keepdim), torch.max(x, -1)[0] * 3

    x = torch.tensor([[-0.0, 0.0, -1.0], [0.0, -0.0, -2.0], [-3.0, -0.0, -0.0]])
    minidynamo.reset()
    got, want = minidynamo.optimize(backend)(f)(x), f(x)
    for g, w in zip(torch.utils._pytree.tree_leaves(got), torch.utils._pytree.tree_leaves(want)):
        assert torch.equal(g, w) and torch.equal(torch.signbit(g.float()), torch.signbit(w.float())), (got, want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_relu_and_clamp_gradients_at_zero_stay_eager_s(backend):
    """The formulas compute the forward values only (the dispatch mode runs below autograd): the
    gradient is still the op's own, eager's at the kinks (relu'(0) is 0, where a select's own
    gradient would be 1)."""
    def f(x):
        return (torch.relu(x) + x.clamp(min=0.5) + F.hardtanh(x)).sum()

    def run(fn):
        x = torch.tensor([-1.0, -0.0, 0.0, 0.5, 1.0, 2.0], requires_grad=True)
        out = fn(x)
        return out.detach(), torch.autograd.grad(out, x)[0]

    minidynamo.reset()
    assert_same(run(minidynamo.optimize(backend)(f)), run(f))


# --- X53: in-place writes to slices of intermediates, differentiated ------------------------------

IN_PLACE_ON_VIEWS = {
    "t[:, 1:].fill_(0.5)": lambda t: t[:, 1:].fill_(0.5),
    "t[1:, :2].mul_(3)": lambda t: t[1:, :2].mul_(3),
    "t.t()[::2].zero_()": lambda t: t.t()[::2].zero_(),
    "t[:, 0].add_(1)": lambda t: t[:, 0].add_(1),
    "t[1:].copy_(t[:2] * 2)": lambda t: t[1:].copy_(t[:2] * 2),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(IN_PLACE_ON_VIEWS))
def test_in_place_writes_to_slices_of_intermediates_have_eager_s_gradients(backend, name):
    """Seed 198 i592: ``t7 = MOD(y); t7[:, 1:].fill_(0.5)``, the gradient of the module's scale
    was 1.08 where eager's is 2.87. Autograd's backward of an in-place op on a view writes
    through the view; recorded on meta that view was an ``as_strided``, and torch_xla writes
    through a multi-dimensional non-contiguous ``as_strided`` view to other elements."""
    scale = torch.nn.Parameter(torch.tensor(1.5))
    write = IN_PLACE_ON_VIEWS[name]

    def f(y):
        t = torch.relu(y) * scale + 0.25
        write(t)
        return t

    y = torch.tensor([[1.0, 2.0, 3.0], [4.0, -1.0, 2.0], [0.5, 0.5, 0.5]])
    weights = torch.arange(9.0).view(3, 3) + 1
    minidynamo.reset()
    out = minidynamo.optimize(backend)(f)(y)
    want = f(y)
    assert_same(out.detach(), want.detach())
    assert_same(torch.autograd.grad((out * weights).sum(), scale), torch.autograd.grad((want * weights).sum(), scale))


# --- X54: a written argument that then requires grad ----------------------------------------------

WRITES_THAT_REQUIRE_GRAD = {
    "y.unsqueeze(0).copy_(x)": lambda x, y: y.unsqueeze(0).copy_(x),
    "y[0].add_(x[0])": lambda x, y: y[0].add_(x[0]),
    "y.view(-1)[:3].copy_(x.view(-1)[:3] * 2)": lambda x, y: y.view(-1)[:3].copy_(x.view(-1)[:3] * 2),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(WRITES_THAT_REQUIRE_GRAD))
def test_an_argument_written_with_a_value_that_requires_grad_gets_its_history(backend, name):
    """Seed 197 i972: ``t4 = y.unsqueeze(0); t4.copy_(x)`` with x requiring grad, returning None:
    after the call eager's y requires grad (CopySlices), the bridge's did not. Such a call runs
    eagerly; the gradient through y reaches x as in eager."""
    write = WRITES_THAT_REQUIRE_GRAD[name]

    def f(x, y):
        write(x, y)
        return None

    def run(fn):
        x = torch.arange(6.0).view(2, 3).requires_grad_(True)
        y = torch.ones(2, 3)
        fn(x, y)
        grad = torch.autograd.grad((y * torch.arange(6.0).view(2, 3)).sum(), x)[0] if y.requires_grad else None
        return y.detach(), y.requires_grad, grad

    minidynamo.reset()
    (got, got_requires, got_grad), (want, want_requires, want_grad) = run(minidynamo.optimize(backend)(f)), run(f)
    assert want_requires and got_requires
    assert_same((got, got_grad), (want, want_grad))


# --- lerp with a weight of at least one half (layout probe) -------------------------------------

LERPS = {
    "weight 1": lambda x, y: torch.lerp(x, y, 1.0),
    "weight 0.7": lambda x, y: torch.lerp(x, y, 0.7),
    "tensor weights": lambda x, y: torch.lerp(x, y, torch.tensor([0.2, 1.0, 0.5])),
    "in place": lambda x, y: x.clone().lerp_(y, 0.9),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", LERPS)
def test_lerp_takes_eagers_form_for_large_weights(backend, case):
    """Eager computes ``end - (end - x) * (1 - w)`` once ``|w| >= 0.5`` (so w = 1 gives ``end``
    exactly); torch_xla always ``x + w * (end - x)``: ``lerp(1e10, 1, 1.0)`` was 0 on the device."""
    minidynamo.reset()
    f = LERPS[case]
    x, y = torch.tensor([1e10, 3.0, -2.0]), torch.tensor([1.0, 1e-9, 5.0])
    assert_same(minidynamo.optimize(backend)(f)(x, y), f(x, y))


# --- X74: sort and its kin order a NaN by its bits (a negative NaN first) ----------------------------

SORTS_ON_NAN = {
    "argsort": lambda x: x.argsort(dim=1),
    "sort": lambda x: x.sort(dim=1, stable=True),
    "topk": lambda x: x.topk(2, dim=1),
    "kthvalue": lambda x: x.kthvalue(3, dim=1),
    "median": lambda x: x.median(dim=1),
    "scatter by argsort": lambda x: torch.zeros_like(x).scatter_add(1, x.argsort(dim=1), x),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", SORTS_ON_NAN)
def test_sorting_a_nan_answers_as_eager(backend, case):
    """Fuzz seed 345 i16: XLA's sort orders floats by their bits, so a NaN whose sign bit is set
    (``sigmoid`` of a NaN gave one) came first; eager orders every NaN above every number. A
    call whose sort meets a NaN runs eagerly."""
    op = SORTS_ON_NAN[case]
    x = torch.tensor([[0.4983, 0.8650, 0.8823, 1.4375], [-float("nan"), 0.4679, 1.3298, 0.8904],
                      [0.3270, 0.8677, 0.3548, float("nan")]])
    torch.testing.assert_close(minidynamo.optimize(backend)(op)(x.clone()), op(x.clone()), equal_nan=True)
    finite = x.nan_to_num(2.0)
    torch.testing.assert_close(minidynamo.optimize(backend)(op)(finite.clone()), op(finite.clone()))


NAN_READINGS = {
    "x.norm(p=inf)": lambda x: x.norm(p=INF),
    "x.norm(p=-inf)": lambda x: x.norm(p=-INF),
    "torch.dist(x, y, inf)": lambda x: torch.dist(x, torch.zeros(4), INF),
    "torch.logit(x, eps)": lambda x: torch.logit(x / 10, eps=1e-6),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", NAN_READINGS)
def test_a_nan_in_an_infinity_norm_or_a_clamped_logit_stays_nan(backend, case):
    """The formulas above read a NaN as eager does: XLA's max/min reductions skip it (``norm``
    of order inf gave the largest other value) and its clamp turns it into a bound (``logit``
    with eps gave -13.8)."""
    op = NAN_READINGS[case]
    minidynamo.reset()
    compiled = minidynamo.optimize(backend)(op)
    for x in (torch.tensor([1.0, float("nan"), 0.5, 3.0]), torch.tensor([1.0, 2.0, 0.5, 3.0]),
              torch.tensor([float("nan"), 2.0, 0.5, 3.0])):
        torch.testing.assert_close(compiled(x).cpu(), op(x), equal_nan=True)


TIED_REDUCTIONS = {"infinity norm": lambda x: torch.linalg.vector_norm(x, float("inf")) * 2,
                   "amax": lambda x: x.amax() * 2, "amin": lambda x: (-x).amin() * 2}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("reduction", sorted(TIED_REDUCTIONS))
def test_a_gradient_is_split_among_tied_extremes_when_training(backend, reduction):
    """X42 in a backward: autograd's backward of ``amax``/``amin`` and of an infinity norm over
    every dimension counts the ties with a sum over ``[]``, which torch_xla's lowering does not
    reduce: each tied element got the whole gradient (eager: a third each).  trace_once records
    that sum as eager reads it; trivial's backward is torch_xla's own, so its call runs eagerly."""
    import xla_bridge.device

    f = TIED_REDUCTIONS[reduction]
    xla_bridge.device.backward_on_device()
    minidynamo.reset()
    compiled = minidynamo.optimize(backend)(f)
    for _ in range(2):
        x, y = (torch.tensor([1.0, 3.0, -3.0, 2.0, 3.0], requires_grad=True) for _ in range(2))
        f(x).backward()
        compiled(y).backward()
        assert_same(y.grad, x.grad)
    minidynamo.reset()

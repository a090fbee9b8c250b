"""Lowerings that answer otherwise than eager on the reading of an argument (X42) and on the
data a backward meets (X39); tests/fuzz/FINDINGS.md. Eager PyTorch is the oracle.

X42 a reduction over an empty ``dim`` list: eager reduces every dimension, torch_xla's
    lowerings none (``x.amax()`` returned ``x``)
X43 ``norm`` and ``dist`` of order infinity gave 1
X44 ``logit(x, eps)`` did not clamp x from below (NaN for a negative x)
X39 a NaN or an infinity a backward reads: the device's backward kernels branch on it otherwise
    than eager's (whose own answer even depends on the vector width), so a training call whose
    saved tensors hold one runs eagerly
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

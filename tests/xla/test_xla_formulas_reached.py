"""Eager-faithful formulas reach the ops a graph dispatches, not only the ops it names.

``eager_faithful`` traces a few ops as formulas that answer as eager does where torch_xla's
lowering answers otherwise. Which graphs get them was decided by the names of their nodes, so an
op reached inside a composite or under an alias kept the device's answer: ``F.pairwise_distance``
of order infinity was 1 for every row (its ``norm`` never met the formula), ``special.logit``
with ``eps`` NaN. ``FormulaProbe`` watches the graph's one meta run below autograd and notes the
formulas that answer there (tests/fuzz/FINDINGS.md L3).
"""

import math

import pytest
import torch
import torch.nn.functional as F

import minidynamo
from tests.xla.xla_testing import BACKENDS
from xla_bridge.eager_faithful import FormulaProbe, eager_faithful

inf, nan = math.inf, math.nan
T = torch.tensor


def assert_same_bits(actual, expected):
    """Equal values, NaN where eager has NaN, and the sign of every zero and infinity."""
    for a, e in zip(torch.utils._pytree.tree_leaves(actual), torch.utils._pytree.tree_leaves(expected)):
        torch.testing.assert_close(a, e, equal_nan=True, rtol=1e-6, atol=0)
        if e.is_floating_point():
            assert torch.equal(torch.signbit(a) & ~a.isnan(), torch.signbit(e) & ~e.isnan()), (a, e)


def check(backend, fn, *args):
    expected = fn(*[a.clone() for a in args])
    assert_same_bits(minidynamo.optimize(backend)(fn)(*[a.clone() for a in args]), expected)


ROWS = (T([[1., 2.], [3., -1.]]), T([[6., 0.], [0., 2.]]))

COMPOSITES = {
    "pairwise_distance(p=inf)": (lambda a, b: F.pairwise_distance(a, b, p=inf), ROWS),
    "triplet_margin_loss(p=inf)": (lambda a, b: F.triplet_margin_loss(a, b, a * 2, p=inf), ROWS),
    "special.logit(eps)": (lambda x: torch.special.logit(x, eps=0.1), (T([-0.5, 0.3, 1.5]),)),
    "margin_ranking_loss of inf": (lambda x, y, t: F.margin_ranking_loss(x, y, t, reduction="none"),
                                   (T([inf, 1.]), T([0., 2.]), T([-1., 1.]))),
    "hinge_embedding_loss of inf": (lambda x, t: F.hinge_embedding_loss(x, t, reduction="none"),
                                    (T([inf, -inf, 1.]), T([-1., -1., 1.]))),
    "normalize of inf": (lambda x: F.normalize(x), (T([[inf, 1.], [-0., 2.]]),)),
    "cosine_similarity of inf": (lambda x, y: F.cosine_similarity(x, y), (T([[inf, 1.]]), T([[1., 1.]]))),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", COMPOSITES)
def test_an_op_reached_inside_a_composite_gets_its_formula(backend, case):
    fn, args = COMPOSITES[case]
    check(backend, fn, *args)


def test_the_probe_notes_the_formulas_a_composite_reaches_and_leaves_the_run_as_it_is():
    a, b = (t.to("meta") for t in ROWS)
    with FormulaProbe() as probe:
        out = F.pairwise_distance(a, b, p=inf)
    assert torch.ops.aten.norm.ScalarOpt_dim in probe.answered
    assert out.shape == (2,) and out.device.type == "meta"
    with FormulaProbe() as probe:            # order 2: the lowering answers as eager, no formula
        F.pairwise_distance(a, b)
    assert not probe.answered


def test_a_graph_reaching_no_formula_traces_with_no_mode():
    gm = torch.fx.symbolic_trace(lambda x, y: F.pairwise_distance(x, y, p=inf))
    reached = eager_faithful(gm, answered=frozenset({torch.ops.aten.norm.ScalarOpt_dim}))
    assert torch.ops.aten.norm.ScalarOpt_dim in reached
    assert eager_faithful(gm, answered=frozenset()) == {}     # no node names norm


# --- adding a zero: eager's -0.0 + 0.0 is 0.0, XLA's simplifier drops the addition ------------

ZEROS = T([-0., 0., 1., -2.])
ADDED_ZEROS = {
    "x.sub(-0.0)": lambda x: x.sub(-0.0),
    "x - (-0.0)": lambda x: x - (-0.0),
    "x.sub(0.0, alpha=-1)": lambda x: x.sub(0.0, alpha=-1),
    "x.sub_(-0.0)": lambda x: x.clone().sub_(-0.0),
    "x + 0": lambda x: x + 0,
    "x.add(-0.0) keeps -0.0": lambda x: x.add(-0.0),
    "x.add(0, alpha=-1) keeps -0.0": lambda x: x.add(0, alpha=-1),
    "x - 0 keeps -0.0": lambda x: x - 0,
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", ADDED_ZEROS)
def test_adding_a_zero_gives_eagers_signed_zero(backend, case):
    check(backend, ADDED_ZEROS[case], ZEROS)


# --- a product with a mask converted from bool: eager's inf * 0 is NaN --------------------------

VALUES, MASK = T([-3., inf, 2., nan]), T([True, False, False, True])
MASK_PRODUCTS = {
    "through views": lambda v, m: v.view(2, 2) * m.float().view(2, 2),
    "broadcast": lambda v, m: v[None] * m.float()[None],
    "expanded": lambda v, m: v.view(1, 4).expand(2, 4) * m.float().expand(2, 4),
    "transposed copy": lambda v, m: v.view(2, 2).t() * m.float().view(2, 2).t().contiguous(),
    "clone": lambda v, m: v * m.float().clone(),
    "times one": lambda v, m: v * (m.float() * 1),
    "einsum": lambda v, m: torch.einsum("i,i->i", v, m.float()),
    "stack and prod": lambda v, m: torch.stack([v, m.float()]).prod(0),
    "double": lambda v, m: v.double() * m.double(),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", MASK_PRODUCTS)
def test_a_product_with_a_converted_mask_keeps_eagers_nan(backend, case):
    check(backend, MASK_PRODUCTS[case], VALUES, MASK)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_composite_formula_on_the_training_path(backend):
    """``pairwise_distance(p=inf)`` with grad: value and gradient as eager's."""
    def loss(a, b):
        return F.pairwise_distance(a, b, p=inf).sum()

    a, b = (ROWS[0].clone().requires_grad_(), ROWS[1])
    expected = loss(a, b)
    expected.backward()
    a2 = ROWS[0].clone().requires_grad_()
    actual = minidynamo.optimize(backend)(loss)(a2, b)
    actual.backward()
    torch.testing.assert_close(actual, expected)
    torch.testing.assert_close(a2.grad, a.grad)


SHIFTS = {
    "int32 >> tensor": lambda x, k: (x.int() - 150) >> k,
    "int64 >>= tensor": lambda x, k: (x.long() - 150).__irshift__(k.long()),
    "uint8 >> tensor": lambda x, k: x.to(torch.uint8) >> k.to(torch.uint8),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", SHIFTS)
def test_a_right_shift_by_a_tensor_argument_is_eagers(backend, case):
    """torch_xla's ``__rshift__.Tensor`` lowering swaps its operands (``[-50, 50] >> [1, 2]`` gave
    [0, 0]); the shift formula shifts through ``bitwise_right_shift``, which it lowers right."""
    x, k = T([100., 200., 2.]), T([1, 2, 3], dtype=torch.int32)
    fn = SHIFTS[case]
    assert torch.equal(minidynamo.optimize(backend)(fn)(x, k), fn(x, k))

"""Data an op's eager kernel validates, replayed on the XLA backends (probe AF).

Each case is called with valid data (traced, then replayed), then with data of the same shapes
that eager refuses: the replay computes whether its data is valid (``index_check``) and sends
such a call to eager, which raises its own error. XLA's gather and scatter clamp or drop what
eager refuses, so without the check a replay returned a tensor.
"""

import pytest
import torch
import torch.nn.functional as F

import minidynamo
from tests.xla.xla_testing import BACKENDS

T = torch.tensor
W = torch.arange(15.0).reshape(5, 3) - 7
X4 = torch.zeros(4)
POOLED_2D = F.max_pool2d(torch.arange(16.0).reshape(1, 1, 4, 4), 2, return_indices=True)
POOLED_3D = F.max_pool3d(torch.arange(8.0).reshape(1, 1, 2, 2, 2), 2, return_indices=True)

CASES = {  # fn, valid arguments, refused arguments of the same shapes
    "put past the end": (lambda x, i: x.put(i, T([1.0, 2.0])), (X4, T([0, -4])), (X4, T([0, 4]))),
    "put_ below -numel": (lambda x, i: x.clone().put_(i, T([1.0, 2.0]), accumulate=True),
                          (X4, T([1, 3])), (X4, T([1, -5]))),
    "masked_scatter short of source": (lambda m, s: X4.masked_scatter(m, s),
                                       (T([True, True, False, False]), T([1.0, 2.0])),
                                       (T([True, True, False, True]), T([1.0, 2.0]))),
    "max_unpool2d index past the plane": (lambda y, i: F.max_unpool2d(y, i, 2), POOLED_2D,
                                          (POOLED_2D[0], torch.full_like(POOLED_2D[1], 16))),
    "max_unpool3d negative index": (lambda y, i: F.max_unpool3d(y, i, 2), POOLED_3D,
                                    (POOLED_3D[0], torch.full_like(POOLED_3D[1], -1))),
    "embedding_bag max mode index": (lambda i: F.embedding_bag(i, W, mode="max"),
                                     (T([[0, 1], [2, 3]]),), (T([[0, 1], [2, 5]]),)),
    "embedding_bag per-sample weights index": (
        lambda i: F.embedding_bag(i, W, T([0, 2]), mode="sum", per_sample_weights=T([1.0, 2.0, 3.0])),
        (T([0, 1, 2]),), (T([0, 5, 2]),)),
    "embedding_bag offsets past the input": (lambda o: F.embedding_bag(T([0, 1, 2, 3]), W, o),
                                             (T([0, 4]),), (T([0, 5]),)),
    "embedding_bag offsets not from 0": (lambda o: F.embedding_bag(T([0, 1, 2, 3]), W, o),
                                         (T([0, 2]),), (T([1, 2]),)),
    "multilabel_margin_loss target past the classes": (
        lambda t: F.multilabel_margin_loss(T([[0.1, 0.2, 0.4, 0.8], [0.3, -0.2, 0.5, 0.1]]), t),
        (T([[3, 0, -1, 1], [1, 2, 3, -1]]),), (T([[4, 0, -1, 1], [1, 2, 3, -1]]),)),
    "index_reduce index past the dim": (
        lambda i: torch.ones(3).index_reduce(0, i, T([2.0, 3.0]), "prod"), (T([0, 2]),), (T([0, 3]),)),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", CASES)
def test_data_eager_refuses_raises_after_valid_calls_replayed(backend, case):
    fn, valid, refused = CASES[case]
    compiled = minidynamo.optimize(backend)(fn)
    for _ in range(2):
        torch.testing.assert_close(compiled(*valid), fn(*valid))
    with pytest.raises((RuntimeError, IndexError)) as eager_error:
        fn(*refused)
    with pytest.raises(type(eager_error.value)):
        compiled(*refused)
    torch.testing.assert_close(compiled(*valid), fn(*valid))


@pytest.mark.parametrize("backend", BACKENDS)
def test_embedding_bag_by_max_of_negative_values_is_eagers(backend):
    """torch_xla's lowering starts each bag's maximum at 0: a column of negative values came back
    0 (probe AF r5); such graphs run eagerly."""
    fn = lambda i: F.embedding_bag(i, W, mode="max")     # noqa: E731
    bags = T([[0, 1], [2, 3]])                          # rows of W below 7 are all negative
    for _ in range(2):
        torch.testing.assert_close(minidynamo.optimize(backend)(fn)(bags), fn(bags))


@pytest.mark.parametrize("backend", BACKENDS)
def test_multilabel_margin_loss_stops_at_a_targets_first_minus_one(backend):
    """PyTorch's decomposition of multilabel_margin_loss counts the slots after a row's first -1
    as class 0 (1.39 where eager gives 0.59, probe AF r9); the op is not traced as it."""
    x = T([[0.1, 0.2, 0.4, 0.8], [0.3, -0.2, 0.5, 0.1]])
    target = T([[1, -1, 0, 0], [2, 3, -1, 0]])
    compiled = minidynamo.optimize(backend)(F.multilabel_margin_loss)
    for _ in range(2):
        torch.testing.assert_close(compiled(x, target), F.multilabel_margin_loss(x, target))


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_unbatched_multi_margin_loss_keeps_eagers_shape(backend):
    """PyTorch's decomposition gives an unbatched input's per-sample loss the shape (1,) where
    eager's is 0-dim (probe AG r2); the op is not traced as it."""
    fn = lambda x, t: F.multi_margin_loss(x, t, reduction="none")     # noqa: E731
    x, target = T([-4.8, -7.6, -0.6, -1.5, -2.0]), T(1)
    compiled = minidynamo.optimize(backend)(fn)
    for _ in range(2):
        got, expected = compiled(x, target), fn(x, target)
        assert got.shape == expected.shape == ()
        torch.testing.assert_close(got, expected)

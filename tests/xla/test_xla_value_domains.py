"""Values a loss's CPU kernel validates raise eager's error on the XLA backends too.

``binary_cross_entropy`` raises for an input or target outside [0, 1]; ``nll_loss`` (so
``cross_entropy``) and ``multi_margin_loss`` for a class index outside the classes. XLA
computed NaN, or a loss from a clamped index. The graph computes whether its data is in the
domain (``index_check._DOMAINS``, one flag with the index checks): a call that is not runs
eagerly, which raises; valid data keeps replaying.
"""

import pytest
import torch
import torch.nn.functional as F

import minidynamo
from tests.xla.xla_testing import BACKENDS

T = torch.tensor
LOGITS = T([[0.2, -1.0, 0.5], [1.5, 0.1, -0.3]])

OUT_OF_DOMAIN = {
    "bce input above 1": (lambda x, y: F.binary_cross_entropy(x, y), (T([0.5, 1.5]), T([0., 1.]))),
    "bce input NaN": (lambda x, y: F.binary_cross_entropy(x, y), (T([0.5, float("nan")]), T([0., 1.]))),
    "bce target above 1": (lambda x, y: F.binary_cross_entropy(x, y), (T([0.5, 0.5]), T([0., 2.]))),
    "nll_loss class 5 of 3": (lambda x, t: F.nll_loss(x, t), (LOGITS, T([0, 5]))),
    "cross_entropy class -3": (lambda x, t: F.cross_entropy(x, t), (LOGITS, T([0, -3]))),
    "multi_margin_loss class 7 of 3": (lambda x, t: F.multi_margin_loss(x, t), (LOGITS, T([0, 7]))),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", OUT_OF_DOMAIN)
def test_data_outside_a_losss_domain_raises_eagers_error(backend, case):
    fn, args = OUT_OF_DOMAIN[case]
    with pytest.raises((RuntimeError, IndexError)) as eager_error:
        fn(*args)
    with pytest.raises(type(eager_error.value)):
        minidynamo.optimize(backend)(fn)(*args)


@pytest.mark.parametrize("backend", BACKENDS)
def test_valid_targets_and_ignore_index_still_replay_eagers_loss(backend):
    compiled = minidynamo.optimize(backend)(lambda x, t: F.cross_entropy(x, t, ignore_index=-100))
    for target in (T([0, 2]), T([1, -100]), T([2, 1])):
        torch.testing.assert_close(compiled(LOGITS, target), F.cross_entropy(LOGITS, target, ignore_index=-100))
    with pytest.raises(IndexError):
        compiled(LOGITS, T([3, 0]))

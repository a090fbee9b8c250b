"""A graph that enters an inference-mode block runs eagerly on the XLA backends: eager's results
made in the block are inference tensors, a replayed program's would not be."""

import pytest
import torch

import minidynamo
import xla_bridge
from tests.xla.xla_testing import BACKENDS, fresh  # noqa: F401  (fixture)


def _block(x):
    with torch.inference_mode():
        y = x * 2
    return y + 1, y


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_inference_block_runs_eagerly_with_eagers_results(backend):
    opt = minidynamo.optimize(backend)(_block)
    x = torch.randn(3)
    for _ in range(2):
        actual, expected = opt(x), _block(x)
        for a, e in zip(actual, expected):
            assert a.is_inference() == e.is_inference()
            torch.testing.assert_close(a, e)
    assert any("inference-mode block" in reason for reason in xla_bridge.counters.reasons)

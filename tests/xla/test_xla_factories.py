"""A factory without a device (``torch.zeros(3, 4)``, ``torch.full``) in a host program means the
host, which the bridge runs on the device: ``device_redirect`` gives it the device the graph runs
on (factories whose values are exact anywhere; ``linspace`` and random ones stay host constants). Before, such a graph ran eagerly on both XLA backends (its meta run mixed a CPU tensor
with meta ones: "Tensor on device meta is not on the expected device cpu").
"""

import pytest
import torch

import minidynamo
import xla_bridge
from tests.xla.xla_testing import BACKENDS, fresh  # noqa: F401  (autouse: caches and counters reset)

PROGRAMS = {
    "zeros + x": lambda w, i: torch.zeros(3, 4) + w * 2,
    "scatter_add into zeros": lambda w, i: torch.zeros(3, 4).scatter_add(0, i, w),
    "ones(4) * x": lambda w, i: torch.ones(4) * w,
    "ones.cumsum * x": lambda w, i: torch.ones(3, 4).cumsum(0) * w,
    "full and eye": lambda w, i: torch.full((3, 4), 0.5) * w + torch.eye(3, 4),
}
INDEX = torch.tensor([[0, 1, 2, 0], [1, 1, 1, 1], [2, 0, 0, 2]])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("case", PROGRAMS)
def test_a_device_less_factory_replays_on_the_device(backend, grad, case):
    xla_bridge.device.xla_device()          # torch_xla loaded before the first backward
    fn = PROGRAMS[case]
    w = torch.randn(3, 4, requires_grad=grad)
    out, expected = minidynamo.optimize(backend)(fn)(w, INDEX), fn(w, INDEX)
    torch.testing.assert_close(out, expected)
    if grad:
        torch.testing.assert_close(torch.autograd.grad(out.sum(), w)[0], torch.autograd.grad(expected.sum(), w)[0])
    assert not [r for r in xla_bridge.counters.reasons if "eager" in r], xla_bridge.counters.reasons

"""A slice bound below minus the dimension (``x[-4095:]`` of 8 rows) is 0 for eager, and was
refused by torch_xla's lowering ("Value out of range"): Mistral's sliding-window cache keeps
``full[:, :, -sliding_window + 1:, :]``, which made its training fall back (the eager re-run on
the device refused it too). ``eager_faithful`` traces ``slice`` (its functional copy, its
backward, its scatter) with such a bound read as eager reads it."""

import pytest
import torch

import minidynamo
import xla_bridge
from tests.xla.xla_testing import BACKENDS, assert_same, fresh  # noqa: F401 (the fixture)
from xla_bridge import device as dev


def sliced(x, y):
    a = x[:, -4095:] * 2          # the whole of dim 1
    b = x[-100:-50] + 1           # empty
    y[:, -9000:2] = 1.0           # a store through such a slice
    return a, b, y * 3


def sliced_loss(w):
    return (w[:, -4095:] * 3).sum() + w[-50:1].sum()


@pytest.mark.parametrize("backend", BACKENDS)
def test_slices_past_the_start_answer_as_eager(backend):
    compiled = minidynamo.optimize(backend)(sliced)
    for _ in range(2):
        x = torch.randn(3, 5)
        y_eager, y_device = torch.zeros(3, 5), torch.zeros(3, 5, device=dev.xla_device())
        expected = sliced(x, y_eager)
        got = compiled(x.to(dev.xla_device()), y_device)
        for g, e in zip(got, expected):
            assert_same(g.cpu(), e)
        assert_same(y_device.cpu(), y_eager)
    assert not any("runs eagerly" in r for r in xla_bridge.counters.as_dict()["reasons"])


def test_the_backward_of_a_slice_past_the_start():
    # trace_once's training path traces the backward too; trivial's backward is torch_xla's
    # own autograd (its slice_backward still refuses such a bound, as in plain torch_xla)
    compiled = minidynamo.optimize("torchxla_trace_once")(sliced_loss)
    for _ in range(2):
        w = torch.randn(2, 4, requires_grad=True)
        w_device = w.detach().to(dev.xla_device()).requires_grad_()
        sliced_loss(w).backward()
        compiled(w_device).backward()
        assert_same(w_device.grad.cpu(), w.grad)
    assert not any("runs eagerly" in r for r in xla_bridge.counters.as_dict()["reasons"])

"""A graph traced in a CPU autocast region (``tracer/autocast.py``) on the XLA backends: host
inputs run on the host, where the region casts as eager does (the device would not: a region acts
on tensors of its own device); device inputs, which the region leaves alone, run on the device."""

import pytest
import torch

import minidynamo
import xla_bridge
from xla_bridge import device as dev
from tests.xla.xla_testing import BACKENDS, assert_same, fresh, to_xla  # noqa: F401  (fixture)


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.LayerNorm(6), torch.nn.ReLU(), torch.nn.Linear(6, 2))


@pytest.mark.parametrize("backend", BACKENDS)
def test_host_inputs_in_a_region_are_cast_as_eager_casts(backend):
    model, x = _model(), torch.randn(3, 4)
    opt = minidynamo.optimize(backend)(model)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected = model(x)
        for _ in range(2):
            actual = opt(x)
            assert actual.dtype == expected.dtype == torch.bfloat16
            assert_same(actual, expected)
    assert any("autocast" in reason for reason in xla_bridge.counters.reasons)


@pytest.mark.parametrize("backend", BACKENDS)
def test_device_inputs_in_a_cpu_region_stay_on_the_device(backend):
    model, x = _model(), torch.randn(3, 4)
    device_model, device_x = model.to(dev.xla_device()), to_xla(x)
    expected = device_model(device_x)
    opt = minidynamo.optimize(backend)(device_model)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        actual = opt(device_x)
    assert actual.dtype == expected.dtype == torch.float32
    assert_same(actual, expected)
    assert not any("autocast" in reason for reason in xla_bridge.counters.reasons), xla_bridge.counters.reasons

"""Small models through both backends, checked against the XLA lazy baseline."""

import copy
import operator

import pytest
import torch
import torch.nn as nn
import torch.fx as fx

import xla_bridge
from xla_bridge import device as dev
from tests.xla.models import SmallCNN, TransformerBlock
from tests.xla.xla_testing import BACKENDS, assert_same, compile_with, xla_lazy_baseline


def module_with_buffers() -> fx.GraphModule:
    """Training-mode batch norm (updates its running stats) and a buffer read and bumped in
    place through get_attr nodes, as a graph builder would emit them."""
    root = nn.Module()
    root.bn = nn.BatchNorm1d(4)
    root.register_buffer("calls", torch.zeros(()))
    graph = fx.Graph()
    x = graph.placeholder("x")
    calls = graph.get_attr("calls")
    graph.call_method("add_", (calls, 1))
    normed = graph.call_module("bn", (x,))
    shift = graph.call_function(operator.mul, (calls, 0.5))
    graph.output(graph.call_function(operator.add, (normed, shift)))
    return fx.GraphModule(root, graph).train()


def update_in_place(x, y):
    x.mul_(2)
    y.add_(x)
    return x + y, y


def run_twice(backend, program, make_inputs):
    torch.manual_seed(0)
    compiled = compile_with(backend, program, make_inputs())
    return [compiled(*make_inputs()) for _ in range(2)]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("model, shape", [(SmallCNN, (2, 3, 16, 16)),
                                          (TransformerBlock, (2, 5, 16))])
def test_model_matches_xla_baseline(backend, model, shape):
    torch.manual_seed(0)
    module = model().eval()
    x = torch.randn(shape)
    expected = xla_lazy_baseline(module, [x])
    with torch.no_grad():
        compiled = compile_with(backend, module, [x])
        assert_same(compiled(x), expected)
        assert_same(compiled(x), expected)        # the second call (a replay for trace_once)
        other = torch.randn(shape)
        assert_same(compiled(other), xla_lazy_baseline(module, [other]))


@pytest.mark.parametrize("backend", BACKENDS)
def test_in_place_updates_reach_the_callers_tensors(backend):
    x, y = torch.randn(3), torch.randn(3)
    expected_out = xla_lazy_baseline(update_in_place, [x.clone(), y.clone()])
    eager_x, eager_y = x.clone(), y.clone()
    update_in_place(eager_x, eager_y)
    compiled = compile_with(backend, update_in_place, [x.clone(), y.clone()])
    out = compiled(x, y)
    assert_same(out, expected_out)
    assert out[1] is y                         # the returned input is the caller's tensor
    torch.testing.assert_close(x, eager_x)
    torch.testing.assert_close(y, eager_y)
    compiled(x, y)                             # and again, from the updated values
    update_in_place(eager_x, eager_y)
    torch.testing.assert_close(y, eager_y)


@pytest.mark.parametrize("backend", BACKENDS)
def test_buffers_updated_in_place_match_eager(backend):
    torch.manual_seed(0)
    module = module_with_buffers()
    baseline = copy.deepcopy(module).to(dev.xla_device())
    reference = copy.deepcopy(module)
    inputs = [torch.randn(6, 4) for _ in range(3)]
    with torch.no_grad():
        compiled = compile_with(backend, module, inputs[:1])
        for x in inputs:
            expected = baseline(x.to(dev.xla_device()))
            dev.torch_xla().sync()
            assert_same(compiled(x), expected.cpu())
            reference(x)
    # The buffers as eager leaves them: plain PyTorch/XLA's batch norm updates running_var with
    # the biased variance, the bridge traces eager's update (eager_faithful) in a call_module too
    for name, buffer in reference.named_buffers():
        torch.testing.assert_close(module.get_buffer(name), buffer)
    torch.testing.assert_close(module.get_buffer("calls"), baseline.get_buffer("calls").cpu())


@pytest.mark.parametrize("backend", BACKENDS)
def test_graph_the_device_cannot_run_falls_back_to_eager(backend):
    def mixes_devices(x):
        return x.to_sparse().to_dense() * 2            # XLA has no sparse tensors

    x = torch.randn(3)
    compiled = compile_with(backend, mixes_devices, [x])
    assert_same(compiled(x), mixes_devices(x))
    assert "graph runs eagerly" in xla_bridge.counters.reasons[-1]

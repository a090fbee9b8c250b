"""minidynamo + xla_bridge end to end: ``minidynamo.optimize("torchxla_...")(model)``.

The oracles: the XLA lazy baseline (the model run lazily on the device) for values, eager
PyTorch for in-place effects on the caller's tensors, and the counters of both layers plus
torch_xla's own metrics for "what ran" (a replay neither traces nor compiles).
"""

import copy

import pytest
import torch
import torch.nn as nn
import torchvision

import minidynamo
import xla_bridge
from xla_bridge import device as dev
from tests.xla.models import SmallCNN, TransformerBlock
from tests.xla.xla_testing import BACKENDS, assert_same, fresh, xla_lazy_baseline, xla_work  # noqa: F401 (fresh: autouse)


def assert_compiled_not_eager():
    """Neither layer fell back: the values really came from the XLA device."""
    assert minidynamo.counters["fallback_reasons"] == []
    assert xla_bridge.counters.fallbacks == 0, xla_bridge.counters.reasons


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("model, shape", [(SmallCNN, (2, 3, 16, 16)),
                                          (TransformerBlock, (2, 5, 16))])
def test_models_match_the_xla_baseline(backend, model, shape):
    torch.manual_seed(0)
    module = model().eval()
    optimized = minidynamo.optimize(backend)(module)
    with torch.no_grad():
        for _ in range(3):              # the first call compiles, the others hit the cache
            x = torch.randn(shape)
            assert_same(optimized(x), xla_lazy_baseline(module, [x]))
    assert minidynamo.counters["compiles"] == 1
    assert_compiled_not_eager()


def update_inputs_in_place(x, y):
    x.mul_(2)
    y.add_(x)
    return x + y


@pytest.mark.parametrize("backend", BACKENDS)
def test_in_place_updates_of_inputs_reach_the_caller(backend):
    optimized = minidynamo.optimize(backend)(update_inputs_in_place)
    x, y = torch.randn(3), torch.randn(3)
    eager_x, eager_y = x.clone(), y.clone()
    for _ in range(3):                  # each call starts from the previous call's updates
        out = optimized(x, y)
        expected = update_inputs_in_place(eager_x, eager_y)
        torch.testing.assert_close(out, expected)
        torch.testing.assert_close((x, y), (eager_x, eager_y))
    assert_compiled_not_eager()


@pytest.mark.parametrize("backend", BACKENDS)
def test_buffers_updated_by_training_mode_batch_norm(backend):
    """Eager is the oracle, running variance included: torch_xla's batch norm lowering updates
    it with the biased estimate (the plain lazy baseline does), the bridge traces PyTorch's
    definition (X34)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU()).train()
    eager = copy.deepcopy(model)
    optimized = minidynamo.optimize(backend)(model)
    with torch.no_grad():
        for _ in range(3):
            x = torch.randn(2, 3, 8, 8)
            assert_same(optimized(x), eager(x))
    for (name, buffer), expected in zip(model.named_buffers(), eager.buffers()):
        torch.testing.assert_close(buffer, expected, msg=name)
    assert model[1].num_batches_tracked.item() == 3
    assert_compiled_not_eager()


def test_weights_updated_in_place_or_replaced_are_seen_without_recompiling():
    torch.manual_seed(0)
    layer = nn.Linear(4, 3)
    optimized = minidynamo.optimize("torchxla_trace_once")(layer)
    x = torch.randn(2, 4)
    with torch.no_grad():
        optimized(x)
        layer.weight.mul_(-1)                                    # same tensor, new _version
        assert_same(optimized(x), layer(x))
        layer.bias = nn.Parameter(torch.randn(3))                # a new tensor object
        assert_same(optimized(x), layer(x))
    assert minidynamo.counters["compiles"] == 1
    assert xla_bridge.counters.compiles == 1 and xla_bridge.counters.retraces == 0
    assert xla_bridge.counters.replays == 3
    assert_compiled_not_eager()


def test_a_new_shape_fails_the_guards_and_builds_a_second_graph():
    torch.manual_seed(0)
    module = TransformerBlock().eval()
    optimized = minidynamo.optimize("torchxla_trace_once")(module)
    short, long = torch.randn(1, 4, 16), torch.randn(1, 7, 16)
    with torch.no_grad():
        optimized(short)
        assert_same(optimized(long), xla_lazy_baseline(module, [long]))
        assert minidynamo.counters["compiles"] == 2 and xla_bridge.counters.compiles == 2
        assert "shape" in minidynamo.counters["recompile_reasons"][-1]
        assert_same(optimized(short), xla_lazy_baseline(module, [short]))   # both entries kept
    assert minidynamo.counters["compiles"] == 2
    assert_compiled_not_eager()


def test_replay_neither_traces_nor_compiles_while_trivial_traces_every_call():
    torch.manual_seed(0)
    module = SmallCNN().eval()
    x = torch.randn(2, 3, 16, 16)
    replayed = minidynamo.optimize("torchxla_trace_once")(module)
    trivial = minidynamo.optimize("torchxla_trivial")(module)
    with torch.no_grad():
        replayed(x), trivial(x)                          # both compiled, caches warm
        before = xla_bridge.counters.as_dict()
        for _ in range(2):
            assert xla_work(lambda: replayed(x)) == {
                "lazy_tracing": 0, "compiles": 0, "cached_graph_runs": 1}
            work = xla_work(lambda: trivial(x))
            assert work["lazy_tracing"] > 0 and work["cached_graph_runs"] == 0
    after = xla_bridge.counters
    assert (after.replays - before["replays"], after.traces - before["traces"]) == (2, 2)
    assert (after.compiles, after.retraces) == (before["compiles"], before["retraces"])
    assert_compiled_not_eager()


def test_resnet18_at_32x32_replays():
    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=10).eval()
    optimized = minidynamo.optimize("torchxla_trace_once")(model)
    x = torch.randn(1, 3, 32, 32)
    with torch.no_grad():
        optimized(x)
        work = xla_work(lambda: assert_same(optimized(x), xla_lazy_baseline(model, [x]),
                                            atol=1e-4, rtol=1e-3))
    assert work["cached_graph_runs"] >= 1
    assert xla_bridge.counters.compiles == 1 and xla_bridge.counters.replays == 2
    assert_compiled_not_eager()


def transpose_and_shift(x):
    return x.t(), x + 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_output_viewing_the_input_shares_its_memory(backend):
    optimized = minidynamo.optimize(backend)(transpose_and_shift)
    x = torch.randn(2, 3)
    transposed, shifted = optimized(x)
    assert_same((transposed, shifted), transpose_and_shift(x))
    assert transposed.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    assert_compiled_not_eager()


@pytest.mark.parametrize("backend", BACKENDS)
def test_one_tensor_passed_twice_to_a_function_writing_it_in_place(backend):
    def write_x_read_y(x, y):
        x.add_(1)
        return y * 2

    optimized = minidynamo.optimize(backend)(write_x_read_y)
    optimized(torch.zeros(3), torch.zeros(3))            # compiled for distinct tensors
    a, expected = torch.ones(3), torch.ones(3)
    assert_same(optimized(a, a), write_x_read_y(expected, expected))
    assert_same(a, expected)
    assert "shares memory" in xla_bridge.counters.reasons[-1]


class WithState(nn.Module):
    """A parameter, a buffer and a plain tensor attribute, all read by minidynamo as inputs."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 3)
        self.register_buffer("shift", torch.arange(3.0))
        self.scale = torch.full((3,), 2.0)

    def forward(self, x):
        return self.lin(x) * self.scale + self.shift


@pytest.mark.parametrize("backend", BACKENDS)
def test_host_data_changed_without_a_version_bump_is_never_stale(backend):
    """Every write below leaves ``_version`` alone; each is seen on the next call."""
    torch.manual_seed(0)
    model = WithState().eval()
    optimized = minidynamo.optimize(backend)(model)
    x = torch.randn(2, 4)
    writes = [lambda: x.numpy().__setitem__(slice(None), 1.5),           # a loader's refill
              lambda: x.data.copy_(torch.randn(2, 4)),
              lambda: model.lin.weight.data.fill_(0.5),
              lambda: model.lin.weight.detach().numpy().__setitem__(slice(None), -0.25),
              lambda: model.lin.bias.data.copy_(torch.randn(3)),
              lambda: model.shift.numpy().__setitem__(slice(None), 7.0),
              lambda: model.scale.data.mul_(-3)]
    with torch.no_grad():
        assert_same(optimized(x), model(x))
        for write in writes:
            write()
            assert_same(optimized(x), model(x))
    assert minidynamo.counters["compiles"] == 1
    assert_compiled_not_eager()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_model_on_the_device_with_host_inputs(backend):
    """The fast path: weights live on the device, the host input is copied every call."""
    torch.manual_seed(0)
    model = WithState().eval()
    on_device = copy.deepcopy(model).to(dev.xla_device())
    on_device.scale = on_device.scale.to(dev.xla_device())
    optimized = minidynamo.optimize(backend)(on_device)
    x = torch.randn(2, 4)
    with torch.no_grad():
        assert_same(dev.to_host([optimized(x.to(dev.xla_device()))])[0], model(x))
        x.numpy()[:] = 0.5
        assert_same(dev.to_host([optimized(x.to(dev.xla_device()))])[0], model(x))
    assert_compiled_not_eager()

"""Replay probes: what the caller sees of an output's layout is what eager gives.

The bridge learns an output's strides from one run of the graph on meta tensors; meta kernels
do not always lay out a result as the host's own kernels do (a channels_last input kept by
``group_norm`` on the CPU, made contiguous by its meta kernel; ``2 ** x`` the other way round).
"""

import pytest
import torch
import torch.nn.functional as F

import minidynamo
import xla_bridge
from tests.xla.xla_testing import fresh  # noqa: F401  (autouse: empty caches and counters)
from xla_bridge import device as dev


@pytest.fixture(autouse=True, scope="module")
def _device():
    dev.xla_device()


def _channels_last(seed):
    torch.manual_seed(seed)
    return torch.randn(2, 3, 5, 5).to(memory_format=torch.channels_last)


def _same_as_eager(fn, backend="torchxla_trace_once", calls=3):
    compiled = minidynamo.optimize(backend)(fn)
    for seed in range(calls):
        x = _channels_last(seed)
        expected, actual = fn(x), compiled(x)
        torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1e-4)
        assert actual.stride() == expected.stride()
    assert xla_bridge.counters.fallbacks == 0


@pytest.mark.parametrize("backend", ["torchxla_trace_once", "torchxla_trivial"])
def test_group_norm_of_a_channels_last_batch_stays_channels_last(backend):
    def norm(x):
        return F.group_norm(x, 3).relu()       # relu keeps what group_norm gave

    _same_as_eager(norm, backend)
    assert norm(_channels_last(0)).is_contiguous(memory_format=torch.channels_last)


def test_shuffles_and_reflection_padding_of_channels_last_keep_eager_strides():
    _same_as_eager(lambda x: x.roll(1, 1))
    minidynamo.reset()
    _same_as_eager(lambda x: F.pixel_shuffle(torch.cat([x, x, x, x], 1), 2))
    minidynamo.reset()
    _same_as_eager(lambda x: F.pad(x, (1, 1, 1, 1), mode="reflect"))


def test_a_scalar_to_the_power_of_a_channels_last_tensor_is_contiguous_as_in_eager():
    _same_as_eager(lambda x: 2 ** x)
    assert (2 ** _channels_last(0)).is_contiguous()


def test_global_pooling_of_channels_last_keeps_the_strides_of_its_size_one_dims():
    # eager: (3, 1, 3, 3); a compact tensor of that shape has (3, 1, 1, 1)
    _same_as_eager(lambda x: F.adaptive_avg_pool2d(x, 1))
    _same_as_eager(lambda x: x.mean((2, 3), keepdim=True))


@pytest.mark.parametrize("bits", [lambda x: x.view(torch.int32), lambda x: x[1:].view(torch.int32),
                                  lambda x: x.view(torch.float64)],
                         ids=["same size", "at an offset", "larger"])
def test_an_argument_reinterpreted_as_another_dtype_comes_back_as_that_view(bits):
    compiled = minidynamo.optimize("torchxla_trace_once")(bits)
    for seed in range(3):
        torch.manual_seed(seed)
        x = torch.randn(3, 4)
        expected, actual = bits(x), compiled(x)
        assert actual.dtype == expected.dtype and actual.shape == expected.shape
        assert actual.stride() == expected.stride() and torch.equal(actual, expected)
        assert actual.data_ptr() == expected.data_ptr()   # still a view of x: a write shows through
        x.zero_()
        assert not actual.any()
    assert xla_bridge.counters.fallbacks == 0


def _runs_of_the_layout_check(monkeypatch):
    import xla_bridge.aliasing as aliasing

    runs, check = [], aliasing._layouts_as_eager
    monkeypatch.setattr(aliasing, "_layouts_as_eager", lambda *a: (runs.append(1), check(*a))[1])
    return runs


def test_a_linear_layer_needs_no_eager_layout_run_and_a_shuffle_does(monkeypatch):
    """The eager run that corrects output layouts copies every host argument (the weights too):
    a transposed weight going into a matrix product, which lays out its result the same way
    whatever its inputs' strides, does not call for it; a channels_last shuffle does."""
    runs = _runs_of_the_layout_check(monkeypatch)
    linear = torch.nn.Linear(5, 4)
    compiled = minidynamo.optimize("torchxla_trace_once")(lambda x: torch.relu(linear(x)))
    x = torch.randn(3, 5)
    torch.testing.assert_close(compiled(x), torch.relu(linear(x)), atol=1e-5, rtol=1e-4)
    assert runs == []

    _same_as_eager(lambda x: F.pixel_shuffle(x.repeat(1, 4, 1, 1), 2))
    assert runs == [1]

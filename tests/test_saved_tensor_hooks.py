"""The program's saved-tensor hooks see what eager's ops save, and nothing else: not the
tracer's example values (meta tensors, while a frame is captured), not a device step's copies
(the XLA training paths run such a call eagerly).  ``torch.utils.checkpoint`` counts and
compares what a forward saves with what its recomputation saves, so it is the sharpest user."""

import pytest
import torch
from torch.utils.checkpoint import checkpoint

import minidynamo

BACKENDS = ["eager", "torchxla_trivial", "torchxla_trace_once"]


@pytest.fixture(autouse=True)
def _fresh():
    minidynamo.reset()
    yield
    minidynamo.reset()


def _device_if_needed(backend):
    if backend != "eager":
        from xla_bridge import device as dev
        dev.xla_device()


LAYER = torch.nn.Linear(4, 4)


def layer_then_relu(t):
    return LAYER(t).relu()


def checkpointed(x):
    return checkpoint(layer_then_relu, x, use_reentrant=False) * 2


def step(fn, x):
    LAYER.zero_grad()
    x = x.detach().requires_grad_()
    out = fn(x)
    out.sum().backward()
    return out.detach(), x.grad, LAYER.weight.grad.clone()


@pytest.mark.parametrize("backend", BACKENDS)
def test_checkpoint_without_reentry_trains_as_eager(backend):
    _device_if_needed(backend)
    optimized = minidynamo.optimize(backend)(checkpointed)
    for seed in range(3):                                  # first call, then cache hits
        x = torch.randn(3, 4, generator=torch.Generator().manual_seed(seed))
        for got, expected in zip(step(optimized, x), step(checkpointed, x)):
            assert torch.allclose(got, expected, atol=1e-6)


def sin_of_double(x):
    return (x * 2).sin()


@pytest.mark.parametrize("backend", BACKENDS)
def test_saved_tensor_hooks_see_what_eager_saves(backend):
    _device_if_needed(backend)
    x = torch.randn(3, requires_grad=True)

    def saved_while(fn):
        seen = []
        with torch.autograd.graph.saved_tensors_hooks(lambda t: seen.append((t.device.type, tuple(t.shape))) or t,
                                                      lambda t: t):
            fn(x).sum().backward()
        return seen

    expected = saved_while(sin_of_double)
    optimized = minidynamo.optimize(backend)(sin_of_double)
    assert saved_while(optimized) == expected              # the call that captures
    assert saved_while(optimized) == expected              # a cache hit

"""Helpers for the xla_bridge tests: the XLA lazy baseline (the oracle) and comparisons."""

import copy

import pytest
import torch
import torch.fx as fx
from torch.utils import _pytree as pytree

import minidynamo
import xla_bridge
from xla_bridge import device as dev

BACKENDS = ("torchxla_trivial", "torchxla_trace_once")


@pytest.fixture(autouse=True)
def fresh():
    """Empty caches and bridge counters around each test of a module that imports this."""
    minidynamo.reset()
    xla_bridge.reset_counters()
    yield
    minidynamo.reset()


def to_xla(tree):
    return pytree.tree_map_only(torch.Tensor, lambda v: v.to(dev.xla_device()), tree)


def to_cpu(tree):
    return pytree.tree_map_only(torch.Tensor, lambda v: v.cpu(), tree)


def xla_lazy_baseline(program, inputs):
    """What plain PyTorch/XLA computes: a device copy of the module (or the function) run lazily
    on device copies of the inputs, then synced; results on the CPU."""
    if isinstance(program, torch.nn.Module):
        program = copy.deepcopy(program).to(dev.xla_device())
    with torch.no_grad():
        out = program(*to_xla(inputs))
    dev.torch_xla().sync()
    return to_cpu(out)


def assert_same(actual, expected, atol=1e-5, rtol=1e-4):
    """Equal structure; tensors close and on the same device type; other values equal."""
    actual_leaves, actual_spec = pytree.tree_flatten(actual)
    expected_leaves, expected_spec = pytree.tree_flatten(expected)
    assert actual_spec == expected_spec
    for a, e in zip(actual_leaves, expected_leaves):
        if isinstance(e, torch.Tensor):
            assert isinstance(a, torch.Tensor) and a.device.type == e.device.type
            torch.testing.assert_close(a.cpu(), e.cpu(), atol=atol, rtol=rtol)
        else:
            assert a == e


def compile_with(backend_name, program, inputs):
    """symbolic_trace the program and compile it with the named xla_bridge backend."""
    import xla_bridge
    gm = program if isinstance(program, fx.GraphModule) else fx.symbolic_trace(program)
    return getattr(xla_bridge, backend_name)(gm, list(inputs))


def xla_counter(name: str) -> int:
    return dev.xlac()._xla_counter_value(name) or 0


def xla_metric_samples(name: str) -> int:
    data = dev.xlac()._xla_metric_data(name)
    return data[0] if data else 0


def xla_work(run) -> dict:
    """How torch_xla's metrics move while ``run()`` executes."""
    from torch_xla.debug import metrics

    def sample():
        traced = metrics.metric_data("LazyTracing")
        return {"lazy_tracing": traced[0] if traced else 0,
                "compiles": (metrics.counter_value("UncachedCompile") or 0)
                + (metrics.counter_value("CachedCompile") or 0),
                "cached_graph_runs": (metrics.metric_data("RunCachedGraphOutputData") or [0])[0]}

    before = sample()
    run()
    return {k: v - before[k] for k, v in sample().items()}

"""bench.own_time: the runtime stand-in answers like the runtime and is always removed."""

import pytest
import torch
import torch.fx as fx

import xla_bridge
from bench import own_time
from xla_bridge import device as dev


def test_the_stand_in_answers_with_the_real_results_and_is_removed_even_on_error():
    x = torch.randn(2, 3).to(dev.xla_device())
    compiled = xla_bridge.torchxla_trace_once(fx.symbolic_trace(lambda x: x * 2 + 1), [x])
    real = dev.xlac()._run_cached_graph
    with torch.no_grad(), pytest.raises(KeyError):
        with own_time.runtime_stand_in() as stand_in:
            first, second = compiled(x), compiled(x)
            raise KeyError("leaving the block early")
    assert dev.xlac()._run_cached_graph is real
    assert len(stand_in.answers) == 1            # one graph, its result computed once
    torch.testing.assert_close(first.cpu(), x.cpu() * 2 + 1)
    torch.testing.assert_close(second.cpu(), first.cpu())


def test_own_seconds_leaves_out_the_runtime():
    x = torch.randn(2, 3).to(dev.xla_device())
    compiled = xla_bridge.torchxla_trace_once(fx.symbolic_trace(lambda x: x * 2 + 1), [x])
    with torch.no_grad():
        seconds = own_time.own_seconds(lambda: compiled(x), calls=20, loops=2)
    assert 0 < seconds < 0.01

"""A TorchFunctionMode or TorchDispatchMode active around a call sees every op of an eager run
and may change it (here: ``sin`` becomes ``cos``).  A program replayed by hash, or a lazy trace, bypasses it, so
the XLA backends run such calls eagerly, and their one-time traces record the graph's own ops
whatever mode is active while they run (the cached program then serves calls without it)."""

import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

import minidynamo
from xla_bridge import device as dev
from tests.xla.xla_testing import BACKENDS


class SinIsCos(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        swapped = {torch.sin: torch.cos, torch.Tensor.sin: torch.Tensor.cos}
        return swapped.get(func, func)(*args, **(kwargs or {}))


class SinIsCosBelowAutograd(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.aten.sin.default:
            func = torch.ops.aten.cos.default
        return func(*args, **(kwargs or {}))


def doubled_sine(x):
    return (x * 2).sin() + 1


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("on_device", [False, True], ids=["host", "device"])
@pytest.mark.parametrize("first_under_mode", [True, False], ids=["compiled under the mode", "compiled without"])
@pytest.mark.parametrize("mode", [SinIsCos, SinIsCosBelowAutograd], ids=["function mode", "dispatch mode"])
def test_a_mode_around_a_call_is_honoured(backend, on_device, first_under_mode, mode):
    minidynamo.reset()
    x = torch.randn(3)
    if on_device:
        x = x.to(dev.xla_device())
    with mode():
        expected_with = doubled_sine(x).cpu()
    expected_without = doubled_sine(x).cpu()
    optimized = minidynamo.optimize(backend)(doubled_sine)
    order = [True, False, True, False] if first_under_mode else [False, True, False, True]
    for with_mode in order:
        if with_mode:
            with mode():
                got = optimized(x).cpu()
        else:
            got = optimized(x).cpu()
        torch.testing.assert_close(got, expected_with if with_mode else expected_without)
    minidynamo.reset()

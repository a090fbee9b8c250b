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


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("first_dual", [True, False], ids=["compiled on a dual", "compiled without"])
def test_forward_mode_ad_keeps_its_tangents(backend, first_dual):
    """A dual tensor's tangent flows through eager ops (forward-mode AD); an XLA program carries
    none, so a call made while a dual level is open runs eagerly."""
    import torch.autograd.forward_ad as fwAD

    minidynamo.reset()
    optimized = minidynamo.optimize(backend)(doubled_sine)
    x, tangent = torch.tensor([1.0, 2.0, 3.0]), torch.tensor([1.0, 0.5, -1.0])
    for dual in [first_dual, not first_dual, first_dual]:
        if not dual:
            torch.testing.assert_close(optimized(x), doubled_sine(x))
            continue
        with fwAD.dual_level():
            primal, got = fwAD.unpack_dual(optimized(fwAD.make_dual(x, tangent)))
            expected = fwAD.unpack_dual(doubled_sine(fwAD.make_dual(x, tangent)))
        assert got is not None
        torch.testing.assert_close(primal, expected.primal)
        torch.testing.assert_close(got, expected.tangent)
    minidynamo.reset()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("registered", ["before the first call", "after it"])
def test_a_global_module_hook_sees_the_programs_modules_only(backend, registered):
    """``register_module_forward_hook`` fires for every module called: the program's, never the
    graph modules the bridge runs (a hook that rewrites outputs would apply twice)."""
    from torch.nn.modules import module as module_hooks

    def run(model):
        seen, handle = [], None

        def double_output(module, args, output):
            seen.append(type(module).__name__)
            return output * 2

        if registered == "before the first call":
            handle = module_hooks.register_module_forward_hook(double_output)
        try:
            for _ in range(2):
                model(torch.ones(2, 3))
            if handle is None:
                handle = module_hooks.register_module_forward_hook(double_output)
            seen.clear()
            return model(torch.ones(2, 3)).detach(), sorted(set(seen))
        finally:
            handle.remove()

    def make():
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Tanh(), torch.nn.Linear(3, 1))

    minidynamo.reset()
    expected, got = run(make()), run(minidynamo.optimize(backend)(make()))
    assert got[1] == expected[1]
    torch.testing.assert_close(got[0], expected[0])
    minidynamo.reset()


@pytest.mark.parametrize("backend", BACKENDS)
def test_torch_xlas_own_code_runs_unwatched_with_what_it_calls(backend):
    """torch_xla's GRU is a ``scan``, which traces its body (an fx graph) on lazy tensors: the
    hook leaves torch_xla's frames, and what they call, alone (compiling the body crashed)."""
    from torch_xla.experimental.gru import GRU

    minidynamo.reset()
    torch.manual_seed(0)
    gru = GRU(4, 6, batch_first=True).to(dev.xla_device())

    def f(x):
        out, _ = gru(x)
        return out.sum(dim=1)

    x = torch.randn(2, 3, 4).to(dev.xla_device())
    expected = f(x).cpu()
    optimized = minidynamo.optimize(backend)(f)
    for _ in range(2):
        torch.testing.assert_close(optimized(x).cpu(), expected)
    with pytest.raises(RuntimeError, match="XLA tensors"):      # on the host, as eager raises
        optimized(torch.randn(2, 3, 4))
    minidynamo.reset()

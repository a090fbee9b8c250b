"""Arguments that differ in aliasing between calls, on the XLA backends (argument probe, see
tests/fuzz/FINDINGS.md). Eager PyTorch on the CPU is the oracle.

torch_xla looks a compiled graph up by a hash of its operations that does not say which of its
parameters are one device data. ``torchxla_trivial`` traced ``f(a, a, b)`` with one device copy
for both ``a`` positions; ``f(b, a, a)`` then hashed the same and ran the executable compiled for
the first sharing, on the second's data. Each position is now traced on data of its own."""

import pytest
import torch

import minidynamo
import xla_bridge
from tests.xla.xla_testing import BACKENDS, assert_same, to_xla
from xla_bridge import device as dev


def three_positions(x, y, z):
    return x.atan() + y.cos() + z.expm1()


def weighted_three_positions(w, x, y, z):
    return w * (x.atan() + y.cos() + z.expm1())


def patterns(a, b):
    """Calls whose arguments share differently: each has two distinct tensors."""
    return [(a, a, b), (b, a, a), (a, b, b), (a, b, a), (b, a, a)]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("where", ["host", "device"])
def test_one_tensor_at_several_positions_in_another_pattern_each_call(backend, where):
    a, b = torch.linspace(-1, 1, 5), torch.linspace(2, 3, 5)
    a_in, b_in = (a, b) if where == "host" else to_xla((a, b))
    optimized = minidynamo.optimize(backend)(three_positions)
    for call, expected in zip(patterns(a_in, b_in), patterns(a, b)):
        assert_same(optimized(*call).cpu(), three_positions(*expected))


@pytest.mark.parametrize("backend", BACKENDS)
def test_one_tensor_at_several_positions_on_the_training_path(backend):
    a, b = torch.linspace(-1, 1, 5), torch.linspace(2, 3, 5)
    optimized = minidynamo.optimize(backend)(weighted_three_positions)
    for call in patterns(a, b):
        w, w_eager = torch.ones(5, requires_grad=True), torch.ones(5, requires_grad=True)
        out = optimized(w, *call)
        expected = weighted_three_positions(w_eager, *call)
        assert_same(out, expected)
        out.sum().backward()
        expected.sum().backward()
        assert_same(w.grad, w_eager.grad)


def test_a_device_tensor_requiring_grad_at_two_positions_runs_eagerly_with_the_reason():
    def product(x, y):
        return x * y

    a = to_xla(torch.ones(3)).requires_grad_()
    minidynamo.optimize("torchxla_trivial")(product)(a, a)
    assert "hold the device data of an earlier argument" in xla_bridge.counters.reasons[-1]


def test_positions_sharing_data_names_every_repeat_after_the_first():
    a, b = to_xla((torch.ones(2), torch.zeros(2)))
    identities = dev.data_identities([a, 3, b, a, a.detach(), b])
    assert dev.positions_sharing_data(identities) == [3, 4, 5]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_write_to_a_parameters_data_is_seen_through_the_parameter_on_the_training_path(backend):
    def write_first_read_second(x, y):
        x.add_(1)
        return y * 2

    optimized = minidynamo.optimize(backend)(write_first_read_second)
    assert_same(optimized(torch.zeros(3), torch.zeros(3)), torch.zeros(3))
    p, p_eager = torch.nn.Parameter(torch.ones(3)), torch.nn.Parameter(torch.ones(3))
    out = optimized(p.data, p)
    expected = write_first_read_second(p_eager.data, p_eager)
    assert_same(out, expected)
    assert_same(p.detach(), p_eager.detach())
    out.sum().backward()
    expected.sum().backward()
    assert_same(p.grad, p_eager.grad)


def test_the_eager_backend_moves_between_the_host_and_the_device_as_eager():
    def to_device(x, d):
        return x.to(d) * 2

    def to_host(x):
        return x.cpu() * 2

    def like(x, y):
        return x.to(y) * 2

    host = torch.randn(3)
    device = to_xla(host)
    for program, args in [(to_device, (host, device.device)), (to_host, (device,)), (like, (host, device))]:
        minidynamo.reset()
        out = minidynamo.optimize("eager")(program)(*args)
        expected = program(*args)
        assert out.device == expected.device
        assert_same(out.cpu(), expected.cpu())

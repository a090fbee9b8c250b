"""``t.data`` is not ``t.detach()``.  Both share ``t``'s memory and are cut from autograd, but
eager's ``.data`` gets a version counter of its own: an in-place write through it is invisible to
autograd's "modified by an inplace operation" check (the manual-SGD idiom
``p.data.add_(p.grad, alpha=-lr)``, clamping an activation's values in place).  A graph that
wrote through a ``detach()`` made ``backward()`` raise where eager does not, and bumped the
parameter's ``_version``.  Each test runs the program eagerly and compiled on equal copies."""

import pytest
import torch

import minidynamo
from xla_bridge import device

BACKENDS = ["eager", "torchxla_trivial", "torchxla_trace_once"]


@pytest.fixture(autouse=True, scope="module")
def device_backward():
    """torch_xla loaded before any backward runs, so the XLA backends' training paths are open
    (``xla_bridge.device.backward_on_device``): a write they missed would show."""
    device.xla_device()


def clamp_an_activation(x, w):
    h = torch.sigmoid(x @ w)
    h.data.clamp_(0.1, 0.9)          # backward's sigmoid formula reads the clamped values
    return (h * 2).sum()


def sgd_step(weights, lr):
    for w in weights:
        w.data.add_(w.grad, alpha=-lr)
    return weights[0].sum()


def halve_a_leaf_after_use(x, w):
    y = (x * w).sum()
    w.data.mul_(0.5)                 # w was saved for backward: eager's check does not see this
    return y, w.data


def fill_a_buffer_through_data(x, buffer, w):
    buffer.data[0] = 7.0             # buffer's version does not move: no backward would see it
    x.data.mul_(2.0)
    return (x * w).sum() + buffer.sum()


def leaves(seed):
    torch.manual_seed(seed)
    return torch.randn(2, 3), torch.randn(3, 4, requires_grad=True)


def copy_of(w):
    c = w.detach().clone().requires_grad_(w.requires_grad)
    c.grad = None if w.grad is None else w.grad.clone()
    return c


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_write_through_data_does_not_break_backward(backend):
    compiled = minidynamo.optimize(backend)(clamp_an_activation)
    for seed in range(2):                                  # compile, then a cached call
        x, w = leaves(seed)
        w2 = copy_of(w)
        clamp_an_activation(x, w).backward()
        compiled(x, w2).backward()
        assert torch.allclose(w.grad, w2.grad)


@pytest.mark.parametrize("backend", BACKENDS)
def test_manual_sgd_through_data_keeps_the_version_counter(backend):
    compiled = minidynamo.optimize(backend)(sgd_step)
    for seed in range(2):
        torch.manual_seed(seed)
        weights = [torch.randn(3, requires_grad=True) for _ in range(2)]
        for w in weights:
            w.grad = torch.randn(3)
        copies = [copy_of(w) for w in weights]
        expected, got = sgd_step(weights, 0.1), compiled(copies, 0.1)
        assert torch.allclose(expected, got)
        for w, c in zip(weights, copies):
            assert torch.equal(w, c) and c._version == w._version == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_saved_leaf_changed_through_data_gives_eagers_gradient(backend):
    compiled = minidynamo.optimize(backend)(halve_a_leaf_after_use)
    for seed in range(2):
        x, w = leaves(seed)
        x, w = x[:, :3], w[:, 0].detach().clone().requires_grad_()
        w2 = copy_of(w)
        (y, data), (y2, data2) = halve_a_leaf_after_use(x, w), compiled(x, w2)
        y.backward()
        y2.backward()
        assert torch.allclose(y, y2) and torch.equal(w, w2) and torch.allclose(w.grad, w2.grad) and torch.equal(data, data2)
        assert not data2.requires_grad and not data2._is_view()
        assert data2.data_ptr() == w2.data_ptr() and w2._version == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_write_through_data_reaches_the_callers_tensor(backend):
    compiled = minidynamo.optimize(backend)(fill_a_buffer_through_data)
    for seed in range(3):
        torch.manual_seed(seed)
        x, buffer, w = torch.randn(3), torch.zeros(3), torch.randn(3, requires_grad=True)
        x2, buffer2, w2 = x.clone(), buffer.clone(), copy_of(w)
        expected, got = fill_a_buffer_through_data(x, buffer, w), compiled(x2, buffer2, w2)
        expected.backward()
        got.backward()
        assert torch.allclose(expected, got) and torch.equal(x, x2) and torch.equal(buffer, buffer2)
        assert torch.allclose(w.grad, w2.grad)
        assert (x2._version, buffer2._version) == (x._version, buffer._version) == (0, 0)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("alias", ["data", "detach"])
def test_an_argument_returned_through_data_or_detach_is_no_view(backend, alias):
    """Eager's ``x.data`` and ``x.detach()`` share x's memory without being views of it
    (``detach_()`` works on them); ``x.data`` has a version counter of its own, ``x.detach()``
    shares x's.  The XLA backends returned a view of x (``detach_()`` raised) whose writes moved
    x's version for ``.data`` too (probe Z r04, r20)."""
    def f(x):
        return getattr(x, alias) if alias == "data" else x.detach()

    compiled = minidynamo.optimize(backend)(f)
    for requires_grad in (False, True):
        x, x2 = torch.ones(3, requires_grad=requires_grad), torch.ones(3, requires_grad=requires_grad)
        expected, got = f(x), compiled(x2)
        assert got._base is expected._base is None and got.data_ptr() == x2.data_ptr()
        got.detach_()
        expected.detach_()
        with torch.no_grad():
            expected.add_(1)
            got.add_(1)
        assert torch.equal(x2, x) and x2._version == x._version

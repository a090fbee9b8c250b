"""An in-place op answers the very tensor it wrote: ``y *= 2`` rebinds ``y`` to the same object,
``x.add_(1) is x``, ``torch.add(a, b, out=o) is o``.  The trace gives the value after the write
a new tracker (``TensorVariable.same_object`` names the object it stands for), so identity tests
(``is``, across arguments the caller passed as one tensor) and the returned objects' sharing
are eager's (fuzz seed 393 program 811: ``y *= 2; if y is x`` took the other branch)."""

import pytest
import torch
import torch.nn.functional as F

import minidynamo


@pytest.fixture(autouse=True)
def _fresh():
    minidynamo.reset()
    yield
    minidynamo.reset()


def scaled_then_compared(x, y):
    y *= 2
    if y is x:
        return x + y, "same"
    return x - y, "other"


def chained_in_place(x, y):
    z = y.add_(1)
    w = F.relu(z, inplace=True)
    o = torch.empty(3)
    r = torch.mul(x, 2, out=o)
    return x, y, z, w, r is o, z is y, w is y, y is x


def one_tensor_twice():
    t = torch.randn(3)
    return t, t


def two_tensors():
    return torch.randn(3), torch.randn(3)


def sharing(result):
    """Which of the returned objects are one object."""
    objects = [r for r in result if isinstance(r, torch.Tensor)]
    return [[a is b for b in objects] for a in objects]


@pytest.mark.parametrize("backend", ["eager", "torchxla_trace_once"])
@pytest.mark.parametrize("fn", [scaled_then_compared, chained_in_place])
def test_an_in_place_result_is_the_tensor_it_wrote(fn, backend):
    torch.manual_seed(0)
    compiled = minidynamo.optimize(backend)(fn)
    for make in (one_tensor_twice, two_tensors, one_tensor_twice, two_tensors):
        args = make()
        eager_args = tuple(a.clone() for a in args) if args[0] is not args[1] else (lambda t: (t, t))(args[0].clone())
        expected, actual = fn(*eager_args), compiled(*args)
        assert [r for r in actual if not isinstance(r, torch.Tensor)] == \
            [r for r in expected if not isinstance(r, torch.Tensor)]
        assert sharing(actual) == sharing(expected)
        for got, want in zip(actual, expected):
            if isinstance(want, torch.Tensor):
                torch.testing.assert_close(got, want)
    assert not minidynamo.counters["fallback_reasons"]


class Holder:
    pass


HOLDER = Holder()


def stored_and_kept_across_a_break(x):
    t = x * 2
    v = t[0]
    HOLDER.last = v                   # the graph's tensor lives on in an attribute...
    if x.sum().item() > 1e9:          # ...and, past a break, in a local the rest returns
        t = t + 1
    return v, t


@pytest.mark.parametrize("backend", ["eager", "torchxla_trivial", "torchxla_trace_once"])
def test_a_tensor_held_in_two_places_is_one_object(backend):
    """Fuzz seed 402 program 166: a graph tensor both stored as an attribute and kept in a local
    for the rest of the frame was two graph outputs; a backend that makes one object per output
    (the XLA bridge's views of outputs) returned two tensors where eager returns one."""
    compiled = minidynamo.optimize(backend)(stored_and_kept_across_a_break)
    for _ in range(2):
        x = torch.randn(2, 3)
        v, t = compiled(x)
        assert v is HOLDER.last
        assert v._base is t
        torch.testing.assert_close(v, x[0] * 2)

"""Inputs autograd made, and ``t.requires_grad = flag``: what a frame called inside a training
forward sees (an activation handed to a helper, or to the frame resumed after a graph break).

An input that requires grad and is not a leaf may be written in place (eager allows it; on a
leaf that requires grad eager refuses): its example is a non-leaf too, and ``is_leaf`` is
guarded, so a leaf later recompiles and gets eager's error.  ``t.requires_grad = flag`` is
``requires_grad_(flag)`` on a leaf and eager's error otherwise.
"""

import pytest
import torch

import minidynamo


@pytest.fixture(autouse=True)
def fresh_caches():
    minidynamo.reset()
    yield
    minidynamo.reset()


def _grads_of(fn, make_input, *extra):
    """(result, grad of the leaf upstream, the input after the call) for one call of ``fn``."""
    w = torch.arange(1.0, 7.0).reshape(2, 3).requires_grad_()
    x = make_input(w)
    out = fn(x, *extra)
    out.sum().backward()
    return out.detach(), w.grad, x.detach()


def _same_as_eager(f, make_input, *extra):
    compiled = minidynamo.optimize("eager")(f)
    for expected, got in zip(_grads_of(f, make_input, *extra), _grads_of(compiled, make_input, *extra)):
        assert torch.equal(got, expected)


def test_masked_store_into_an_activation():
    def f(h, mask):
        h[mask] = 5.0
        return h * 2

    _same_as_eager(f, lambda w: w * 2, torch.tensor([[True, False, True], [False, False, True]]))
    assert minidynamo.counters["fallbacks"] == 0 and minidynamo.counters["compiles"] == 1


def test_in_place_op_through_a_view_of_an_activation():
    def f(h):
        h[:, 1:].mul_(3)
        return h.relu_() + 1

    _same_as_eager(f, lambda w: w - 2)
    assert minidynamo.counters["fallbacks"] == 0


def test_an_activation_that_is_a_strided_view():
    def f(h):
        h.add_(1)
        return h * h

    _same_as_eager(f, lambda w: (w * 2).t()[1:])          # offset and transposed strides
    _same_as_eager(f, lambda w: (w * 2)[:, ::2])          # not dense
    assert minidynamo.counters["fallbacks"] == 0


def test_a_leaf_after_an_activation_recompiles_and_raises_as_eager():
    def f(h):
        h.mul_(3)
        return h

    compiled = minidynamo.optimize("eager")(f)
    compiled(torch.ones(2, requires_grad=True) * 1)
    for fn in (f, compiled):
        with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
            fn(torch.ones(2, requires_grad=True))
    assert any("is_leaf" in r for r in minidynamo.counters["recompile_reasons"])


@pytest.mark.parametrize("flag", [True, False])
def test_requires_grad_stored_on_a_tensor_the_frame_made(flag):
    def f(x, flag):
        h = x[:, None]
        h.requires_grad = flag
        return (h * 3).sum(), h.requires_grad, h.is_leaf

    compiled = minidynamo.optimize("eager")(f)
    expected, got = f(torch.ones(2, 3), flag), compiled(torch.ones(2, 3), flag)
    assert torch.equal(got[0], expected[0]) and got[1:] == expected[1:]
    assert got[0].requires_grad == expected[0].requires_grad == flag
    assert minidynamo.counters["fallbacks"] == 0


def test_requires_grad_stored_on_an_input_changes_the_callers_tensor():
    def f(x):
        x.requires_grad = True
        return x * 2

    compiled = minidynamo.optimize("eager")(f)
    a, b = torch.ones(2), torch.ones(2)
    assert torch.equal(compiled(a), f(b)) and a.requires_grad and b.requires_grad
    assert minidynamo.counters["fallbacks"] == 0


@pytest.mark.parametrize("make, flag, message", [
    (lambda: torch.ones(2, requires_grad=True) * 2, True, "only change requires_grad flags of leaf"),
    (lambda: torch.ones(2), 1, "requires_grad must be a bool"),
])
def test_requires_grad_stores_eager_refuses_raise_eagers_error(make, flag, message):
    def f(x, flag):
        x.requires_grad = flag
        return x + 1

    compiled = minidynamo.optimize("eager")(f)
    for fn in (f, compiled):
        with pytest.raises(RuntimeError, match=message):
            fn(make(), flag)

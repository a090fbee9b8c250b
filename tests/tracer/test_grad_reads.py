"""``p.grad`` of a leaf the frame receives is read from the real tensor and guarded as an input:
the step after ``backward()`` (a graph break) is traced, not run eagerly.  Each case is
differential against eager over calls where the gradient is missing, replaced or changed."""

import pytest
import torch

import minidynamo

BACKENDS = ["eager", "torchxla_trace_once"]


@pytest.fixture(autouse=True)
def _fresh():
    minidynamo.reset()
    yield
    minidynamo.reset()


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh(), torch.nn.Linear(3, 2))


def sgd_step(model, x, lr):
    loss = (model(x) ** 2).mean()
    loss.backward()                       # a graph break: the rest is a resume function
    with torch.no_grad():
        for p in model.parameters():
            p.sub_(lr * p.grad)
            p.grad.mul_(0.5)              # written in place: the caller sees it
    return loss


def train(step, backend=None, steps=4):
    model = make_model()
    run = minidynamo.optimize(backend)(step) if backend else step
    losses = [run(model, torch.full((2, 4), float(i)), 0.1).item() for i in range(steps)]
    return losses, [p.detach().clone() for p in model.parameters()], [p.grad.clone() for p in model.parameters()]


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_sgd_step_after_backward_matches_eager(backend):
    expected = train(sgd_step)
    actual = train(sgd_step, backend)
    assert actual[0] == pytest.approx(expected[0], rel=1e-5)
    for got, want in zip(actual[1] + actual[2], expected[1] + expected[2]):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    assert not any(reason.startswith("sgd_step") for reason in minidynamo.counters["fallback_reasons"])


def grad_or_none(p):
    g = p.grad
    return (g is None), (g * 2 if g is not None else p * 0), g


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_gradient_that_appears_is_replaced_or_changes_layout_is_seen(backend):
    opt = minidynamo.optimize(backend)(grad_or_none)
    p = torch.ones(3, requires_grad=True)
    assert opt(p)[0] is True
    p.grad = torch.full((3,), 2.0)
    none, doubled, same = opt(p)
    assert none is False and doubled.tolist() == [4.0, 4.0, 4.0] and same is p.grad
    p.grad = torch.full((3,), 5.0)              # another tensor object
    assert opt(p)[1].tolist() == [10.0, 10.0, 10.0]
    p.grad = torch.arange(6.0)[::2]             # a strided view
    assert opt(p)[1].tolist() == [0.0, 4.0, 8.0]
    p.grad = None
    assert opt(p)[0] is True


def nonleaf_grad(x):
    y = x * 2
    return y, y.grad


def test_the_grad_of_a_tensor_autograd_made_is_not_read():
    x = torch.ones(2, requires_grad=True)
    expected = nonleaf_grad(x)
    actual = minidynamo.optimize("eager")(nonleaf_grad)(x)
    assert actual[1] is expected[1] is None


def test_grads_set_to_none_in_the_frame():
    """``p.grad = None`` for each parameter (``zero_grad(set_to_none=True)``, by hand and by the
    optimizer) inside the compiled step: replayed on the parameters, seen by later reads."""
    def make():
        torch.manual_seed(0)
        model = torch.nn.Linear(3, 2)
        return model, torch.optim.SGD(model.parameters(), lr=0.1)

    def step(model, optimizer, x):
        for p in model.parameters():
            p.grad = None
        cleared = [p.grad is None for p in model.parameters()]
        loss = model(x).pow(2).sum()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        return loss, cleared, [p.grad for p in model.parameters()]

    ours, theirs = make(), make()
    compiled = minidynamo.optimize("eager")(step)
    for _ in range(3):
        x = torch.randn(4, 3)
        got, expected = compiled(*ours, x), step(*theirs, x)
        torch.testing.assert_close(got[0], expected[0])
        assert got[1:] == expected[1:]
        for p, q in zip(ours[0].parameters(), theirs[0].parameters()):
            torch.testing.assert_close(p, q)
            assert p.grad is None and q.grad is None
    assert not any("grad" in r and "assignment" in r for r in minidynamo.counters["break_reasons"])

"""Inputs that are views, as autograd knows them.  Eager refuses to write in place a view of a
leaf that requires grad, a view made under no_grad (in grad mode), or one of several views one
op returned.  Each input's example is the same kind of view as the input, so the trace refuses
the write where eager does (a graph break: the write runs eagerly, after the Python effects
before it), and a graph that writes an input is guarded on the kind (``autograd_views_match``)."""

import os
import subprocess
import sys

import pytest
import torch

import minidynamo

from ..corpus.helpers import CountingBackend

REPRO = os.path.join(os.path.dirname(__file__), "..", "fuzz", "repros", "repro_s358_i136.py")


@pytest.fixture(autouse=True)
def _fresh():
    minidynamo.reset()
    yield
    minidynamo.reset()


def scale_in_place(t, w, log):
    log.append("before")           # a Python effect the graph's caller makes after the graph
    t.t().mul_(w)                  # (through a view of the input: its kind is the input's)
    return t


def plain():
    return torch.ones(3)


def view_of_a_leaf():
    return torch.ones(4, requires_grad=True)[1:]


def view_of_an_activation():
    return (torch.ones(4, requires_grad=True) * 2)[1:]


def view_made_under_no_grad():
    x = torch.ones(4)
    with torch.no_grad():
        return x[1:]


def view_made_under_no_grad_of_a_leaf():
    x = torch.ones(4, requires_grad=True)       # the view does not require grad; its base does
    with torch.no_grad():
        return x[1:]


def one_of_several_views():
    return (torch.ones(6, requires_grad=True) * 2).split(3)[0]


def outcome(fn, t, w):
    log = []
    try:
        result = ("ok", fn(t, w, log).detach())
    except RuntimeError as error:
        result = ("raise", str(error).split(".")[0])
    return result, log


@pytest.mark.parametrize("order", [
    (plain, view_made_under_no_grad, plain),
    (view_of_an_activation, view_of_a_leaf, one_of_several_views, view_of_an_activation),
    (view_of_a_leaf, view_of_an_activation, view_made_under_no_grad),
    (view_made_under_no_grad, view_made_under_no_grad_of_a_leaf, plain, view_made_under_no_grad_of_a_leaf),
])
def test_each_call_writes_or_refuses_as_eager_does(order):
    opt = minidynamo.optimize(CountingBackend())(scale_in_place)
    w = torch.full((3,), 2.0, requires_grad=True)
    for make in order:
        want, got = outcome(scale_in_place, make(), w), outcome(opt, make(), w)
        assert got[1] == want[1] == ["before"], make.__name__     # the effect made, raise or not
        assert got[0][0] == want[0][0], make.__name__
        if want[0][0] == "raise":
            assert got[0][1] == want[0][1]
        else:
            assert torch.equal(got[0][1], want[0][1])


def test_a_written_view_input_is_guarded_on_its_kind():
    backend = CountingBackend()
    opt = minidynamo.optimize(backend)(scale_in_place)
    w = torch.full((3,), 2.0, requires_grad=True)
    opt(view_of_an_activation(), w, [])
    assert backend.compile_count == 1
    opt(view_of_an_activation(), w, [])
    assert backend.compile_count == 1           # the same kind: the entry serves it
    with pytest.raises(RuntimeError, match="a view of a leaf Variable"):
        opt(view_of_a_leaf(), w, [])         # another kind: traced again, and refused there
    reasons = minidynamo.counters.snapshot()["recompile_reasons"]
    assert any("autograd view kinds of" in r and "a view of a leaf" in r for r in reasons), reasons


def read_only(t, w):
    return t * w


def test_an_input_never_written_and_not_requiring_grad_is_not_guarded_on_its_kind():
    backend = CountingBackend()
    opt = minidynamo.optimize(backend)(read_only)
    w = torch.ones(3)
    for make in (plain, view_made_under_no_grad, lambda: torch.ones(5)[2:]):
        opt(make(), w)
    assert backend.compile_count == 1


def test_the_fuzzers_repro_agrees_with_eager():
    """A view of a leaf handed alone to a resumed frame, written after a list store."""
    done = subprocess.run([sys.executable, REPRO], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PJRT_DEVICE": "CPU"})
    assert done.stdout.strip().splitlines()[-1] == "OK", done.stdout + done.stderr


def leaf_view_made_to_require_grad():
    return torch.ones(4)[1:].requires_grad_()


ALL_KINDS = (plain, view_of_a_leaf, view_of_an_activation, view_made_under_no_grad,
             view_made_under_no_grad_of_a_leaf, one_of_several_views, leaf_view_made_to_require_grad)


@pytest.mark.parametrize("make", ALL_KINDS, ids=lambda make: make.__name__)
def test_each_inputs_example_is_what_autograd_knows_of_the_input(make):
    """Leaf or not, requires grad or not (a view made under no_grad of a base that requires grad
    does, through its base, and has no grad_fn), and the same kind of view."""
    from guards import autograd_view
    from minidynamo.tracer.output_graph import _meta_like

    real = make()
    example = _meta_like(real)
    assert example.is_meta
    assert (example.is_leaf, example.requires_grad, autograd_view(example)) == \
        (real.is_leaf, real.requires_grad, autograd_view(real))


def times_two(t):
    return t * 2


def test_an_input_whose_history_autograd_refuses_raises_as_eager():
    """A view one op returned among several, written under no_grad since: the first op that
    records it raises in eager.  A frame traced for a plain input must not serve it (the view
    kind of an input that requires grad is guarded), and it is not traced itself."""
    def written_one_of_several():
        view = one_of_several_views()
        with torch.no_grad():
            view[0] = 1.0
        return view

    with pytest.raises(RuntimeError, match="modified inplace") as eager_error:
        times_two(written_one_of_several())
    opt = minidynamo.optimize(CountingBackend())(times_two)
    assert torch.equal(opt(torch.ones(3, requires_grad=True)), torch.full((3,), 2.0))
    with pytest.raises(RuntimeError, match="modified inplace") as ours:
        opt(written_one_of_several())
    assert str(ours.value) == str(eager_error.value)

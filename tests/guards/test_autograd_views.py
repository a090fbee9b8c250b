"""``autograd_views_match``: what kind of view, for autograd, each tensor is.  Eager decides by it
whether an in-place op is allowed (a view of a leaf that requires grad, a view made under
no_grad, one of several views an op returned are refused), so a graph that writes an input in
place guards it.  The compiled twin answers a plain tensor from its TensorImpl and asks Python of
a view; both answer as the Python checker (every mode, conftest)."""

import itertools

import torch

from guards import LocalSource, autograd_views_match, native, tensor_match
from guards.guard import PyAutogradViews, autograd_view
from guards.reference import first_failure
from tests.guards.helpers import frame_of, guard_fn_for, some_function as f

X, Y = LocalSource("x"), LocalSource("y")


def plain():
    return torch.zeros(3)


def leaf_view():
    return torch.zeros(4, requires_grad=True)[1:]


def made_view():
    return (torch.zeros(4, requires_grad=True) * 2)[1:]


def no_grad_view():
    x = torch.zeros(4, requires_grad=True)
    with torch.no_grad():
        return x[1:]


def one_of_several():
    return (torch.zeros(6, requires_grad=True) * 2).split(3)[1]


def buffer_view():
    return torch.zeros(4)[1:]


def written_one_of_several():
    view = one_of_several()
    with torch.no_grad():
        view[0] = 1.0          # autograd can no longer rebuild its history: reading it raises
    return view


MAKERS = (plain, leaf_view, made_view, no_grad_view, one_of_several, buffer_view, written_one_of_several)


def test_the_kinds_name_what_eager_asks():
    assert autograd_view(plain()) == ()
    assert autograd_view(leaf_view()) == (True, True, "DEFAULT", True)
    assert autograd_view(made_view()) == (False, True, "DEFAULT", True)
    assert autograd_view(no_grad_view()) == (True, True, "NO_GRAD_MODE", True)
    assert autograd_view(one_of_several()) == (False, True, "MULTI_OUTPUT_NODE", True)
    assert autograd_view(buffer_view()) == (True, False, "DEFAULT", True)
    assert autograd_view(written_one_of_several()) == (False, True, "MULTI_OUTPUT_NODE", False)
    assert autograd_view(torch.zeros(4, requires_grad=True).detach()) == ()   # detach: no view for autograd


def test_each_kind_passes_only_for_its_own():
    for make_traced in MAKERS:
        traced = make_traced()
        guards = [autograd_views_match((X,), (traced,))]
        guard_fn = guard_fn_for(guards, "x", "y")
        for make_now in MAKERS:
            now = make_now()
            want = autograd_view(now) == autograd_view(traced)
            assert guard_fn(f, now, None) == want, (make_traced.__name__, make_now.__name__)
            assert (first_failure(guards, f, (now, None), frame_of("x", "y")) is None) == want
            if not want:
                assert "autograd view kinds of L['x']" in guard_fn.failure_reason(f, now, None)


def test_the_twins_agree_on_every_pair():
    tensors = [make() for make in MAKERS]
    kinds = sorted({autograd_view(t) for t in tensors}, key=repr)
    for a, b in itertools.product(tensors, repeat=2):
        for ka, kb in itertools.product(kinds, repeat=2):
            want = (autograd_view(a), autograd_view(b)) == (ka, kb)
            assert native.autograd_views((ka, kb))(a, b) == PyAutogradViews((ka, kb))(a, b) == want
    for check in (native.autograd_views(((),)), PyAutogradViews(((),))):
        assert not check(3)                      # not a tensor
        assert not check(plain(), plain())       # a tensor too many


def test_it_runs_with_the_tensor_guards_natively():
    x, y = made_view(), plain()
    guards = [tensor_match(X, x), tensor_match(Y, y), autograd_views_match((X, Y), (x, y))]
    guard_fn = guard_fn_for(guards, "x", "y")
    assert (type(guard_fn).__name__ == "FastGuard") == native.compiled()
    assert guard_fn(f, made_view(), plain())
    assert not guard_fn(f, leaf_view(), plain())
    reason = guard_fn.failure_reason(f, leaf_view(), plain())
    assert "expected 'a view of a tensor autograd made; no view'" in reason
    assert "got 'a view of a leaf; no view'" in reason

"""Unusual callables and bad settings given to the public API: a clear error or eager, never an
internal error, and a copied or pickled optimized object keeps working."""

import builtins
import copy
import functools
import pickle
import sys

import pytest
import torch

import minidynamo


@pytest.fixture(autouse=True)
def fresh():
    minidynamo.reset()
    yield
    minidynamo.reset()


@minidynamo.optimize("eager")
def sin_plus_one(a):
    return a.sin() + 1


def test_torchscript_module_is_optimized_not_an_attribute_error():
    """A ScriptModule's class attribute ``forward`` raises when read from the class."""
    lin = torch.nn.Linear(4, 3)
    x = torch.randn(2, 4)
    for module in (torch.jit.script(lin), torch.jit.trace(lin, x)):
        torch.testing.assert_close(minidynamo.optimize("eager")(module)(x), lin(x))
    with pytest.raises(TypeError, match="has no code object"):
        minidynamo.cache_entries(torch.jit.script(lin))


def test_backend_returning_a_non_callable_is_a_named_fallback():
    x = torch.randn(3)
    f = minidynamo.optimize(lambda gm, example_inputs: None)(lambda a: a + 1)
    assert torch.equal(f(x), x + 1)
    assert any("a backend must return a callable, got NoneType" in r for r in minidynamo.counters["fallback_reasons"])
    g = minidynamo.optimize(lambda gm, example_inputs: 42, nopython=True)(lambda a: a + 1)
    with pytest.raises(minidynamo.BackendCompilerFailed, match="must return a callable, got int"):
        g(x)


@pytest.mark.parametrize("returns, what", [(lambda *a: 42, "an object of type int"), (lambda *a: (a[0], a[0]), "a tuple of 2")])
def test_a_backend_whose_graph_returns_the_wrong_thing_is_named(returns, what):
    """Before: ``TypeError: 'int' object is not subscriptable`` from deep inside the output's
    rebuilding (or the frame silently re-run eagerly on every call)."""
    f = minidynamo.optimize(lambda gm, example_inputs: returns)(lambda a: a + 1)
    with pytest.raises(minidynamo.BackendOutputMismatch, match=f"returned {what}, where the graph returns a tuple of 1"):
        f(torch.randn(3))


@pytest.mark.parametrize("returns, what", [
    (lambda *a: (None,), "a NoneType as output 0, where the graph returns a tensor"),
    (lambda *a: (a[0][:1],), "a torch.float32 tensor of shape (1,) as output 0"),
    (lambda *a: (a[0].long(),), "a torch.int64 tensor of shape (3,) as output 0")])
def test_a_backend_whose_graph_returns_the_right_count_of_wrong_values_is_named(returns, what):
    f = minidynamo.optimize(lambda gm, example_inputs: returns)(lambda a: a + 1)
    with pytest.raises(minidynamo.BackendOutputMismatch, match=what.replace("(", r"\(").replace(")", r"\)")):
        f(torch.randn(3))


def test_a_bad_cache_size_limit_is_named(monkeypatch):
    monkeypatch.setattr(minidynamo.config, "cache_size_limit", None)
    with pytest.raises(TypeError, match="config.cache_size_limit must be a number, got None"):
        minidynamo.optimize("eager")(lambda a: a + 1)(torch.ones(2))
    monkeypatch.setattr(minidynamo.config, "cache_size_limit", float("inf"))
    assert torch.equal(minidynamo.optimize("eager")(lambda a: a + 1)(torch.ones(2)), torch.full((2,), 2.0))


def test_deep_copy_of_an_optimized_module_hits_its_own_entries():
    """The copy's converter used to keep the original's ``ref``: every call recompiled, and at
    the cache size limit the original's entries were dropped too."""
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU())
    opt = minidynamo.optimize("eager")(model)
    x = torch.randn(2, 4)
    opt(x)
    copied = copy.deepcopy(opt)
    for _ in range(12):
        torch.testing.assert_close(copied(x), model(x))
    assert minidynamo.counters["compiles"] == 2 and not minidynamo.counters["fallback_reasons"]
    assert any(e.compiled_fn is not None for e in minidynamo.cache_entries(opt))


def test_optimized_module_and_function_pickle_and_copy():
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU())
    x = torch.randn(2, 4)
    loaded = pickle.loads(pickle.dumps(minidynamo.optimize("eager")(model)))
    torch.testing.assert_close(loaded(x), model(x))
    assert minidynamo.counters["compiles"] == 1          # Sequential.forward is still a root
    assert pickle.loads(pickle.dumps(sin_plus_one)) is sin_plus_one   # by reference, as a function
    assert copy.deepcopy(sin_plus_one) is sin_plus_one
    holder = torch.nn.Module()
    holder.act = sin_plus_one
    assert copy.deepcopy(holder).act is sin_plus_one


def test_staticmethod_and_classmethod_decorated_in_a_class_body_bind_as_eager():
    opt = minidynamo.optimize("eager")

    class A:
        k = 2

        @opt
        @staticmethod
        def s(a):
            return a + 1

        @opt
        @classmethod
        def c(cls, a):
            return a * cls.k

        @minidynamo.disable
        @staticmethod
        def d(a):
            return a - 1

    class B(A):
        k = 5

    x = torch.randn(3)
    assert torch.equal(A().s(x), x + 1) and torch.equal(A.s(x), x + 1)
    assert torch.equal(A.c(x), x * 2) and torch.equal(B().c(x), x * 5)
    assert torch.equal(A().d(x), x - 1)


def test_the_collector_is_paused_while_a_frame_compiles_and_restored_after():
    """A compile's short-lived objects would otherwise set off a full collection of the heap
    (``convert_frame.collector_paused``); the program's own setting is back afterwards, after a
    failed compile too, and a program that turned the collector off keeps it off."""
    import gc

    seen = []

    def recording(gm, example_inputs):
        seen.append(gc.isenabled())
        return gm.forward

    def failing(gm, example_inputs):
        seen.append(gc.isenabled())
        raise ValueError("this backend fails")

    x = torch.randn(3)
    assert gc.isenabled()
    assert torch.equal(minidynamo.optimize(recording)(lambda a: a * 2)(x), x * 2)
    assert gc.isenabled()
    assert torch.equal(minidynamo.optimize(failing)(lambda a: a * 3)(x), x * 3)   # eager
    assert gc.isenabled()
    gc.disable()
    try:
        assert torch.equal(minidynamo.optimize(recording)(lambda a: a * 4)(x), x * 4)
        assert not gc.isenabled()
    finally:
        gc.enable()
    assert seen == [False, False, False]


def patches_len_around_a_break(x):
    old_len = builtins.len
    try:
        builtins.len = functools.lru_cache(4)(old_len)     # len(a list) now raises TypeError
        y = x + len("abc")
        print("a break", end="")     # the resume function is entered with len patched
        return y * 2
    finally:
        builtins.len = old_len


def test_a_program_patching_builtins_does_not_stop_its_frame_halfway(capsys):
    """minidynamo's own Python (the miss callback for the resume function) met the program's
    ``len``: the error used to escape, the frame's ``finally`` never ran and ``len`` stayed
    patched.  Now the rest of the frame runs as eager, and the reason is recorded."""
    real_len = builtins.len
    try:
        result = minidynamo.optimize("eager")(patches_len_around_a_break)(torch.ones(2))
    finally:
        restored = builtins.len is real_len
        builtins.len = real_len
    assert restored
    assert torch.equal(result, torch.full((2,), 8.0))
    assert any("internal error in the frame callback" in r for r in minidynamo.counters["fallback_reasons"])


def recurse(t, n):
    if n == 0:
        return t
    return recurse(t + 1, n - 1)      # each level a frame of its own (a graph break per call)


def test_a_recursion_eager_finishes_does_not_hit_the_limit_in_minidynamos_code():
    """Probe L: a watched frame costs several Python frames (the entry, its output rebuilt), so
    700 levels raised RecursionError inside minidynamo (eager's limit is 1000); past half the
    limit, frames now run as eager."""
    depth = sys.getrecursionlimit() * 7 // 10
    result = minidynamo.optimize("eager")(lambda x: recurse(x, depth))(torch.zeros(1))
    assert result.item() == depth

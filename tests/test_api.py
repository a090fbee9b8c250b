"""The public API around the hook: optimize, disable, reset, explain, backends, counters, config."""

import copy
import os
import subprocess
import sys

import pytest
import torch

import minidynamo


@pytest.fixture(autouse=True)
def fresh():
    minidynamo.reset()
    yield
    minidynamo.reset()


class CountingBackend:
    """Records every graph it is given and runs it eagerly."""

    def __init__(self):
        self.graphs = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        return gm.forward


def add_one(x):
    return x + 1


def test_import_does_not_import_torch_dynamo():
    code = (
        "import sys, minidynamo, torch\n"
        "f = minidynamo.optimize('eager')(lambda x: x * 2)\n"
        "f(torch.ones(2))\n"
        "bad = [m for m in sys.modules if m == 'torch._dynamo' or m.startswith('torch._dynamo.')]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_optimize_rejects_bad_input_with_clear_errors():
    with pytest.raises(minidynamo.UnknownBackend, match="unknown backend 'nope'"):
        minidynamo.optimize("nope")
    with pytest.raises(TypeError, match="expects a function or an nn.Module"):
        minidynamo.optimize("eager")(42)
    with pytest.raises(TypeError, match="backend must be a name or a callable"):
        minidynamo.optimize(3.5)
    with pytest.raises(TypeError, match="expects a callable"):
        minidynamo.disable("not callable")


def test_backend_registry():
    @minidynamo.register_backend("double_check")
    def my_backend(gm, example_inputs):
        return gm.forward

    assert "double_check" in minidynamo.list_backends()
    assert {"eager", "torchxla_trivial", "torchxla_trace_once"} <= set(minidynamo.list_backends())
    assert minidynamo.lookup_backend("double_check") is my_backend


def test_decorator_compiles_once_and_hits_the_cache():
    backend = CountingBackend()
    f = minidynamo.optimize(backend)(add_one)
    x = torch.randn(3)
    torch.testing.assert_close(f(x), x + 1)
    torch.testing.assert_close(f(x), x + 1)
    assert len(backend.graphs) == 1
    assert minidynamo.counters["compiles"] == 1
    assert minidynamo.counters["cache_hits"] >= 1
    assert len(minidynamo.cache_entries(f)) == 1


def test_an_optimized_function_can_be_weakly_referenced_like_a_function():
    """Registries keyed weakly by callables (WeakSet, WeakKeyDictionary, WeakMethod) take it."""
    import weakref

    f = minidynamo.optimize("eager")(add_one)
    assert weakref.ref(f)() is f
    registry = weakref.WeakSet([f])

    class Holder:
        method = minidynamo.optimize("eager")(lambda self, x: x * 2)

    holder = Holder()
    bound = weakref.WeakMethod(holder.method)
    torch.testing.assert_close(bound()(torch.ones(2)), torch.full((2,), 2.0))
    del f
    import gc
    gc.collect()
    assert len(registry) == 0                 # gone with its last reference


def test_counters_read_as_a_mapping():
    # ``in`` once probed counters[0], counters[1], ... forever (no __iter__): a hang
    minidynamo.optimize(CountingBackend())(add_one)(torch.randn(3))
    assert "compiles" in minidynamo.counters and "no such counter" not in minidynamo.counters
    assert minidynamo.counters["no such counter"] == 0
    assert dict(minidynamo.counters)["compiles"] == minidynamo.counters["compiles"] == 1
    assert len(minidynamo.counters) == len(list(minidynamo.counters)) > 0


def test_cache_entries_have_named_fields_and_a_recompile_goes_first():
    from minidynamo.convert_frame import CacheEntry

    context = minidynamo.optimize("eager")
    f = context(add_one)
    x = torch.randn(3)
    torch.testing.assert_close(f(x), x + 1)
    torch.testing.assert_close(f(x.double()), x.double() + 1)      # a dtype change: a second entry
    first, second = minidynamo.cache_entries(f)
    assert type(first) is CacheEntry and isinstance(first, tuple)   # the C hook reads it by position
    assert first.owner() is context.converter and second.owner() is context.converter
    assert first.guard_fn(add_one, x.double()) and not first.guard_fn(add_one, x)
    assert second.guard_fn(add_one, x) and not second.guard_fn(add_one, x.double())
    torch.testing.assert_close(first.compiled_fn(add_one, x.double()), x.double() + 1)
    torch.testing.assert_close(f(x), x + 1)                          # a hit moves its entry to the front
    assert minidynamo.cache_entries(f)[0] is second


def test_context_manager_watches_frames_called_inside():
    backend = CountingBackend()
    x = torch.randn(3)
    with minidynamo.optimize(backend):
        out = add_one(x)
    torch.testing.assert_close(out, x + 1)
    assert len(backend.graphs) == 1
    add_one(x)   # outside the block: not watched, no new graph
    assert len(backend.graphs) == 1


def test_blocks_exited_out_of_order_leave_the_thread_as_it_was():
    """Two generators (or coroutines across an ``await``) each inside a ``with`` block of their
    own, closed in the order they were opened: each block restored what it replaced, and the
    thread stayed watched for good."""
    def inside(context):
        with context:
            yield
            yield

    first = inside(minidynamo.optimize(CountingBackend()))
    second = inside(minidynamo.disable())
    next(first)
    next(second)
    next(first, None)
    next(first, None)                          # the first block exits while the second is open
    next(second, None)
    next(second, None)
    backend = CountingBackend()
    add_one(torch.ones(2))                     # outside every block: not watched
    assert not minidynamo.cache_entries(add_one)
    with minidynamo.optimize(backend):
        add_one(torch.ones(2))
    assert len(backend.graphs) == 1


def test_a_block_a_generator_leaves_in_another_thread_raises_nothing():
    """(In a process of its own: the thread that entered the block ends with its callback set.)"""
    program = (
        "import threading, torch, minidynamo\n"
        "def inside():\n"
        "    with minidynamo.optimize('eager'):\n"
        "        yield\n"
        "        yield\n"
        "generator, errors = inside(), []\n"
        "def finish():\n"
        "    try:\n"
        "        list(generator)\n"
        "    except Exception as error:\n"
        "        errors.append(error)\n"
        "for step in (lambda: next(generator), finish):\n"
        "    thread = threading.Thread(target=step)\n"
        "    thread.start()\n"
        "    thread.join()\n"
        "print(errors)\n")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=300, cwd=root,
                          env={**os.environ, "PYTHONPATH": root})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_two_contexts_never_share_entries():
    first, second = CountingBackend(), CountingBackend()
    x = torch.randn(3)
    minidynamo.optimize(first)(add_one)(x)
    minidynamo.optimize(second)(add_one)(x)
    assert len(first.graphs) == 1 and len(second.graphs) == 1


def test_disable_never_traces():
    backend = CountingBackend()

    def helper(x):
        return x * 3

    quiet = minidynamo.disable(helper)
    with minidynamo.optimize(backend):
        torch.testing.assert_close(quiet(torch.ones(2)), torch.full((2,), 3.0))
    assert backend.graphs == []


def test_reset_forgets_compiled_code():
    backend = CountingBackend()
    f = minidynamo.optimize(backend)(add_one)
    f(torch.ones(2))
    minidynamo.reset()
    assert minidynamo.cache_entries(f) == []
    f(torch.ones(2))
    assert len(backend.graphs) == 2


def test_backend_that_raises_falls_back_to_eager_with_the_reason():
    def broken(gm, example_inputs):
        raise RuntimeError("no luck")

    f = minidynamo.optimize(broken)(add_one)
    torch.testing.assert_close(f(torch.ones(2)), torch.full((2,), 2.0))
    assert minidynamo.counters["fallbacks"] == 1
    assert "no luck" in minidynamo.counters["fallback_reasons"][0]
    with pytest.raises(minidynamo.BackendCompilerFailed, match="no luck"):
        minidynamo.optimize(broken, nopython=True)(add_one)(torch.ones(2))


def test_cache_size_limit_then_runs_eagerly(monkeypatch):
    monkeypatch.setattr(minidynamo.config, "cache_size_limit", 2)
    backend = CountingBackend()
    f = minidynamo.optimize(backend)(add_one)
    for n in range(1, 6):                      # each new shape fails the guards
        torch.testing.assert_close(f(torch.ones(n)), torch.full((n,), 2.0))
    assert len(backend.graphs) == 2
    assert minidynamo.counters["fallbacks"] == 1
    assert "cache_size_limit" in minidynamo.counters["fallback_reasons"][0]
    assert minidynamo.counters["recompiles"] >= 1


def test_after_cache_size_limit_no_compiled_entry_is_checked_again(monkeypatch):
    """A frame that hit the limit costs eager plus the hook: its compiled entries are dropped,
    so a later call, even one an old entry would match, runs the eager entry alone."""
    monkeypatch.setattr(minidynamo.config, "cache_size_limit", 2)
    runs = []

    def backend(gm, example_inputs):
        def run(*args):
            runs.append(len(example_inputs))
            return gm.forward(*args)
        return run

    f = minidynamo.optimize(backend)(add_one)
    for n in (1, 2, 3):
        f(torch.ones(n))
    assert [e.guard_fn for e in minidynamo.cache_entries(add_one)] == [None]   # eager, always
    before = len(runs)
    torch.testing.assert_close(f(torch.ones(1)), torch.full((1,), 2.0))       # shape of entry 1
    assert len(runs) == before                                                  # no graph ran
    assert minidynamo.counters["fallbacks"] == 1


def test_explain_reports_graphs_guards_and_fallbacks():
    def f(x):
        return torch.relu(x) * 2

    report = minidynamo.explain(f)(torch.randn(4))
    assert report.graph_count == 1 and report.graph_break_count == 0
    assert any("L['x']" in g for g in report.guards)

    def g(x):
        print("side effect")
        return x

    report = minidynamo.explain(g)(torch.randn(4))
    assert report.graph_count == 0 and report.graph_break_count == 1
    assert report.reasons and "print" in report.reasons[0]


def test_explain_of_an_optimized_function_or_module_explains_what_it_wraps():
    x = torch.ones(4)
    plain = minidynamo.explain(add_one)(x)
    for optimized in (minidynamo.optimize("eager")(add_one), minidynamo.optimize("eager")(torch.nn.Linear(4, 2))):
        report = minidynamo.explain(optimized)(x)
        assert report.graph_count == 1 and report.guards, report
    assert minidynamo.explain(minidynamo.optimize("eager")(add_one))(x).guards == plain.guards
    assert minidynamo.explain(minidynamo.optimize("eager")(minidynamo.optimize("eager")(add_one)))(x).graph_count == 1
    assert minidynamo.explain(minidynamo.disable(add_one))(x).graph_count == 0
    assert minidynamo.explain(minidynamo.disable(torch.nn.Linear(4, 2)))(x).graph_count == 0
    wrapper = minidynamo.optimize("eager")(minidynamo.optimize("eager")(torch.nn.Linear(4, 2)))
    wrapper.register_forward_hook(lambda module, args, out: out * 0)      # the wrapper's own hook runs
    report = minidynamo.explain(wrapper)(x)
    assert report.graph_count == 1 and torch.equal(report.output, torch.zeros(2))
    assert torch.equal(wrapper(x), torch.zeros(2))                    # its own watching is back


def test_optimized_module_keeps_module_behaviour():
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval()
    backend = CountingBackend()
    opt = minidynamo.optimize(backend)(model)
    x = torch.randn(2, 4)
    torch.testing.assert_close(opt(x), model(x))
    torch.testing.assert_close(opt(x), model(x))
    assert len(backend.graphs) == 1
    assert opt._orig_mod is model
    model.note = "kept"
    assert opt.note == "kept"              # attributes read through to the wrapped module
    assert sum(1 for _ in opt.parameters()) == 2


def test_what_is_set_on_the_wrapper_lands_on_the_wrapped_module():
    """The wrapper stands for the module (as torch.compile's does): an attribute, a submodule, a
    buffer or the training flag set or deleted through it changes the module the guards watch."""
    class Scaled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(2, 2)
            self.scale = 1.0
            self.register_buffer("shift", torch.zeros(2))

        def forward(self, x):
            y = self.linear(x) * self.scale + self.shift
            return y + 100 if self.training else y

    model = Scaled()
    opt = minidynamo.optimize("eager")(model)
    x = torch.ones(1, 2)
    opt(x)
    opt.scale = 3.0
    opt.linear = torch.nn.Identity()
    opt.shift = torch.full((2,), 5.0)
    opt.training = False
    assert model.scale == 3.0 and isinstance(model.linear, torch.nn.Identity) and not model.training
    assert opt.training is False
    torch.testing.assert_close(opt(x), model(x))
    opt.extra = 1
    del opt.extra
    assert not hasattr(model, "extra")
    opt.train()
    assert model.training and opt.training
    assert minidynamo.optimize("eager")(torch.nn.Linear(2, 2).eval()).training is False


def test_a_disabled_module_is_still_a_module():
    model = torch.nn.Linear(3, 2)
    disabled = minidynamo.disable(model)
    assert isinstance(disabled, torch.nn.Module) and len(list(disabled.parameters())) == 2
    assert set(disabled.state_dict()) == {"_orig_mod.weight", "_orig_mod.bias"}
    x = torch.ones(3)

    def f(x):
        return disabled(x * 2) + 1

    torch.testing.assert_close(minidynamo.optimize("eager")(f)(x), f(x))
    assert not minidynamo.cache_entries(model.forward.__func__)       # never traced
    disabled.eval()
    assert not model.training


def test_an_optimized_callable_object_keeps_its_state_on_the_object():
    """functools.wraps copied the object's __dict__ onto the wrapper: a snapshot, stale at once."""
    class Counter:
        def __init__(self):
            self.calls = 0

        def __call__(self, x):
            self.calls += 1
            return x + self.calls

    counter = Counter()
    optimized = minidynamo.optimize("eager")(counter)
    optimized(torch.ones(1))
    optimized(torch.ones(1))
    assert counter.calls == 2 and not hasattr(optimized, "calls")


def test_optimized_module_hooks_copies_and_a_swapped_module():
    """The wrapper's forward is a C callable (no Python frame per call); hooks registered on the
    wrapper still fire, a deep copy is still watched, and a wrapped module swapped in is called."""
    model = torch.nn.Linear(4, 3)
    backend = CountingBackend()
    opt = minidynamo.optimize(backend)(model)
    x = torch.randn(2, 4)
    calls = []
    handle = opt.register_forward_hook(lambda module, args, out: calls.append(module) or out * 0)
    assert torch.equal(opt(x), torch.zeros(2, 3))
    assert calls == [opt] and len(backend.graphs) == 1      # the hook fired once, on the wrapper
    handle.remove()
    torch.testing.assert_close(opt(x), model(x))

    copied = copy.deepcopy(opt)
    assert copied._orig_mod is not model
    torch.testing.assert_close(copied(x), model(x))
    assert minidynamo.cache_entries(copied)                  # the copy's calls were captured

    opt._orig_mod = torch.nn.Linear(4, 5)
    assert opt(x).shape == (2, 5) and len(backend.graphs) == 2


def test_a_dropped_context_drops_its_entries_of_equal_but_distinct_codes():
    """fx generates each GraphModule's forward: the codes are equal (``==`` ignores the file
    name) but distinct objects, each with its own entries, and all of them go with the context."""
    import gc

    class Affine(torch.nn.Module):
        def forward(self, x):
            return x * 2 + 1

    graph_modules = [torch.fx.symbolic_trace(Affine()) for _ in range(3)]
    codes = [type(gm).forward.__code__ for gm in graph_modules]
    assert codes[0] == codes[1] and codes[0] is not codes[1]
    context = minidynamo.optimize("eager")
    wrapped = [context(gm) for gm in graph_modules]
    for fn in wrapped:
        fn(torch.ones(2))
    assert [len(minidynamo.cache_entries(gm)) for gm in graph_modules] == [1, 1, 1]
    del context, wrapped, fn
    gc.collect()
    assert [len(minidynamo.cache_entries(gm)) for gm in graph_modules] == [0, 0, 0]


def test_a_built_in_backend_name_cannot_be_replaced():
    def impostor(gm, example_inputs):
        return lambda *args: ()

    for name in ("eager", "torchxla_trace_once"):
        with pytest.raises(ValueError, match="built in"):
            minidynamo.register_backend(name)(impostor)
    assert minidynamo.lookup_backend("eager") is not impostor


def test_a_users_backend_name_registered_again_is_replaced():
    @minidynamo.register_backend("mine_twice")
    def first(gm, example_inputs):
        return gm.forward

    @minidynamo.register_backend("mine_twice")
    def second(gm, example_inputs):
        return gm.forward

    assert minidynamo.lookup_backend("mine_twice") is second


def test_disable_of_a_bound_method_reaches_that_instance_only():
    class TwoLayers(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)

        def forward(self, x):
            return self.b(self.a(x).relu())

    model = TwoLayers()
    model.a.forward = minidynamo.disable(model.a.forward)
    opt = minidynamo.optimize("eager")(model)
    x = torch.randn(2, 4)
    torch.testing.assert_close(opt(x), model(x))
    assert minidynamo.counters["graph_breaks"] == 1       # at self.a only: self.b is traced

    minidynamo.reset()
    other = minidynamo.optimize("eager")(torch.nn.Linear(4, 4))
    other(x)
    assert minidynamo.counters["compiles"] == 1           # Linear.forward itself is not disabled

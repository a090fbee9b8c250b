"""When an object dies, under minidynamo as in eager (found by CPython's ``test_weakref``).

CPython frees an object the moment its last reference goes; weak references then die, their
callbacks and ``weakref.finalize`` run, and a weak dictionary loses the entry.  Each test is a
family where the trace or the compiled frame held a reference eager does not, or made one:

- the guard of a traced value kept a weak reference to it (``getweakrefcount`` counted it, and
  ``weakref.ref(o)`` handed that one back);
- a value made in the trace and handed to a break's instruction (``weakref.finalize(a, ...)``),
  not read again, died after the instruction instead of at the frame's end;
- ``del a`` inside a compiled frame freed nothing until the frame returned;
- a value the trace read stayed alive in a failed trace's frames until a collection, so the
  eager run of the frame did not free it at its ``del``;
- a resume function kept the values of the frame's stack as parameters, alive to its end;
- tracing hashed an argument: a weak reference remembers the hash of its referent, so a dead
  one that eager never hashed hashed fine;
- a cache entry held the objects its guards compare by identity (a model passed in, a helper
  function): they, and what they hold, lived as long as the entry (``guards.pin``).
"""

import gc
import random
import weakref

import torch

import minidynamo


class Obj:
    pass


def opaque(*args):
    """A call the tracer does not model: a graph break."""
    return random.Random(0).random() >= 0 and (args[0] if args else None)


def optimized(fn):
    minidynamo.reset()
    return minidynamo.optimize("eager")(fn)


def test_tracing_makes_no_weak_reference_to_what_it_reads():
    def f(o, x):
        return opaque(o), x + 1

    o = Obj()
    optimized(f)(o, 1)
    assert weakref.getweakrefcount(o) == 0


def test_a_value_handed_to_a_break_lives_to_the_frames_end():
    def f():
        done = []
        a = Obj()
        weakref.finalize(a, done.append, "finalized")   # the break: a is not read again
        opaque()
        return list(done)

    assert f() == [] and optimized(f)() == []


def test_del_frees_a_watched_object_at_once():
    def f(k):
        a = Obj()
        fin = weakref.finalize(a, lambda: None)
        opaque(k)
        del a
        return fin.alive

    assert f(0) is False and optimized(f)(0) is False


def test_a_failed_trace_does_not_keep_the_frames_values_alive():
    def f():
        a = Obj()
        r = weakref.ref(a)
        opaque()
        table = {a: 1}          # the rest of the frame cannot be traced: it runs eagerly
        del table, a
        return r() is None

    assert f() is True and optimized(f)() is True


def test_the_stack_values_of_a_resume_function_die_when_consumed():
    def make():
        objects = [Obj() for _ in range(3)]
        return weakref.WeakValueDictionary(enumerate(objects)), objects

    def f():
        d, objects = make()       # the break: the pair comes back as the resume function's stack
        n = len(d)
        del objects
        gc.collect()
        return n, len(d)

    assert f() == (3, 0) and optimized(f)() == (3, 0)


def test_tracing_does_not_hash_an_argument():
    hashed = []

    class Hashed:
        def __hash__(self):
            hashed.append(1)
            return 1

    def f(r):
        return opaque(r)

    target = Hashed()
    ref = weakref.ref(target)
    optimized(f)(ref)
    assert hashed == []
    del target
    try:
        hash(ref)                 # eager: a dead reference never hashed cannot be hashed
    except TypeError:
        pass
    else:
        raise AssertionError("the trace hashed the weak reference")


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.Sequential(*[torch.nn.Linear(3, 3) for _ in range(4)])

    def forward(self, x):
        return self.layers(x).relu()


def test_a_model_passed_in_dies_at_its_del_and_takes_its_entry_along():
    def step(model, x):
        return model(x) * 2

    compiled = optimized(step)
    x = torch.ones(2, 3)
    alive = []
    for _ in range(3):                                # a new model each round, as in a sweep
        net = Net()
        with torch.no_grad():
            assert torch.equal(compiled(net, x), step(net, x))
            assert torch.equal(compiled(net, x), step(net, x))    # the cache entry's hit path
        assert len(minidynamo.cache_entries(step)) == 1
        alive += [weakref.ref(net), weakref.ref(net.layers[2].weight)]
        del net
        assert minidynamo.cache_entries(step) == []   # its guard can never pass again
    assert [ref() for ref in alive] == [None] * 6      # freed at the del, no collection needed


def test_a_model_alive_across_a_graph_break_dies_at_its_del():
    """The break hands the model to the resume function (a local) and back out: those values are
    re-read from this call's frame, never held by the entry as constants."""
    def step(model, x):
        y = model(x)
        opaque(y)                                     # the break: model is a live local
        return model(x) + y, model

    compiled = optimized(step)
    x = torch.ones(2, 3)
    alive = []
    for _ in range(2):
        net = Net()
        with torch.no_grad():
            got, returned = compiled(net, x)
            assert returned is net and torch.equal(got, step(net, x)[0])
        alive += [weakref.ref(net), weakref.ref(net.layers[0].bias)]
        del net, returned
    assert [ref() for ref in alive] == [None] * 4 and minidynamo.cache_entries(step) == []


def test_a_module_object_made_in_the_frame_dies_at_its_del():
    import types

    def f():
        m = types.ModuleType("made")
        r = weakref.ref(m)
        opaque(m)
        del m
        gc.collect()
        return r() is None

    assert f() is True and optimized(f)() is True


def test_a_rebound_helper_dies_and_its_entry_goes():
    namespace = {}
    exec("def helper(t):\n    return t + 1\n\ndef f(x):\n    return helper(x) * 2\n", namespace)
    f = namespace["f"]
    compiled = optimized(f)
    x = torch.ones(2)
    assert torch.equal(compiled(x), torch.full((2,), 4.0))
    old = weakref.ref(namespace["helper"])
    namespace["helper"] = lambda t: t - 1
    assert old() is None and len(minidynamo.cache_entries(f)) == 0
    assert torch.equal(compiled(x), torch.zeros(2))

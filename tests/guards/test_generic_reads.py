"""Guards on an object whose class answers reads in Python read with object's own lookup.

A class with its own ``__getattribute__`` (transformers' configs have one) runs it on every
``obj.name``; a class with ``__getattr__`` runs that once a name is missing.  The trace inlines
that code where the program reads, and what the code found by object's lookup is guarded as
``object.__getattribute__(obj, name)``: re-read as ``obj.name``, each guard check ran the
program's code again (a counter, a log, a cache filled) on every call.  The native program
reads the same way (``GENERIC_ATTR``) and decides as the generated Python and the plain layer."""

import torch

import minidynamo
from guards import FrameInfo, reference

calls = []


class Logged:
    """Every attribute read is logged, as eager runs it."""

    def __getattribute__(self, name):
        calls.append(name)
        return object.__getattribute__(self, name)


def fallback_object():
    class Fallback:
        """A missing name is answered, and logged, by ``__getattr__``."""

        scale = 1.0

        def __getattr__(self, name):
            calls.append(name)
            return 10.0

    return Fallback()


def add_v(t, o):
    return t + o.v


def add_scale(t, o):
    return t * o.scale


def logged_runs(fn, make, changes):
    """What each call returns and logs; ``changes[i]`` runs on the object before call ``i``."""
    o, seen = make(), []
    for change in changes:
        change(o)
        calls.clear()
        seen.append((fn(torch.ones(2), o).tolist(), list(calls)))
    return seen


def set_v(value):
    return lambda o: object.__setattr__(o, "v", value)


def keep(o):
    pass


def test_a_python_getattribute_runs_once_per_read_as_in_eager():
    changes = [set_v(1.0), keep, set_v(2.0), keep]
    compiled = minidynamo.optimize("eager")(add_v)
    assert logged_runs(compiled, Logged, changes) == logged_runs(add_v, Logged, changes)
    assert [entry for entry in minidynamo.cache_entries(add_v) if entry.guard_fn is not None]


def test_a_name_that_goes_missing_is_answered_by_getattr_as_in_eager():
    def drop_scale(o):
        del type(o).scale              # from now on __getattr__ answers, once per read

    def set_scale(o):
        type(o).scale = 3.0

    changes = [keep, drop_scale, keep, set_scale, keep]
    compiled = minidynamo.optimize("eager")(add_scale)
    assert logged_runs(compiled, fallback_object, changes) == logged_runs(add_scale, fallback_object, changes)


def test_the_guard_reads_by_object_lookup_and_every_layer_agrees(tensor_check_mode):
    o = Logged()
    object.__setattr__(o, "v", 1.0)
    compiled = minidynamo.optimize("eager")(add_v)
    compiled(torch.ones(2), o)
    (entry,) = [e for e in minidynamo.cache_entries(add_v) if e.guard_fn is not None]
    guard_fn = entry.guard_fn
    assert "object.__getattribute__(L['o'], 'v') == 1.0" in guard_fn.guard_strings
    if tensor_check_mode:
        assert type(guard_fn).__name__ == "FastGuard"
    frame_info = FrameInfo(("t", "o"), add_v.__globals__, add_v.__builtins__)
    t = torch.ones(2)

    def replace_getattribute(obj):
        Logged.__getattribute__ = lambda self, name: object.__getattribute__(self, name)
        return lambda: setattr(Logged, "__getattribute__", original)

    original = Logged.__dict__["__getattribute__"]
    mutations = {
        "same value": (lambda obj: object.__setattr__(obj, "v", 1.0) or (lambda: None), True),
        "new value": (lambda obj: object.__setattr__(obj, "v", 2.0) or (lambda: object.__setattr__(obj, "v", 1.0)), False),
        "deleted": (lambda obj: object.__delattr__(obj, "v") or (lambda: object.__setattr__(obj, "v", 1.0)), False),
        "__getattribute__ replaced": (replace_getattribute, False),
    }
    for name, (mutate, passes) in mutations.items():
        undo = mutate(o)
        try:
            calls.clear()
            fast = guard_fn(add_v, t, o)
            python = getattr(guard_fn, "python", guard_fn)(add_v, t, o)
            plain = reference.first_failure(guard_fn.guards, add_v, (t, o), frame_info) is None
            explained = guard_fn.failure_reason(add_v, t, o) is None
            assert fast == python == plain == explained == passes, name
            assert calls == [], f"{name}: checking the guard ran the program's __getattribute__"
        finally:
            undo()


class Plain:
    def __init__(self):
        self.v = 1.5


def test_a_getattribute_given_to_the_class_later_is_seen():
    """Probe Z r01, r14: a ``__getattribute__`` assigned to the class after the compile answers
    every read in eager; the guards relied on object's lookup (or on ``__getattr__`` alone)."""
    for make in (Plain, fallback_object):
        o, compiled = make(), minidynamo.optimize("eager")(add_v if make is Plain else add_scale)
        plain = add_v if make is Plain else add_scale
        compiled(torch.ones(2), o)
        compiled(torch.ones(2), o)
        type(o).__getattribute__ = lambda self, name: 100.0 if name in ("v", "scale") \
            else object.__getattribute__(self, name)
        try:
            assert torch.equal(compiled(torch.ones(2), o), plain(torch.ones(2), o))
        finally:
            del type(o).__getattribute__

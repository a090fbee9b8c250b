"""An AttributeError is one thing to Python, however it arises.

``getattr(obj, name, default)``, ``hasattr``, a class's ``__getattr__`` and a ``match`` class
pattern all catch *any* AttributeError from the lookup: the name being absent, a property's own
``raise AttributeError``, one of its subclasses, or a missing attribute the property itself read.
The trace must answer as they do, and guard the absence that was actually relied on (which need
not be the name asked about).
"""

import functools

import torch

import minidynamo

from .helpers import compiled_twice


class Oops(AttributeError):
    pass


def caught(fn):
    try:
        return fn()
    except Exception as error:
        return type(error).__name__, str(error)


class RaisingProperty:
    @property
    def x(self):
        raise Oops("x is not ready")

    def __getattr__(self, name):
        return "fallback " + name


class RaisingPropertyNoHook:
    @property
    def x(self):
        raise AttributeError("x is not ready")


def test_a_property_raising_attribute_error_falls_back_to_getattr_like_eager():
    def f(t, hooked, plain):
        return t + 1, hooked.x, getattr(plain, "x", "default"), hasattr(plain, "x")

    report = compiled_twice(f, lambda: (torch.ones(2), RaisingProperty(), RaisingPropertyNoHook()))
    assert report.graph_count == 1


class Lazy:
    @property
    def value(self):
        return self._value       # missing until someone sets it


def test_hasattr_through_a_property_guards_the_attribute_the_property_read():
    def f(t, obj):
        return t + 1 if hasattr(obj, "value") else t - 1

    compiled = minidynamo.optimize("eager")(f)
    obj = Lazy()
    assert torch.equal(compiled(torch.ones(2), obj), torch.zeros(2))
    assert torch.equal(compiled(torch.ones(2), obj), torch.zeros(2))
    assert minidynamo.counters["compiles"] == 1          # the absence holds: no recompile
    obj._value = 3
    assert torch.equal(compiled(torch.ones(2), obj), torch.full((2,), 2.0))


class CatchesItsOwn:
    def __getattribute__(self, name):
        try:
            return object.__getattribute__(self, name)
        except AttributeError:
            return "its own answer"

    def __getattr__(self, name):
        return "__getattr__'s answer"


def test_object_getattribute_does_not_ask_getattr():
    def f(t, obj):
        return t + 1, obj.missing

    expected = f(torch.ones(2), CatchesItsOwn())[1]
    assert expected == "its own answer"
    assert minidynamo.optimize("eager")(f)(torch.ones(2), CatchesItsOwn())[1] == expected


class GetattrRaisesASubclass:
    def __getattr__(self, name):
        if name.startswith("z"):
            raise Oops(name)
        return name * 2


def test_getattr_raising_a_subclass_is_caught_by_getattrs_default():
    def f(t, obj):
        return t + 1, getattr(obj, "zap", "default"), hasattr(obj, "zap"), obj.ab, caught(lambda: obj.zz)

    compiled_twice(f, lambda: (torch.ones(2), GetattrRaisesASubclass()))


class Point:
    __match_args__ = ("x",)

    @property
    def x(self):
        raise AttributeError("no x")


def test_a_class_pattern_whose_attribute_raises_does_not_match():
    def f(t, p):
        match p:
            case Point(x=1):
                return t + 1
            case Point():
                return t - 1
        return t

    compiled_twice(f, lambda: (torch.ones(2), Point()))


class Cached:
    def value(self):
        try:
            return self._value                   # the first call finds no cache
        except AttributeError as error:
            self._value = 7
            return error.name, type(error.obj).__name__, error.args


def test_the_programs_try_catches_a_missing_attribute_as_eager_does():
    """``try: self._value except AttributeError`` inside a helper is traced through (no break):
    the handler gets CPython's exception, its message, ``name`` and ``obj``; the absence is
    guarded, so a second call with the cache set takes the other path."""
    def f(t, obj):
        return t + 1, obj.value()

    obj = Cached()
    compiled = minidynamo.optimize("eager")(f)
    breaks = minidynamo.counters["graph_breaks"]
    first = compiled(torch.ones(2), obj)
    assert first[1] == ("_value", "Cached", ("'Cached' object has no attribute '_value'",))
    assert obj._value == 7 and minidynamo.counters["graph_breaks"] == breaks
    assert compiled(torch.ones(2), obj)[1] == 7
    assert compiled(torch.ones(2), Cached())[1] == first[1]


class CachedDouble:
    def __init__(self):
        self.runs = 0

    @functools.cached_property
    def doubled(self):
        self.runs += 1
        return self.base * 2                    # AttributeError while there is no base


def test_guards_never_run_a_cached_propertys_function():
    """A value the instance's own ``__dict__`` answered is re-read there by the guards: read as
    ``obj.doubled``, a guard ran the function again (and its side effects) once the cache was
    dropped."""
    def f(t, obj):
        return t + getattr(obj, "doubled", -1)

    def run(fn):
        obj, seen = CachedDouble(), []
        for step in ("missing", "present", "cached", "missing"):
            if step == "missing":
                obj.__dict__.pop("base", None)
                obj.__dict__.pop("doubled", None)
            if step == "present":
                obj.base = 4
            seen.append((fn(torch.ones(2), obj).tolist(), obj.runs))
        return seen

    assert run(minidynamo.optimize("eager")(f)) == run(f)


class Gate:
    def __getattr__(self, name):
        raise AttributeError(f"no {name} here")


def test_an_attribute_error_the_program_raises_carries_name_and_obj():
    """CPython's attribute read sets ``name`` and ``obj`` on an AttributeError that has neither,
    whoever raised it (a ``__getattr__``, a property)."""
    def f(t, gate):
        try:
            return t + 1, gate.missing
        except AttributeError as error:
            return t - 1, (error.name, error.obj is gate, str(error))

    gate = Gate()
    assert minidynamo.optimize("eager")(f)(torch.ones(2), gate)[1] == f(torch.ones(2), gate)[1]


class Descriptor:
    def __get__(self, obj, owner=None):
        return 20


class DictOfItsOwn(dict):
    pass


class WithDescriptor:
    v = Descriptor()


def test_an_instance_dict_of_a_dict_subclass_is_read_as_cpython_reads_it():
    """CPython's lookup reads such a ``__dict__`` as a dict: the instance's own ``v`` (a non-data
    descriptor of the class stands behind it).  The trace saw no instance dict at all (20)."""
    def f(t, obj):
        return t + obj.v

    obj = WithDescriptor()
    obj.__dict__ = DictOfItsOwn(v=1)
    assert torch.equal(minidynamo.optimize("eager")(f)(torch.zeros(1), obj), f(torch.zeros(1), obj))


class Plain:
    def __init__(self):
        self.items = [1]


def test_a_copy_asks_the_instances_own_getstate():
    import copy

    def f(t, obj):
        return t + 1, copy.copy(obj).__dict__

    obj = Plain()
    obj.__getstate__ = lambda: {"items": []}
    assert minidynamo.optimize("eager")(f)(torch.ones(1), obj)[1] == f(torch.ones(1), obj)[1] == {"items": []}


class Probing(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(3, 3)

    def forward(self, x):
        try:
            extra = self.linear.not_there            # nn.Module.__getattr__ raises
        except AttributeError as error:
            extra, self.seen = 0.5, str(error)
        return self.linear(x) + extra


def test_a_modules_missing_attribute_caught_by_the_program_is_traced_through():
    module = Probing()
    compiled = minidynamo.optimize("eager")(module)
    x = torch.ones(3)
    breaks = minidynamo.counters["graph_breaks"]
    torch.testing.assert_close(compiled(x), module(x))
    assert minidynamo.counters["graph_breaks"] == breaks
    assert module.seen == "'Linear' object has no attribute 'not_there'"

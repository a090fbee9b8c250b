"""What a class defines decides what its instances do, already on the first call.

The tracer models some objects without running their class's code: a namedtuple as a tuple with
named fields, ``module.name = value`` as ``nn.Module.__setattr__``, a module's attribute lookup
and call as torch's, iteration over a tensor as indexing.  A class that overrides what the model
stands for (a namedtuple with its own ``__len__`` or ``__new__``, a module with its own
``__setattr__``, torch's ``nn.Module.__getattr__`` replaced by the program before compiling) must
run that code: here the frame runs eagerly.
"""

import collections
import functools

import pytest
import torch
from torch import nn

import minidynamo

X = torch.arange(1.0, 5.0)
Base = collections.namedtuple("Base", "a b")


def with_methods(**methods):
    return type("Pair", (Base,), methods)


OVERRIDES = {
    "__new__": (dict(__new__=lambda cls, a, b: Base.__new__(cls, a * 10, b)), lambda x, p: x * p.a),
    "__len__": (dict(__len__=lambda self: 7), lambda x, p: x * len(p)),
    "__contains__": (dict(__contains__=lambda self, item: True), lambda x, p: x + 1 if 5.0 in p else x - 1),
    "__bool__": (dict(__bool__=lambda self: False), lambda x, p: x + 1 if p else x - 1),
    "__getitem__": (dict(__getitem__=lambda self, i: 9.0), lambda x, p: x * p[0]),
    "__iter__": (dict(__iter__=lambda self: iter([7.0, 8.0])), lambda x, p: x * sum(p)),
    "__reversed__": (dict(__reversed__=lambda self: iter([9.0])), lambda x, p: x * list(reversed(p))[0]),
    "__getattribute__": (dict(__getattribute__=lambda self, n: 5.0 if n == "a" else tuple.__getattribute__(self, n)),
                         lambda x, p: x * p.a),
    "field property": (dict(a=property(lambda self: 5.0)), lambda x, p: x * p.a),
    "_asdict": (dict(_asdict=lambda self: {"a": 9.0}), lambda x, p: x * p._asdict()["a"]),
    "_replace": (dict(_replace=lambda self, **kw: self), lambda x, p: x * p._replace(a=5.0).a),
}


@pytest.mark.parametrize("made_in_frame", [False, True], ids=["argument", "made in the frame"])
@pytest.mark.parametrize("name", sorted(OVERRIDES))
def test_a_namedtuple_subclass_runs_its_own_methods(name, made_in_frame):
    methods, use = OVERRIDES[name]
    pair_class = with_methods(**methods)
    if made_in_frame:
        def f(x):
            return use(x, pair_class(2.0, 3.0))
        args = (X,)
    else:
        f, args = use, (X, Base.__new__(pair_class, 2.0, 3.0))
    minidynamo.reset()
    got = minidynamo.optimize("eager")(f)(*args)
    assert torch.equal(got, f(*args))


def test_a_plain_namedtuple_is_still_captured():
    Point = collections.namedtuple("Point", "a b")

    def f(x, p):
        q = Point(p.a + 1, p.b)
        return x * q.a + len(q) + sum(q) + q._asdict()["b"], q._replace(b=x)

    minidynamo.reset()
    got = minidynamo.optimize("eager")(f)(X, Point(2.0, 3.0))
    expected = f(X, Point(2.0, 3.0))
    assert torch.equal(got[0], expected[0]) and torch.equal(got[1].b, expected[1].b)
    assert minidynamo.counters["compiles"] == 1 and not minidynamo.counters["fallback_reasons"]


def test_a_module_with_its_own_setattr_stores_through_it():
    class Doubling(nn.Module):
        def __init__(self):
            super().__init__()
            self.k = 2.0

        def __setattr__(self, name, value):
            nn.Module.__setattr__(self, name, value * 2 if isinstance(value, float) else value)

        def forward(self, x):
            self.k = 3.0
            return x * self.k

    minidynamo.reset()
    net = Doubling()
    got = minidynamo.optimize("eager")(net)(X)
    assert torch.equal(got, X * 6.0) and net.k == 6.0


LINEAR, OTHER_LINEAR = nn.Linear(4, 4), nn.Linear(4, 4)
_torch_getattr = nn.Module.__getattr__


class Holder(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = LINEAR

    def forward(self, x):
        return self.lin(x)


def summed(x):
    total = 0
    for v in x:
        total = total + v
    return total


LIBRARY_PATCHES = {
    "nn.Module.__getattr__": (nn.Module, "__getattr__",
                              lambda self, name: OTHER_LINEAR if name == "lin" else _torch_getattr(self, name),
                              Holder()),
    "nn.Module.__call__": (nn.Module, "__call__", lambda self, *args: args[0] * 100, Holder()),
    "torch.Tensor.__iter__": (torch.Tensor, "__iter__", lambda self: iter([self[0]]), summed),
}


@pytest.mark.parametrize("case", sorted(LIBRARY_PATCHES))
def test_a_library_protocol_the_program_replaced_before_compiling_runs(case):
    owner, name, replacement, f = LIBRARY_PATCHES[case]
    original = owner.__dict__[name]
    setattr(owner, name, replacement)
    try:
        minidynamo.reset()
        with torch.no_grad():
            got, expected = minidynamo.optimize("eager")(f)(X), f(X)
    finally:
        setattr(owner, name, original)
    assert torch.equal(got, expected)


class Settings:
    def __init__(self):
        self._scale, self.history = 1.0, []

    @property
    def scale(self):
        return self._scale

    @scale.setter
    def scale(self, value):
        self._scale = value
        self.history.append(value)

    @property
    def frozen(self):
        return 1


def test_a_property_setter_runs_traced():
    def fn(x, s):
        s.scale = 3.0
        return x * s.scale

    minidynamo.reset()
    compiled = minidynamo.optimize("eager")(fn)
    ours, theirs = Settings(), Settings()
    for _ in range(3):
        torch.testing.assert_close(compiled(X, ours), fn(X, theirs))
        assert vars(ours) == vars(theirs)
    assert minidynamo.counters["compiles"] == 1 and not minidynamo.counters["fallback_reasons"]
    original = Settings.__dict__["scale"]
    Settings.scale = original.setter(lambda self, value: setattr(self, "_scale", -value))
    try:                                      # the setter replaced on the class: seen
        torch.testing.assert_close(compiled(X, ours), fn(X, theirs))
        assert vars(ours) == vars(theirs)
    finally:
        Settings.scale = original


def test_a_property_without_a_setter_refuses_the_store_as_eager_does():
    def fn(x, s):
        s.frozen = 2
        return x + 1

    with pytest.raises(AttributeError):
        fn(X, Settings())
    with pytest.raises(AttributeError):
        minidynamo.optimize("eager")(fn)(X, Settings())


# ---------------------------------------------------------------- code the class runs, inlined

class WithDefault(Base):
    """A namedtuple subclass with its own ``__new__`` ending in the base's (torch's PackedSequence)."""
    made = []

    def __new__(cls, a, b=None):
        WithDefault.made.append(cls.__name__)
        return super().__new__(cls, a, a * 2 if b is None else b)


def test_a_namedtuple_with_its_own_new_is_captured_through_it():
    def f(x):
        p = WithDefault(x + 1)
        raw = tuple.__new__(Base, (x, x - 1))
        return p, p.b * 3, raw, type(p).__name__

    WithDefault.made.clear()
    minidynamo.reset()
    compiled = minidynamo.optimize("eager")(f)
    got = [compiled(X), compiled(X + 1)]
    assert WithDefault.made == ["WithDefault"] * 2        # (the eager runs below add theirs)
    expected = [f(X), f(X + 1)]
    for g, e in zip(got, expected):
        assert type(g[0]) is WithDefault and type(g[2]) is Base and g[3] == e[3]
        for a, b in zip((*g[0], g[1], *g[2]), (*e[0], e[1], *e[2])):
            assert torch.equal(a, b)
    assert minidynamo.counters["compiles"] == 1 and not minidynamo.counters["fallback_reasons"]


def test_replacing_a_namedtuples_own_new_recompiles():
    kind = type("Pair", (Base,), {"__new__": lambda cls, a: Base.__new__(cls, a, a)})

    def f(x):
        return kind(x).b

    minidynamo.reset()
    compiled = minidynamo.optimize("eager")(f)
    assert torch.equal(compiled(X), X)
    kind.__new__ = staticmethod(lambda cls, a: Base.__new__(cls, a, a + 5))
    assert torch.equal(compiled(X), X + 5)


class Lazy:
    """A non-data descriptor in Python that caches into the instance (torch.distributions'
    ``lazy_property``): the first read runs ``__get__``, later reads find the instance's value."""

    def __init__(self, fn):
        self.fn = fn

    def __get__(self, obj, cls=None):
        value = self.fn(obj)
        setattr(obj, self.fn.__name__, value)
        return value


class Doubled:
    """A data descriptor: it answers even when the instance has the name."""

    def __get__(self, obj, cls=None):
        return obj._k * 2

    def __set__(self, obj, value):
        obj._k = value


class Holder2:
    k = Doubled()

    def __init__(self, t):
        self.t = t
        self.k = 3

    @Lazy
    def squared(self):
        return self.t * self.t


def test_a_python_descriptor_is_inlined_and_its_store_lands():
    def f(h, x):
        return h.squared + x, h.k * x

    minidynamo.reset()
    compiled = minidynamo.optimize("eager")(f)
    for step in range(3):
        eager_h, our_h = Holder2(X + step), Holder2(X + step)
        for _ in range(2):      # the second read finds the cached value in the instance
            expected, got = f(eager_h, X), compiled(our_h, X)
            assert all(torch.equal(a, b) for a, b in zip(expected, got))
            assert torch.equal(our_h.__dict__["squared"], eager_h.__dict__["squared"])
    assert not minidynamo.counters["fallback_reasons"]
    assert minidynamo.counters["compiles"] == 2      # before and after the instance has the value


def test_a_descriptor_replaced_on_its_class_recompiles():
    class Const:
        def __get__(self, obj, cls=None):
            return 2.0

    class Box:
        v = Const()

    def f(b, x):
        return x * b.v

    minidynamo.reset()
    compiled = minidynamo.optimize("eager")(f)
    assert torch.equal(compiled(Box(), X), X * 2)
    Const.__get__ = lambda self, obj, cls=None: 5.0
    assert torch.equal(compiled(Box(), X), X * 5)


class Cached:
    def __init__(self, t):
        self.t = t
        self.computed = 0

    @functools.cached_property
    def squared(self):
        self.computed += 1
        return self.t * self.t


class SlottedCached:
    __slots__ = ("t",)

    def __init__(self, t):
        self.t = t

    @functools.cached_property
    def squared(self):
        return self.t * self.t


def test_functools_cached_property_is_traced_without_its_lock():
    """``functools.cached_property``'s first read takes an RLock (Python 3.11), which the trace
    cannot enter: the whole frame ran eagerly.  Its lockless stand-in (``stand_ins``, Python
    3.12's) computes once, stores into the instance's ``__dict__``, and later reads find it."""
    def f(h, x):
        return h.squared + x, h.squared * x

    minidynamo.reset()
    compiled = minidynamo.optimize("eager")(f)
    for step in range(3):
        eager_h, our_h = Cached(X + step), Cached(X + step)
        for _ in range(2):
            expected, got = f(eager_h, X), compiled(our_h, X)
            assert all(torch.equal(a, b) for a, b in zip(expected, got))
            assert our_h.computed == eager_h.computed == 1
            assert torch.equal(our_h.__dict__["squared"], eager_h.__dict__["squared"])
        del eager_h.squared, our_h.squared        # computed again on the next read
        assert torch.equal(compiled(our_h, X)[0], f(eager_h, X)[0]) and our_h.computed == eager_h.computed == 2
    assert not minidynamo.counters["fallback_reasons"]


def test_a_cached_property_of_a_class_without_a_dict_raises_as_eager_does():
    def f(h, x):
        return h.squared + x

    with pytest.raises(TypeError, match="No '__dict__' attribute") as eager:
        f(SlottedCached(X), X)
    minidynamo.reset()
    with pytest.raises(TypeError) as ours:
        minidynamo.optimize("eager")(f)(SlottedCached(X), X)
    assert str(ours.value) == str(eager.value)

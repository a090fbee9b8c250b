"""What a program changes after compiling: a cached graph must not outlive what its trace read.

Each test calls the compiled function, changes one thing the trace relied on (a method put on a
class, a function's defaults, a tensor method), and checks that the next call answers as plain
Python does.  The families:

- a namedtuple of the program's class, modelled as a tuple with named fields, while the class
  later gains a method, a property for a field, or a special method tuple has;
- an attribute store, or an object made in the trace, while the class later gains a
  ``__setattr__``, a property for the stored name, a ``__getattr__`` or a ``__new__``;
- a constant of the program's class (an enum member) folded with its class's special methods
  (``str``, ``==``, ``bool``, ``+``), which the class later replaces;
- a function read without a source (a callable object's ``__call__``, ``h.__name__``): its
  defaults, code and names;
- a method the program put on ``torch.Tensor`` (and, with ``assume_libraries_unpatched`` off,
  torch's own tensor methods and operators), which a graph replayed as traced would keep.
"""

import collections
import enum

import pytest
import torch
from torch import nn

import minidynamo


def answers_around(fn, change, *args, backend="eager"):
    """(compiled, plain) answers of ``fn(*args)`` before and after ``change()``."""
    minidynamo.reset()
    compiled = minidynamo.optimize(backend)(fn)
    before = compiled(*args), fn(*args)
    change()
    return before, (compiled(*args), fn(*args))


def assert_as_plain_python(pairs):
    for got, expected in pairs:
        assert got.dtype == expected.dtype and torch.allclose(got, expected), (got, expected)


X = torch.arange(1.0, 5.0)


# ----------------------------------------------------------------------------- namedtuples

def plain_point():
    return type("Point", (collections.namedtuple("Point", "a b"),), {})


def point_change(name, value):
    def run(x, p):
        return {"a": lambda: x * p.a,
                "sc": lambda: x * p.sc(),
                "__len__": lambda: x * len(p),
                "__iter__": lambda: x * sum(p),
                "__add__": lambda: x * len(p + (1.0,)),
                "__eq__": lambda: x + 1 if p == (2.0, 3.0) else x - 1,
                "__contains__": lambda: x + 1 if 5.0 in p else x - 1,
                "__hash__": lambda: x * (hash(p) % 7),
                "__repr__": lambda: x * len(repr(p)),
                "_asdict": lambda: x * p._asdict()["a"]}[name]()
    return run, value


POINT_CHANGES = {
    "a": property(lambda self: 5.0),
    "sc": lambda self: 7.0,
    "__len__": lambda self: 7,
    "__iter__": lambda self: iter([7.0, 8.0]),
    "__add__": lambda self, other: (1.0,),
    "__eq__": lambda self, other: False,
    "__contains__": lambda self, item: True,
    "__hash__": lambda self: 3,
    "__repr__": lambda self: "P",
    "_asdict": lambda self: {"a": 9.0},
}


@pytest.mark.parametrize("name", sorted(POINT_CHANGES))
def test_a_namedtuple_class_changed_after_the_call_is_seen(name):
    point = plain_point()
    point.sc = lambda self: 2.0
    run, value = point_change(name, POINT_CHANGES[name])
    assert_as_plain_python(answers_around(run, lambda: setattr(point, name, value), X, point(2.0, 3.0)))


def test_a_method_of_a_namedtuple_made_in_the_frame_is_read_from_its_class():
    class Pair(collections.namedtuple("Pair", "a b")):
        def scale(self, k=1.0):
            return self.a * k

    def f(x):
        return x * Pair(2.0, 3.0).scale()

    assert_as_plain_python(answers_around(f, lambda: setattr(Pair, "scale", lambda self: 7.0), X))
    assert_as_plain_python(answers_around(f, lambda: setattr(Pair.scale, "__defaults__", (4.0,)), X))


def test_a_namedtuple_whose_new_is_replaced_is_made_by_the_new_one():
    Pair = plain_point()

    def f(x):
        return x * Pair(2.0, 3.0).b

    def replace_new():
        Pair.__new__ = lambda cls, a, b: tuple.__new__(cls, (a, b * 10))

    assert_as_plain_python(answers_around(f, replace_new, X))


# ----------------------------------------------------------------------------- class hooks of stores and new objects

def test_a_setattr_added_to_the_class_of_a_stored_object_runs():
    class Box:
        pass

    box = Box()

    def f(x):
        box.k = 3.0
        return x * box.k

    def add_hook():
        Box.__setattr__ = lambda self, name, value: object.__setattr__(self, name, value * 2)

    assert_as_plain_python(answers_around(f, add_hook, X))


NEW_OBJECT_CHANGES = {
    "__setattr__": lambda self, name, value: object.__setattr__(self, name, value * 3),
    "k": property(lambda self: 5.0, lambda self, value: None),
    "__getattr__": lambda self, name: 5.0,
    "__new__": staticmethod(lambda cls: Other()),
}


class Other:
    k = 9.0
    j = 9.0


@pytest.mark.parametrize("name", sorted(NEW_OBJECT_CHANGES))
def test_an_object_made_in_the_frame_follows_its_changed_class(name):
    class Made:
        def __init__(self):
            self.k = 2.0

    def f(x):
        made = Made()
        return x * made.k * getattr(made, "j", 1.0)

    assert_as_plain_python(answers_around(f, lambda: setattr(Made, name, NEW_OBJECT_CHANGES[name]), X))


def test_a_slot_replaced_by_a_class_attribute_refuses_the_store_as_python_does():
    class Slotted:
        __slots__ = ("k",)

        def __init__(self):
            self.k = 2.0

    def f(x):
        return x * Slotted().k

    minidynamo.reset()
    compiled = minidynamo.optimize("eager")(f)
    assert torch.equal(compiled(X), f(X))
    Slotted.k = 9.0
    with pytest.raises(AttributeError):
        compiled(X)


def test_a_property_setter_added_to_a_module_class_takes_the_store():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.k = 2.0

        def forward(self, x):
            self.k = 3.0
            return x * self.k

    net = Net()
    assert_as_plain_python(answers_around(
        net, lambda: setattr(Net, "k", property(lambda self: 7.0, lambda self, value: None)), X))


# ----------------------------------------------------------------------------- folded constants of the program's classes

class Colour(enum.Enum):
    RED = 1
    BLUE = 2


ENUM_CHANGES = {
    "str": ("__str__", lambda self: "z", lambda x: x * len(str(Colour.RED))),
    "format": ("__format__", lambda self, spec: "z", lambda x: x * len(f"{Colour.RED}")),
    "eq": ("__eq__", lambda self, other: True, lambda x: x + 1 if Colour.RED == Colour.BLUE else x - 1),
    "bool": ("__bool__", lambda self: False, lambda x: x + 1 if Colour.RED else x - 1),
}


@pytest.mark.parametrize("case", sorted(ENUM_CHANGES))
def test_an_enum_member_folded_with_a_special_method_added_later(case):
    name, method, f = ENUM_CHANGES[case]
    try:
        assert_as_plain_python(answers_around(f, lambda: setattr(Colour, name, method), X))
    finally:
        if name in Colour.__dict__:
            delattr(Colour, name)


def test_an_int_enum_whose_add_is_replaced():
    class Size(enum.IntEnum):
        SMALL = 2

    def f(x):
        return x * (Size.SMALL + 1)

    assert_as_plain_python(answers_around(f, lambda: setattr(Size, "__add__", lambda self, other: 10), X))


# ----------------------------------------------------------------------------- functions read without a source

def test_the_defaults_of_a_callable_objects_call_are_guarded():
    class Scale:
        def __call__(self, x, k=2.0):
            return x * k

    scale = Scale()

    def f(x):
        return scale(x)

    assert_as_plain_python(answers_around(f, lambda: setattr(Scale.__call__, "__defaults__", (5.0,)), X))


def test_a_functions_name_read_by_the_frame_is_guarded():
    def helper():
        pass

    def f(x):
        return x * len(helper.__name__)

    assert_as_plain_python(answers_around(f, lambda: setattr(helper, "__name__", "a_longer_name"), X))


# ----------------------------------------------------------------------------- tensor methods replayed by name

BACKENDS = ["eager", "torchxla_trace_once"]


def backend_ready(backend):
    if backend != "eager":
        pytest.importorskip("torch_xla")
        import xla_bridge  # noqa: F401  (registers the backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_method_the_program_put_on_tensor_is_replaced(backend):
    backend_ready(backend)
    torch.Tensor.probe_scale = lambda self: self * 2
    try:
        def f(x):
            return x.probe_scale()

        pairs = answers_around(f, lambda: setattr(torch.Tensor, "probe_scale", lambda self: self * 3), X,
                               backend=backend)
    finally:
        del torch.Tensor.probe_scale
    assert_as_plain_python(pairs)


def summed(x):
    total = 0
    for v in x:
        total = total + v
    return total


TORCH_PATCHES = {
    "method": ("add", lambda self, other: self * 100, lambda x: x.add(1)),
    "operator": ("__add__", lambda self, other: self * 100, lambda x: x + 1),
    "index": ("__getitem__", lambda self, index: torch.zeros(()), lambda x: x[0] + 1),
    "iteration": ("__iter__", lambda self: iter([self[0]]), summed),
    "property": ("real", property(lambda self: self * 100), lambda x: x.real + 1),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", sorted(TORCH_PATCHES))
def test_torch_tensor_patched_with_the_library_assumption_off(case, backend, monkeypatch):
    backend_ready(backend)
    name, patch, f = TORCH_PATCHES[case]
    monkeypatch.setattr(minidynamo.config, "assume_libraries_unpatched", False)
    original = torch.Tensor.__dict__.get(name)          # ``add`` lives on torch._C.TensorBase
    try:
        pairs = answers_around(f, lambda: setattr(torch.Tensor, name, patch), X, backend=backend)
    finally:
        if original is None:
            delattr(torch.Tensor, name)
        else:
            setattr(torch.Tensor, name, original)
    assert_as_plain_python(pairs)


@pytest.mark.parametrize("backend", BACKENDS)
def test_nn_module_getattr_patched_with_the_library_assumption_off(backend, monkeypatch):
    backend_ready(backend)
    monkeypatch.setattr(minidynamo.config, "assume_libraries_unpatched", False)
    first, other = nn.Linear(4, 4), nn.Linear(4, 4)

    class Holder(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = first

        def forward(self, x):
            return self.lin(x)

    holder, original = Holder(), nn.Module.__getattr__

    def f(x):
        return holder(x)

    def patch():
        nn.Module.__getattr__ = lambda self, name: other if name == "lin" else original(self, name)

    try:
        with torch.no_grad():
            pairs = answers_around(f, patch, X, backend=backend)
    finally:
        nn.Module.__getattr__ = original
    assert_as_plain_python(pairs)

"""A cached graph must not outlive what it read: enum members and callable objects.

An enum member is guarded by identity, but it is an ordinary object: its fields (``_value_``,
``_name_``, what its ``__init__`` set) can be reassigned, and its class's methods and properties
are Python code that may read globals.  A callable object runs what its class finds for
``__call__``, which the class can replace.  Each test calls the compiled function, changes that
state, and checks the next call answers as plain Python does.
"""

import enum
import sys

import torch

import minidynamo

SCALE = 2


class Mode(enum.Enum):
    FAST = 1
    SLOW = 2

    def factor(self):
        return SCALE

    @property
    def weight(self):
        return SCALE + 1


class Activation(enum.Enum):
    RELU = ("relu", 2)

    def __init__(self, label, gain):
        self.gain = gain


def run_twice(fn, owner, name, value, *args):
    """The compiled answers before and after ``owner.name = value`` (set back afterwards), each
    next to plain Python's."""
    minidynamo.reset()
    compiled = minidynamo.optimize("eager")(fn)
    first = compiled(*args), fn(*args)
    old = getattr(owner, name)
    setattr(owner, name, value)
    try:
        second = compiled(*args), fn(*args)
    finally:
        setattr(owner, name, old)
    return first, second


def assert_fresh(pairs):
    for got, expected in pairs:
        assert got.dtype == expected.dtype and torch.equal(got, expected), (got, expected)


def test_enum_value_reassigned_on_the_member():
    def f(x):
        return x * Mode.FAST.value

    assert_fresh(run_twice(f, Mode.FAST, "_value_", 5, torch.arange(4.)))


def test_enum_member_passed_as_an_argument_and_its_name_changed():
    def f(x, mode):
        return x * len(mode.name)

    assert_fresh(run_twice(f, Mode.SLOW, "_name_", "SLOWEST", torch.arange(4.), Mode.SLOW))


def test_enum_field_set_by_its_init_changed():
    def f(x):
        return x * Activation.RELU.gain

    assert_fresh(run_twice(f, Activation.RELU, "gain", 7, torch.arange(4.)))


def test_enum_method_and_property_reading_a_global():
    def f(x):
        return x * Mode.FAST.factor() + Mode.SLOW.weight

    assert_fresh(run_twice(f, sys.modules[__name__], "SCALE", 3, torch.arange(4.)))


def test_enum_value_through_a_graph_break():
    def f(x):
        mode = Mode(2)             # not traced: the member reaches the resumed frame as a local
        return x * mode.value

    assert_fresh(run_twice(f, Mode.SLOW, "_value_", 9, torch.arange(4.)))


class Scaler:
    def __call__(self, x):
        return x * 2


def test_call_replaced_on_the_class_of_a_callable_object():
    scaler = Scaler()

    def f(x):
        return scaler(x)

    assert_fresh(run_twice(f, Scaler, "__call__", lambda self, x: x * 3, torch.arange(4.)))

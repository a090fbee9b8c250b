"""The guards a trace installs must reject exactly the changes that would make it wrong."""

import torch
from torch import nn

from guards import build_guard_function

from .helpers import raw_slots
from minidynamo.tracer import trace_frame

THRESHOLD = 2


def guard_for(fn, *args):
    slots = raw_slots(fn, args, {})
    capture = trace_frame(fn, slots)
    guard_fn = build_guard_function(capture.guards, capture.frame)
    assert guard_fn(fn, *slots)
    return lambda *new: guard_fn(fn, *raw_slots(fn, new, {}))


def uses_global(x):
    return x * THRESHOLD


def test_global_constant_is_guarded():
    global THRESHOLD
    accepts = guard_for(uses_global, torch.ones(2))
    THRESHOLD = 3
    try:
        assert not accepts(torch.ones(2))
    finally:
        THRESHOLD = 2
    assert accepts(torch.ones(2))


def test_closure_and_shapes_and_constants_are_guarded():
    k = 5

    def f(x, n, flag=None):
        return x * k + n if flag is None else x

    accepts = guard_for(f, torch.ones(2), 3)
    assert accepts(torch.zeros(2), 3)
    assert not accepts(torch.ones(3), 3)            # shape
    assert not accepts(torch.ones(2, dtype=torch.float64), 3)
    assert not accepts(torch.ones(2), 4)            # a Python int the trace specialised on
    assert not accepts(torch.ones(2), 3, 1)         # None-ness
    k = 6                                           # noqa: F841  (the closure cell changes)
    assert not accepts(torch.ones(2), 3)


class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = nn.Linear(2, 2)
        self.factor = 2.0

    def forward(self, x):
        return self.inner(x) * self.factor


def test_module_attributes_and_structure_are_guarded():
    m = Scaled()
    accepts = guard_for(Scaled.forward, m, torch.ones(1, 2))
    assert accepts(m, torch.ones(1, 2))
    m.factor = 3.0
    assert not accepts(m, torch.ones(1, 2))
    m.factor = 2.0
    m.inner = nn.Linear(2, 2)                       # a different submodule object
    assert not accepts(m, torch.ones(1, 2))
    assert not accepts(Scaled(), torch.ones(1, 2))  # another instance


def test_list_length_and_items_are_guarded():
    def f(xs):
        return sum(xs[1:], xs[0])

    accepts = guard_for(f, [torch.ones(2), torch.ones(2)])
    assert accepts([torch.zeros(2), torch.zeros(2)])
    assert not accepts([torch.zeros(2), torch.zeros(2), torch.zeros(2)])
    assert not accepts((torch.zeros(2), torch.zeros(2)))


class Optional(nn.Module):
    def forward(self, x):
        extra = getattr(self, "extra", None)
        return x if extra is None else x + extra


def test_absent_attribute_is_guarded():
    m = Optional()
    accepts = guard_for(Optional.forward, m, torch.ones(2))
    assert accepts(m, torch.ones(2))
    m.extra = 1.0
    assert not accepts(m, torch.ones(2))

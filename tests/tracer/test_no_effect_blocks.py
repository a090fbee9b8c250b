"""Blocks that change nothing the trace computes are traced through: a profiler range
(``torch.profiler.record_function``) while no profiler runs (guarded: under a profiler the
frame is traced again and the range runs, so the profile shows it), and
``torch._C.DisableTorchFunctionSubclass()`` (the trace holds no tensor subclass).  Before, each
broke the graph (the fuzzer's ``user_ctx`` feature met the first 59 times in three seeds)."""

import torch

import minidynamo

from .helpers import compiled_twice


def ranges(x):
    with torch.profiler.record_function("outer"):
        y = x.sin() * 2
        with torch.autograd.profiler.record_function("inner"):
            y = y + 1
    return y


def without_subclass_dispatch(x):
    with torch._C.DisableTorchFunctionSubclass() as inside:
        y = x.cos() + 1
    return y, inside


def test_profiler_ranges_are_one_graph():
    compiled_twice(ranges, lambda: (torch.randn(3),))


def test_a_running_profiler_sees_the_ranges():
    minidynamo.reset()
    compiled = minidynamo.optimize("eager")(ranges)
    x = torch.randn(3)
    torch.testing.assert_close(compiled(x), ranges(x))
    with torch.profiler.profile() as profile:
        torch.testing.assert_close(compiled(x), ranges(x))
    assert {"outer", "inner"} <= {event.name for event in profile.events()}


def test_disabling_subclass_dispatch_is_one_graph():
    compiled_twice(without_subclass_dispatch, lambda: (torch.randn(3),))

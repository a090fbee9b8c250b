"""Run a function through ``trace_frame`` and compare with eager PyTorch (the oracle)."""

import copy
import inspect

import numpy as np
import torch

import minidynamo
from guards import build_guard_function
from minidynamo.tracer import trace_frame


def raw_slots(fn, args, kwargs):
    """The frame's argument slots as CPython lays them out (defaults applied)."""
    sig = inspect.signature(fn, follow_wrapped=False)   # the code object's own parameters
    bound = sig.bind(*args, **kwargs)
    bound.apply_defaults()
    slots = []
    for name, p in sig.parameters.items():
        slots.append(bound.arguments[name] if name in bound.arguments else
                     (() if p.kind is p.VAR_POSITIONAL else {} if p.kind is p.VAR_KEYWORD else None))
    return tuple(slots)


def assert_same(a, b):
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor), (a, b)
        assert a.shape == b.shape and a.dtype == b.dtype and a.requires_grad == b.requires_grad, (a, b)
        torch.testing.assert_close(a, b, equal_nan=True)
    elif isinstance(a, (tuple, list)):
        assert type(a) is type(b) and len(a) == len(b), (a, b)
        for x, y in zip(a, b):
            assert_same(x, y)
    elif isinstance(a, torch.nn.Module):
        assert type(a) is type(b)
        assert_same(dict(a.state_dict()), dict(b.state_dict()))
        assert a.training == b.training
    elif isinstance(a, dict):
        assert type(a) is type(b) and list(a) == list(b), (a, b)
        for k in a:
            assert_same(a[k], b[k])
    elif hasattr(a, "__dict__") and not callable(a):
        assert type(a) is type(b)
        assert_same(dict(vars(a)), dict(vars(b)))
    else:
        assert type(a) is type(b) and (a == b or a is b), (a, b)


def run_traced(fn, *args, **kwargs):
    """Trace ``fn`` on ``args``, check its guards accept the call, and run the graph."""
    func = fn.forward.__func__ if isinstance(fn, torch.nn.Module) else fn
    call_args = (fn, *args) if isinstance(fn, torch.nn.Module) else args
    slots = raw_slots(func, call_args, kwargs)
    capture = trace_frame(func, slots)
    guard_fn = build_guard_function(capture.guards, capture.frame)
    assert guard_fn(func, *slots), guard_fn.failure_reason(func, *slots)
    return capture, capture.build_output(capture.graph_module(*capture.example_inputs), func, *slots)


def check(fn, *args, **kwargs):
    """``fn(*args)`` traced == eager, including what it does to its inputs."""
    eager_args, traced_args = copy.deepcopy((args, kwargs)), copy.deepcopy((args, kwargs))
    expected = fn(*eager_args[0], **eager_args[1])
    capture, got = run_traced(fn, *traced_args[0], **traced_args[1])
    assert_same(expected, got)
    assert_same(eager_args, traced_args)
    return capture


def compiled_twice(fn, make_args, graphs=1, fallbacks=0, breaks=0):
    """Run ``fn`` compiled on two calls (new inputs each, the same torch and numpy seeds as the
    eager run), compare with eager, check the counts the trace reported, return the report.
    A count given as None is not checked; with no fallback and no break, nothing may compile on
    call 2."""
    from minidynamo.eval_frame import OptimizeContext
    from minidynamo.explain import ExplainOutput

    minidynamo.reset()
    minidynamo.counters.reset()
    report = ExplainOutput()
    compiled = OptimizeContext("eager", recorder=report)(fn)
    for seed in (0, 1):
        torch.manual_seed(seed)
        args = make_args()
        np.random.seed(seed)
        expected = fn(*args)
        np.random.seed(seed)
        assert_same(expected, compiled(*args))
    if fallbacks is not None:
        assert report.fallback_count == fallbacks, report.reasons
    if graphs is not None:
        assert report.graph_count == graphs, report.reasons
    if breaks is not None:
        assert report.graph_break_count == breaks, report.reasons
    if fallbacks == 0 and breaks == 0:
        assert minidynamo.counters["compiles"] == 1, report.reasons      # nothing compiled on call 2
    # a graph that raises re-runs the frame eagerly: right answers that hide a broken graph
    assert minidynamo.counters.snapshot().get("graph_errors_rerun", 0) == 0
    minidynamo.reset()
    return report

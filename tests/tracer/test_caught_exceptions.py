"""Exceptions the traced Python raises and its own ``try`` catches (tracer/exceptions.py): the
tracer unwinds to the handler as CPython does and traces the handler, so the frame compiles
instead of running eagerly.  Every case compares with eager over calls that raise and calls
that do not (values, the exception type when one escapes, side effects)."""

import pytest
import torch

import minidynamo


@pytest.fixture(autouse=True)
def _fresh():
    minidynamo.reset()
    yield
    minidynamo.reset()


def key_or_default(x, d):
    try:
        s = d["scale"]
    except KeyError:
        s = 2.0
    return x * s


def index_or_default_as_e(x, xs):
    try:
        v = xs[3]
    except (IndexError, TypeError) as e:
        v = -1
    return x + v


def _lookup(d):
    return d["missing"] * 2


def raised_in_a_callee(x, d):
    try:
        return x * _lookup(d)
    except LookupError:
        return x - 1


def zero_division_with_finally(x, n):
    try:
        k = 10 // n
    except ZeroDivisionError:
        k = 0
    finally:
        x = x + 1
    return x * k


def nested_try_finally(x, d):
    try:
        try:
            v = d["a"]
        finally:
            x = x * 3
    except KeyError:
        v = 7
    return x + v


def inside_no_grad(x, d):
    with torch.no_grad():
        try:
            v = d["a"]
        except KeyError:
            v = 1
        y = x * v
    return y, torch.is_grad_enabled()


def else_clause_and_side_effects(x, d, log):
    log.append("before")
    try:
        v = d.pop("a")
    except KeyError:
        log.append("missing")
        v = 0
    else:
        log.append("found")
    return x + v


def loop_with_continue(x, keys, d):
    total = x * 0
    for k in keys:
        try:
            total = total + d[k]
        except KeyError:
            continue
    return total


CAUGHT = [
    (key_or_default, [({"scale": 3.0},), ({},)]),
    (index_or_default_as_e, [([1, 2, 3, 4],), ([1],)]),
    (raised_in_a_callee, [({"missing": 2},), ({},)]),
    (zero_division_with_finally, [(2,), (0,)]),
    (nested_try_finally, [({"a": 2},), ({},)]),
    (inside_no_grad, [({},), ({"a": 3},)]),
    (loop_with_continue, [(["a", "b"], {"a": 1}), (["b", "c"], {"c": 4})]),
]


def run_both(fn, opt, extra):
    x = torch.arange(3.0, requires_grad=True)
    return fn(x, *extra), opt(x, *extra)


@pytest.mark.parametrize("fn, calls", CAUGHT, ids=[fn.__name__ for fn, _ in CAUGHT])
def test_a_caught_exception_is_traced_and_compiles(fn, calls):
    opt = minidynamo.optimize("eager")(fn)
    for extra in calls * 2:                       # each path twice: the second one hits the cache
        expected, got = run_both(fn, opt, extra)
        torch.testing.assert_close(got, expected)
    assert minidynamo.counters["fallbacks"] == 0
    assert minidynamo.counters["compiles"] == len(calls)


def test_side_effects_before_and_in_the_handler_are_eagers():
    opt = minidynamo.optimize("eager")(else_clause_and_side_effects)
    for d in ({"a": 1.0}, {}, {"a": 2.0}, {}):
        x = torch.ones(2)
        log_eager, log_opt, d_eager, d_opt = [], [], dict(d), dict(d)
        torch.testing.assert_close(opt(x, d_opt, log_opt), else_clause_and_side_effects(x, d_eager, log_eager))
        assert (log_opt, d_opt) == (log_eager, d_eager)
    assert minidynamo.counters["fallbacks"] == 0


def unmatched(x, d):
    try:
        v = d["a"]
    except ValueError:
        v = 5
    return x * v


def reraised(x, d):
    try:
        v = d["a"]
    except KeyError:
        raise
    return x * v


def raised_again_from(x, d):
    try:
        v = d["a"]
    except KeyError as e:
        raise ValueError("no a") from e
    return x * v


def exception_object_used(x, d):
    try:
        v = d["a"]
    except KeyError as e:
        v = len(str(e))
    return x * v


def _lookup_under_no_grad(d):
    with torch.no_grad():
        return d["a"]


def crossing_a_with_block(x, d):
    try:
        v = _lookup_under_no_grad(d)
    except KeyError:
        v = torch.is_grad_enabled()
    return x * v


ESCAPING = [unmatched, reraised, raised_again_from, exception_object_used, crossing_a_with_block]


@pytest.mark.parametrize("fn", ESCAPING, ids=[fn.__name__ for fn in ESCAPING])
def test_what_is_not_caught_or_not_modelled_behaves_as_eager(fn):
    """Uncaught exceptions leave the frame (eager raises them); a handler that uses the
    exception object or an exception crossing a with block is not modelled: eager runs it."""
    opt = minidynamo.optimize("eager")(fn)
    for d in ({"a": 2.0}, {}, {"a": 3.0}, {}):
        x = torch.ones(2)
        try:
            expected = fn(x, d)
        except Exception as error:
            with pytest.raises(type(error)):
                opt(x, d)
        else:
            torch.testing.assert_close(opt(x, d), expected)

"""When the traced code itself raises (a missing key, a division by zero) and no handler of its
own catches it, the frame runs eagerly for that call, where Python raises; later calls that
take another path are still compiled.  (A handler that catches it is traced: exceptions.py.)

Before, one raising call made the frame eager for good: a function first called with a value
its ``try`` handles, or once with a bad argument its caller catches, never compiled again.
"""

import pytest
import torch

import minidynamo
from tests.test_soundness import CountingBackend


@pytest.fixture(autouse=True)
def fresh_caches():
    minidynamo.reset()
    yield
    minidynamo.reset()


def lookup_with_default(x, d):
    try:
        v = d["k"]
    except KeyError:
        v = 0
    return x * v + 1


def divide(x, n):
    return x * (10 // n)


def reads_its_frame(x):
    return x + len(globals())


def _outcome(fn, *args):
    try:
        return fn(*args)
    except Exception as e:   # noqa: BLE001 (the exception is the outcome)
        return type(e).__name__


def _entries(fn):
    return [(e.guard_fn is not None, e.compiled_fn is not None) for e in minidynamo.cache_entries(fn)]


def test_a_raise_the_program_handles_is_traced_through_its_handler():
    """(tracer/exceptions.py: both paths compile, the handler's too.)"""
    backend = CountingBackend()
    compiled = minidynamo.optimize(backend)(lookup_with_default)
    x = torch.ones(3)
    for d in ({}, {"k": 2}, {}, {"k": 2}):
        torch.testing.assert_close(compiled(x, d), lookup_with_default(x, d))
    assert backend.compiles == 2
    assert sorted(_entries(lookup_with_default)) == [(True, True), (True, True)]


def test_a_raise_that_reaches_the_caller_is_eager_and_other_values_compile():
    backend = CountingBackend()
    compiled = minidynamo.optimize(backend)(divide)
    x = torch.ones(3)
    for n in (0, 2, 0, 2):
        got, expected = _outcome(compiled, x, n), _outcome(divide, x, n)
        if isinstance(expected, str):
            assert got == expected == "ZeroDivisionError"
        else:
            torch.testing.assert_close(got, expected)
    assert backend.compiles == 1


def test_a_frame_that_cannot_be_traced_at_all_gives_up_for_good():
    backend = CountingBackend()
    compiled = minidynamo.optimize(backend)(reads_its_frame)
    compiled(torch.ones(3))
    assert _entries(reads_its_frame) == [(False, False)]


def test_raising_calls_count_against_the_cache_size_limit(monkeypatch):
    monkeypatch.setattr(minidynamo.config, "cache_size_limit", 3)
    backend = CountingBackend()
    compiled = minidynamo.optimize(backend)(lookup_with_default)
    x = torch.ones(3)
    for k in range(6):   # a new key set each call: each misses the path guards of the others
        d = {f"other{k}": k}
        torch.testing.assert_close(compiled(x, d), lookup_with_default(x, d))
    assert (False, False) in _entries(lookup_with_default)

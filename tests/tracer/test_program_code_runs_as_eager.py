"""The program's own Python (dunders, descriptors, hooks) runs exactly where and as often as in
eager: the tracer must not call it for its own purposes (to hash, compare, inspect or read a
value), since such code may count calls, log, or change state.  Each case counts the calls of a
program hook over several calls, eagerly and optimized."""

import io

import pytest
import torch

import minidynamo

CALLS = []


@pytest.fixture(autouse=True)
def fresh():
    minidynamo.reset()
    CALLS.clear()
    yield
    minidynamo.reset()
    CALLS.clear()


def calls_and_results(fn, make_args, n=3):
    results = [fn(*make_args()) for _ in range(n)]
    return list(CALLS), results


def same_calls(fn, make_args, reset_state=lambda: None):
    reset_state()
    CALLS.clear()
    expected = calls_and_results(fn, make_args)
    reset_state()
    CALLS.clear()
    actual = calls_and_results(minidynamo.optimize("eager")(fn), make_args)
    assert actual[0] == expected[0], f"the program's code ran as {actual[0]}, in eager {expected[0]}"
    assert repr(actual[1]) == repr(expected[1])


class HashCounts:
    def __init__(self, v):
        self.v = v

    def __str__(self):
        return f"T{self.v}"

    def __hash__(self):
        CALLS.append("hash")
        self.v += 1
        return 1


GLOBAL_OBJECT = HashCounts(3)


def formats_a_global(x):
    return x + 1, f"{GLOBAL_OBJECT}", GLOBAL_OBJECT.v


def test_a_globals_hash_is_not_asked_when_checking_for_frame_readers():
    """Probe L: ``graph_break._is_reader`` looked each global up in a dict, running its
    ``__hash__`` (which here changes the object: eager 'T3', optimized 'T7')."""
    def reset():
        GLOBAL_OBJECT.v = 3
    same_calls(formats_a_global, lambda: (torch.ones(2),), reset)

"""Callables and iterators the frame makes live on past a graph break (handed to the resume
function) and are returned: each is rebuilt per call (``templates.Templates``), where the frame
used to run eagerly whole.  Each case is compared with eager over three calls, and must compile
each graph once and never fall back."""

import itertools
import operator

import pytest
import torch

import minidynamo


@pytest.fixture(autouse=True)
def _fresh():
    minidynamo.reset()
    yield
    minidynamo.reset()


class Scaler:
    def __init__(self, k):
        self.k = k

    def apply(self, t):
        return t * self.k


def getter_across_a_break(x, xs):
    pick = operator.itemgetter(1, 0)
    name = operator.attrgetter("shape")
    print("a break")
    return pick(xs)[0] + x, name(x), pick


def method_of_an_object_made_here(x, xs):
    apply = Scaler(3).apply
    print("a break")
    return apply(x), apply


def c_method_of_a_constant(x, xs):
    join = "-".join
    print("a break")
    return x * len(join(["a", "bc"])), join


def chain_at_a_break(x, xs):
    chained = itertools.chain([x, x * 2], xs, (x * 3,))
    first = next(chained)
    print("a break")
    xs.append(x * 5)                  # chain takes iter(xs) only when it gets there: it sees this
    return first + sum(chained)


def counters_at_a_break(x, xs):
    steps = itertools.count(3, 2)
    same = itertools.repeat(x, 3)
    next(steps), next(same)
    print("a break")
    return list(same), steps      # (a real repeat iterated in the resume function: a break)


def comparable(value, probe):
    """Tensors by their values, a returned callable by its type and what it gives for ``probe``."""
    if isinstance(value, torch.Tensor):
        return value.tolist()
    if isinstance(value, (tuple, list)):
        return [comparable(v, probe) for v in value]
    if callable(value):
        return type(value).__name__, comparable(value(probe), probe)
    if isinstance(value, itertools.count):
        return repr(value)
    return value


# (the resume function then calls a real itemgetter, and iterates a real chain: breaks of their own)
@pytest.mark.parametrize("fn,probe,breaks", [
    (getter_across_a_break, ["a", "b"], 3), (method_of_an_object_made_here, torch.ones(2), 1),
    (c_method_of_a_constant, ["a", "b"], 1), (chain_at_a_break, None, 2), (counters_at_a_break, None, 2)])
def test_made_in_the_frame_and_kept_past_a_break(fn, probe, breaks, capsys):
    compiled = minidynamo.optimize("eager")(fn)
    for seed in range(3):
        x = torch.randn(2, generator=torch.Generator().manual_seed(seed))
        expected = fn(x, [x + 1, x - 1])
        got = compiled(x, [x + 1, x - 1])
        assert comparable(got, probe) == comparable(expected, probe)
    assert not minidynamo.counters["fallback_reasons"]
    assert minidynamo.counters["graph_breaks"] == breaks
    assert minidynamo.counters["recompiles"] == 0

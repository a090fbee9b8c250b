"""``match`` statements (tracer/match_statements.py): every kind of pattern compiles, each case
differential against eager over subjects that take different cases, and what the patterns read
of classes is guarded."""

import collections
import collections.abc
import dataclasses

import pytest
import torch

import minidynamo


@pytest.fixture(autouse=True)
def _fresh():
    minidynamo.reset()
    yield
    minidynamo.reset()


@dataclasses.dataclass
class Point:
    x: int
    y: int


Pair = collections.namedtuple("Pair", "a b")


class Box:
    def __init__(self, v):
        self.v = v


def literals_and_sequences(x, s):
    match s:
        case 0:
            return x + 1
        case [a, b]:
            return x * a + b
        case [a, *rest]:
            return x * a + len(rest)
        case (1 | 2) as q:
            return x + q * 10
        case None:
            return x
        case _:
            return x - 100


def mappings(x, s):
    match s:
        case {"k": v, **rest}:
            return x - v + len(rest)
        case {"j": v}:
            return x * v
        case _:
            return x


def classes(x, s):
    match s:
        case int(v) if v > 3:
            return x * v
        case str() as t:
            return x * len(t)
        case Point(x=0, y=yy):
            return x + yy
        case Point(xx, yy):
            return x * xx - yy
        case Pair(a, b=bb):
            return x + a * bb
        case Box(v=vv):
            return x * vv
        case _:
            return x - 1


CASES = [
    (literals_and_sequences, [0, [2, 3], [1, 2, 3, 4], (5,), 1, 2, None, "ab", range(3)]),
    (mappings, [{"k": 2, "z": 1}, {"j": 7}, {"q": 1}, collections.OrderedDict(k=3), [1]]),
    (classes, [7, 2, "abc", Point(0, 5), Point(2, 3), Pair(2, 3), Box(4), True, 2.5]),
]


@pytest.mark.parametrize("fn, subjects", CASES, ids=[fn.__name__ for fn, _ in CASES])
def test_each_pattern_kind_compiles_and_matches_eager(fn, subjects):
    minidynamo.config.cache_size_limit, limit = 64, minidynamo.config.cache_size_limit
    try:
        opt = minidynamo.optimize("eager")(fn)
        for _ in range(2):                   # the second round runs from the cache
            for s in subjects:
                torch.testing.assert_close(opt(torch.arange(3.0), s), fn(torch.arange(3.0), s))
        assert minidynamo.counters["fallbacks"] == 0
        assert minidynamo.counters["compiles"] <= len(subjects)
    finally:
        minidynamo.config.cache_size_limit = limit


def test_match_args_changed_later_is_seen():
    class Spot:
        __match_args__ = ("a",)

        def __init__(self):
            self.a, self.b = 1, 10

    def f(x, s):
        match s:
            case Spot(v):
                return x * v
        return x

    opt = minidynamo.optimize("eager")(f)
    torch.testing.assert_close(opt(torch.ones(2), Spot()), torch.ones(2))
    Spot.__match_args__ = ("b",)
    torch.testing.assert_close(opt(torch.ones(2), Spot()), torch.ones(2) * 10)


def test_a_class_registered_as_a_sequence_later_takes_the_sequence_case():
    class Bag:
        def __len__(self):
            return 2

        def __getitem__(self, i):
            if i >= 2:
                raise IndexError(i)
            return i

    def f(x, s):
        match s:
            case [a, b]:
                return x + b
        return x

    opt = minidynamo.optimize("eager")(f)
    torch.testing.assert_close(opt(torch.ones(2), Bag()), torch.ones(2))
    assert minidynamo.counters["fallbacks"] == 0
    collections.abc.Sequence.register(Bag)
    torch.testing.assert_close(opt(torch.ones(2), Bag()), torch.ones(2) + 1)


def test_a_key_removed_between_calls_takes_another_case():
    d = {"k": 1, "z": 2}
    opt = minidynamo.optimize("eager")(mappings)
    torch.testing.assert_close(opt(torch.ones(2), d), mappings(torch.ones(2), d))
    del d["k"]
    d["j"] = 3
    torch.testing.assert_close(opt(torch.ones(2), d), torch.ones(2) * 3)

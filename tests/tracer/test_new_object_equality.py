"""``==`` between objects made in the trace follows their class: identity only when ``__eq__`` is
``object``'s (fuzz seed 20261130 #164 found a dataclass compared by identity)."""

import collections
import dataclasses

import torch

import minidynamo


@dataclasses.dataclass
class Pt:
    a: int
    b: int


class Plain:
    def __init__(self, a):
        self.a = a


class Items(collections.OrderedDict):
    pass


def by_dataclass(x, n):
    if Pt(n, 1) == Pt(n, 1):
        return x + 1
    return x - 1


def by_identity(x, n):
    p = Plain(n)
    if p == Plain(n) or p != p:
        return x - 1
    return x + 1


def by_items(x, n):
    if Items(a=n) == Items(a=n):
        return x + 1
    return x - 1


def test_equality_of_new_objects_matches_eager():
    x = torch.ones(3)
    for fn in (by_dataclass, by_identity, by_items):
        report = minidynamo.explain(fn)(x, 2)
        torch.testing.assert_close(report.output, fn(x, 2))
        opt = minidynamo.optimize("eager")(fn)
        for n in (2, 3):
            torch.testing.assert_close(opt(x, n), fn(x, n))
    assert minidynamo.explain(by_identity)(x, 2).graph_count == 1    # object's own == is identity: captured
    minidynamo.reset()

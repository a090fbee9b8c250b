"""The methods that walk a module tree (``parameters()``, ``children()``, ``modules()``, their
``named_`` forms) give generators in eager, ``reversed()`` of a ModuleList or a Sequential gives a
``reversed`` object, and a ModuleDict's ``keys()``/``values()``/``items()`` are its ``_modules``'
live views: traced, each is an object of that very type.  An iterator is one pass, so
``next(self.parameters())`` (how many models find their dtype or device) works, a second pass
finds nothing and ``len()`` raises as in eager; a view has set operations.  Found by the
fuzzer's ``module_tree`` feature: ``next(NET.parameters())`` raised ``TypeError: 'tuple' object is not an iterator`` where eager
answered, and ``reversed(NET.blocks)`` ran the whole frame eagerly."""

import random

import pytest
import torch
from torch import nn

import minidynamo

from .helpers import compiled_twice


class Scale(nn.Module):
    def __init__(self, w):
        super().__init__()
        self.weight = nn.Parameter(torch.tensor(w))

    def forward(self, t):
        return t * self.weight


def make_net():
    shared = Scale(3.0)
    net = nn.Module()
    net.blocks = nn.ModuleList([Scale(0.5), nn.Tanh(), shared])
    net.seq = nn.Sequential(Scale(-1.0), nn.ReLU(), shared)   # one module under two names
    net.heads = nn.ModuleDict({"a": Scale(2.0), "b": nn.Sigmoid()})
    net.register_buffer("offset", torch.tensor(0.25))
    return net


NET = make_net()


def opaque(value):
    """A call the tracer does not model: a graph break."""
    return random.Random(0).random() >= 0 and value


def first_parameter_dtype(x):
    return x.to(next(NET.parameters()).dtype) * next(NET.parameters())


def one_pass(x):
    params = NET.parameters()
    first = len(list(params))
    return x * first, len(list(params)), type(params).__name__


def walk_names(x):
    names = [name for name, _ in NET.named_modules()]
    count = sum(1 for _ in NET.modules())
    kinds = [type(m).__name__ for m in NET.children()]
    return x * count, names, kinds, [name for name, _ in NET.named_buffers()]


def reversed_blocks(x):
    for block in reversed(NET.blocks):
        x = block(x)
    return x, [type(m).__name__ for m in reversed(NET.seq)]


def module_dict_views(x):
    keys = NET.heads.keys()
    outs = [head(x) for head in NET.heads.values()]
    return outs, type(keys).__name__, sorted(keys - {"a"}), [k for k, _ in NET.heads.items()]


@pytest.mark.parametrize("fn", [first_parameter_dtype, one_pass, walk_names, reversed_blocks, module_dict_views])
def test_walks_trace_in_one_graph_and_agree(fn):
    compiled_twice(fn, lambda: (torch.randn(2, 3),))


TWICE = nn.Module()
TWICE.first = TWICE.second = NET.seq


def children_of_a_module_holding_one_child_twice(x):
    return x * len(list(TWICE.children())), [name for name, _ in TWICE.named_children()]


def test_a_child_held_twice_is_walked_once():
    """``named_children()`` yields a module under its first name only (as ``named_modules()``)."""
    compiled_twice(children_of_a_module_holding_one_child_twice, lambda: (torch.randn(2, 3),))


def test_len_of_a_walk_raises_as_in_eager():
    def f(x):
        return x * len(NET.parameters())

    with pytest.raises(TypeError, match="has no len"):
        f(torch.ones(2))
    minidynamo.reset()
    with pytest.raises(TypeError, match="has no len"):
        minidynamo.optimize("eager")(f)(torch.ones(2))


def test_a_walk_held_across_a_break_is_a_generator_at_its_place():
    def f(x):
        params = NET.parameters()
        x = x * next(params)
        params = opaque(params)             # the break: handed over as NET.parameters(), advanced
        return x * next(params), type(params).__name__, len(list(params))

    minidynamo.reset()
    x = torch.randn(3)
    expected = f(x)
    got = minidynamo.optimize("eager")(f)(x)
    torch.testing.assert_close(got[0], expected[0])
    assert got[1:] == expected[1:] and got[1] == "generator"


def test_a_break_inside_a_loop_over_reversed_blocks():
    def f(x):
        for block in reversed(NET.blocks):
            x = opaque(block(x))
        return x

    minidynamo.reset()
    x = torch.randn(3)
    torch.testing.assert_close(minidynamo.optimize("eager")(f)(x), f(x))


def test_a_changed_tree_is_seen():
    net = make_net()

    def f(x):
        for m in reversed(net.blocks):
            x = m(x)
        return x * sum(1 for _ in net.modules())

    minidynamo.reset()
    compiled = minidynamo.optimize("eager")(f)
    x = torch.randn(3)
    torch.testing.assert_close(compiled(x), f(x))
    net.blocks.append(Scale(2.0))
    torch.testing.assert_close(compiled(x), f(x))
    net.blocks[0] = nn.Sigmoid()
    torch.testing.assert_close(compiled(x), f(x))

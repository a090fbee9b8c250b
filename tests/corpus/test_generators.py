"""Generator functions and generator expressions driven by the frame: the body runs at each
pull, in CPython's order (variables/generators.py). One graph each. (What must still run
eagerly is in test_fallbacks.py's GENERATORS.)"""

import pytest
import torch
from torch import nn

from .helpers import check, params, single, tensor


def pairs(x):
    yield x
    yield x + 1


def scaled(x, factors):
    for f in factors:
        yield x * f
    return len(factors)


def consume_generator_with_list(x):
    return list(pairs(x))


def consume_generator_with_for(x):
    total = x
    for t in pairs(x):
        total = total + t
    return total


def loop_over_generator_expression(xs):
    total = 0
    for t in (u * 2 for u in xs):      # a for loop drives the generator
        total = total + t
    return total


def next_with_default(x):
    g = pairs(x)
    return next(g) * 2, next(g), next(g, x.sum())


def sum_of_a_generator(x, factors):
    return sum(scaled(x, factors))


def yield_from_and_its_value(x, factors):
    def outer():
        n = yield from scaled(x, factors)
        yield from [x.cos(), x.sin()]
        yield x * n
    return list(outer())


def generator_feeding_zip_and_enumerate(x, factors):
    return [(i, a + b) for i, (a, b) in enumerate(zip(scaled(x, factors), pairs(x)))]


def body_mutates_a_list_between_pulls(x, log):
    def traced(n):
        for i in range(n):
            log.append(i)
            yield x * len(log)
    out = []
    for t in traced(3):
        log.append(-1)
        out.append(t)
    return out


def break_out_of_a_generator(x):
    for i, t in enumerate(scaled(x, [1, 2, 3, 4])):
        if i == 1:
            break
    return t


class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 4)])

    def blocks(self):
        yield from self.layers

    def forward(self, x):
        for block in self.blocks():
            x = block(x).relu()
        return x


def call_module(model, x):
    return model(x)


def two_items(x):
    yield x
    yield x + 1


def sends_into_a_generator(x):
    g = two_items(x)
    first = next(g)
    return first + g.send(x)


GENERATOR_FUNCTIONS = [
    single(sends_into_a_generator, tensor(3)),
    single(consume_generator_with_list, tensor(3)),
    single(consume_generator_with_for, tensor(3)),
    single(loop_over_generator_expression, [tensor(3), tensor(3)]),
    single(next_with_default, tensor(3)),
    single(sum_of_a_generator, tensor(3), [1, 2.5, 3]).then(tensor(3), [2]),
    single(yield_from_and_its_value, tensor(3), [2, 3]),
    single(generator_feeding_zip_and_enumerate, tensor(3), [1, 2, 3]),
    single(body_mutates_a_list_between_pulls, tensor(3), []),
    single(break_out_of_a_generator, tensor(3)),
    single(call_module, Stack(), tensor(2, 4)).named("generator_method_of_a_module"),
]


@pytest.mark.parametrize("case", params(GENERATOR_FUNCTIONS))
def test_generator_functions(case):
    check(case)

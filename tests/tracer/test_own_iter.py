"""``for x in obj`` where obj's class defines ``__iter__`` in Python: the method is inlined as
CPython calls it (found on the class), for plain objects, objects the frame made and modules
(a detectron2 ``BufferList``, fairseq's ``LayerDropModuleList``).  Each case compares with eager."""

import pytest
import torch
from torch import nn

import minidynamo


@pytest.fixture(autouse=True)
def _fresh():
    minidynamo.reset()
    yield
    minidynamo.reset()


class Bag:
    def __init__(self, items):
        self.items = items

    def __iter__(self):
        return iter(self.items)


class Doubled:
    def __init__(self, items):
        self.items = items

    def __iter__(self):
        for item in self.items:
            yield item * 2


class BufferList(nn.Module):
    def __init__(self, buffers):
        super().__init__()
        for i, b in enumerate(buffers):
            self.register_buffer(str(i), b, persistent=False)

    def __len__(self):
        return len(self._buffers)

    def __iter__(self):
        return iter(self._buffers.values())


class Anchors(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell_anchors = BufferList([torch.randn(3, 4), torch.randn(2, 4)])

    def forward(self, x):
        return [x.sum() + a for a in self.cell_anchors]


class LayerDropModuleList(nn.ModuleList):
    def __init__(self, p, modules):
        super().__init__(modules)
        self.p = p

    def __iter__(self):
        dropout_probs = torch.empty(len(self)).uniform_()
        for i, m in enumerate(super().__iter__()):
            if not self.training or dropout_probs[i] > self.p:
                yield m


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = LayerDropModuleList(0.5, [nn.Linear(4, 4) for _ in range(3)])

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x


def test_a_plain_object_and_a_generator_method():
    def f(x, bag, doubled):
        return sum(t for t in bag) + sum(list(doubled)) + x

    compiled = minidynamo.optimize("eager")(f)
    for _ in range(2):
        args = (torch.randn(2), Bag([torch.randn(2), torch.randn(2)]), Doubled([torch.randn(2)]))
        torch.testing.assert_close(compiled(*args), f(*args))
    assert minidynamo.counters["compiles"] == 1 and not minidynamo.counters["fallback_reasons"]


def test_an_object_made_in_the_frame():
    def f(x):
        return [t + 1 for t in Doubled([x, x * 3])]

    x = torch.randn(3)
    torch.testing.assert_close(minidynamo.optimize("eager")(f)(x), f(x))
    assert minidynamo.counters["graph_breaks"] == 0 and not minidynamo.counters["fallback_reasons"]


def test_a_module_iterating_its_buffers_and_a_buffer_added():
    model = Anchors()
    compiled = minidynamo.optimize("eager")(model)
    x = torch.randn(2)
    torch.testing.assert_close(compiled(x), model(x))
    assert minidynamo.counters["compiles"] == 1 and not minidynamo.counters["fallback_reasons"]
    model.cell_anchors.register_buffer("2", torch.randn(5, 4), persistent=False)
    got = compiled(x)
    assert len(got) == 3
    torch.testing.assert_close(got, model(x))


@pytest.mark.parametrize("training", [False, True])
def test_layer_drop_in_eval_and_training(training):
    model = Encoder().train(training)
    compiled = minidynamo.optimize("eager")(model)
    for seed in range(3):
        x = torch.randn(2, 4)
        torch.manual_seed(seed)
        expected = model(x)
        torch.manual_seed(seed)
        torch.testing.assert_close(compiled(x), expected)
    if not training:
        assert minidynamo.counters["compiles"] == 1 and not minidynamo.counters["fallback_reasons"]


def test_the_class_method_replaced_and_a_non_iterator_returned():
    def f(x, bag):
        return [t * x for t in bag]

    compiled = minidynamo.optimize("eager")(f)
    x, bag = torch.randn(2), Bag([torch.randn(2), torch.randn(2)])
    torch.testing.assert_close(compiled(x, bag), f(x, bag))
    original = Bag.__iter__
    try:
        Bag.__iter__ = lambda self: reversed(self.items)
        torch.testing.assert_close(compiled(x, bag), f(x, bag))
        Bag.__iter__ = lambda self: self.items            # not an iterator: TypeError, as eager
        with pytest.raises(TypeError, match="non-iterator"):
            f(x, bag)
        with pytest.raises(TypeError, match="non-iterator"):
            compiled(x, bag)
    finally:
        Bag.__iter__ = original


def test_unpacking_star_calls_and_membership_walk_the_method():
    def f(x, bag):
        a, b = bag
        c, *rest = Doubled([x, x, x])
        found = 3 in Bag([1, 3]), "z" in Bag(["p"])        # no __contains__: CPython walks __iter__
        return a + b + c + torch.stack(rest).sum(), torch.stack([*bag]), max(*Bag([1, 5, 2])), found

    compiled = minidynamo.optimize("eager")(f)
    x, bag = torch.randn(2), Bag([torch.randn(2), torch.randn(2)])
    got, expected = compiled(x, bag), f(x, bag)
    torch.testing.assert_close(got, expected)
    assert minidynamo.counters["graph_breaks"] == 0 and not minidynamo.counters["fallback_reasons"]


def test_membership_stops_at_the_first_match_as_cpython_does():
    seen = []

    class Logged:
        def __iter__(self):
            for k in (1, 2, 3):
                seen.append(k)
                yield k

    def f(x):
        return x + 1 if 2 in Logged() else x

    x = torch.zeros(1)
    torch.testing.assert_close(minidynamo.optimize("eager")(f)(x), f(x))
    assert seen == [1, 2, 1, 2]

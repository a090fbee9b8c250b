"""Calling a weak reference reads its referent, guarded as what it is now (an object by
identity, a tensor by its metadata, None once it died).  Before, the call broke the frame:
``nn.LSTM`` and ``nn.GRU`` call their weights' weak references on every forward
(``_weights_have_changed``), so every recurrent model split in two."""

import gc
import weakref

import pytest
import torch
from torch import nn

import minidynamo

from .helpers import compiled_twice


@pytest.mark.parametrize("make", [lambda: nn.LSTM(4, 3, batch_first=True), lambda: nn.GRU(4, 3, num_layers=2)],
                         ids=["lstm", "gru"])
def test_recurrent_modules_are_one_graph(make):
    torch.manual_seed(0)
    rnn = make()
    compiled_twice(lambda x: rnn(x)[0], lambda: (torch.randn(2, 5, 4),))


def test_a_replaced_weight_is_seen_through_its_weak_reference():
    torch.manual_seed(0)
    lstm = nn.LSTM(4, 3)
    compiled = minidynamo.optimize("eager")(lambda x: lstm(x)[0])
    x = torch.randn(5, 2, 4)
    torch.testing.assert_close(compiled(x), lstm(x)[0])
    lstm.weight_ih_l0 = nn.Parameter(torch.randn(12, 4))     # the module's refs now name the old one
    torch.testing.assert_close(compiled(x), lstm(x)[0])


class Holder:
    pass


def test_a_referent_that_dies_is_none_on_the_next_call():
    owners = [nn.Linear(2, 2)]
    ref = weakref.ref(owners[0])
    minidynamo.counters.reset()

    def f(x):
        layer = ref()
        return layer(x) if layer is not None else x * -1

    minidynamo.reset()
    compiled = minidynamo.optimize("eager")(f)
    x = torch.ones(2)
    torch.testing.assert_close(compiled(x), owners[0](x))
    owners.clear()
    gc.collect()
    torch.testing.assert_close(compiled(x), x * -1)
    assert minidynamo.counters["fallbacks"] == 0


def test_a_referent_the_frame_may_let_die_breaks_the_graph():
    """The frame drops ``obj``; eager's ``ref()`` then finds it dead, which a trace (holding
    everything until it returns) cannot see: the call breaks the graph and runs eagerly."""
    def f(x):
        obj = Holder()
        ref = weakref.ref(obj)
        y = x * 2
        obj = None
        return y, ref() is None

    minidynamo.reset()
    assert minidynamo.optimize("eager")(f)(torch.ones(2))[1] is True

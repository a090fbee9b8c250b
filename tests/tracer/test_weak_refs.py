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
    def __init__(self, k):
        self.k = k


def test_a_referent_that_dies_is_none_on_the_next_call():
    held = Holder(3)
    ref = weakref.ref(held)

    def f(x):
        target = ref()
        return x * (target.k if target is not None else -1)

    minidynamo.reset()
    compiled = minidynamo.optimize("eager")(f)
    x = torch.ones(2)
    torch.testing.assert_close(compiled(x), x * 3)
    held.k = 5
    torch.testing.assert_close(compiled(x), x * 5)
    del held
    gc.collect()
    torch.testing.assert_close(compiled(x), x * -1)

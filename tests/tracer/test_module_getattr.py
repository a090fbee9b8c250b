"""A module class with its own ``__getattr__`` in Python (PEFT's ``LoraLayer`` and ``PeftModel``
forward what they lack to the model they wrap, after ``super().__getattr__``): the method is
inlined for a name neither the instance nor the class has, as CPython calls it, and that
absence is guarded (a later instance attribute wins)."""

import pytest
import torch
from torch import nn

import minidynamo


@pytest.fixture(autouse=True)
def _fresh():
    minidynamo.reset()
    yield
    minidynamo.reset()


class Forwarding(nn.Module):
    def __getattr__(self, name):
        try:
            return super().__getattr__(name)        # parameters, buffers, submodules
        except AttributeError:
            return getattr(self.wrapped, name)


class LoraLinear(Forwarding):
    def __init__(self, base):
        super().__init__()
        self.wrapped = base
        self.lora_a = nn.Linear(base.in_features, 2, bias=False)
        self.lora_b = nn.Linear(2, base.out_features, bias=False)

    def forward(self, x):
        # bias and in_features are the wrapped layer's, found by __getattr__
        return self.wrapped(x) + self.lora_b(self.lora_a(x)) * 0.5 + self.bias + self.in_features


class Model(Forwarding):
    def __init__(self, net):
        super().__init__()
        self.wrapped = net

    def forward(self, x):
        return self.wrapped(x) * self.scale


def test_attributes_forwarded_by_getattr_are_traced_and_guarded():
    torch.manual_seed(0)
    net = nn.Sequential(LoraLinear(nn.Linear(4, 4)), nn.ReLU())
    net.scale = 3.0
    model = Model(net)
    compiled = minidynamo.optimize("eager")(model)
    x = torch.randn(2, 4)
    torch.testing.assert_close(compiled(x), model(x))
    assert minidynamo.counters["compiles"] == 1 and minidynamo.counters["graph_breaks"] == 0
    assert not minidynamo.counters["fallback_reasons"]
    net.scale = 4.0                                 # what __getattr__ found changed
    torch.testing.assert_close(compiled(x), model(x))
    model.scale = 5.0                               # an instance attribute now stands before it
    torch.testing.assert_close(compiled(x), model(x))
    net[0].wrapped.bias.data.add_(1.0)
    torch.testing.assert_close(compiled(x), model(x))
    assert minidynamo.counters["compiles"] == 3


def test_a_name_nobody_has_raises_attributeerror_as_eager():
    class Broken(Forwarding):
        def __init__(self):
            super().__init__()
            self.wrapped = nn.Identity()

        def forward(self, x):
            return x * self.missing

    model = Broken()
    with pytest.raises(AttributeError):
        model(torch.ones(1))
    with pytest.raises(AttributeError):
        minidynamo.optimize("eager")(model)(torch.ones(1))

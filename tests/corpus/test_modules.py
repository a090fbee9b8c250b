"""nn.Module calls: forward inlined, self.training, super(), other methods of the module,
parameters and buffers, and in-place updates (of inputs and buffers) exactly as eager does.
Modules are passed in as arguments, so the helper can compare their state after each call."""

import pytest
import torch
from torch import nn
import torch.nn.functional as F

from .helpers import check, params, single, tensor

torch.manual_seed(0)


def call(module, *args, **kwargs):
    """The captured frame: calling a module, so its forward is inlined into this one graph."""
    return module(*args, **kwargs)


class TwoLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.fc2 = nn.Linear(8, 2)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


class TrainingSwitch(nn.Module):
    def forward(self, x):
        if self.training:
            return x * 2
        return x - 1


class Base(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.proj = nn.Linear(width, width)

    def forward(self, x):
        return self.proj(x).tanh()


class Child(Base):
    def __init__(self):
        super().__init__(3)
        self.extra = 0.5

    def forward(self, x):
        return super().forward(x) * self.extra + x


class WithHelperMethod(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def normalise(self, x, eps=1e-5):
        return (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True) + eps)

    def forward(self, x):
        return self.lin(self.normalise(x))


class RawParameters(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(3, 2))
        self.bias = nn.Parameter(torch.zeros(2))

    def forward(self, x):
        return x @ self.weight + self.bias


class ReadsBuffer(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("scale", torch.tensor([1.0, 2.0, 3.0]))

    def forward(self, x):
        return x * self.scale


class CountsCalls(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("calls", torch.zeros(()))

    def forward(self, x):
        self.calls.add_(1)
        return x + self.calls


class PlainAttributes(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = 3.0
        self.mode = "sum"
        self.layer = nn.Linear(2, 2)

    def forward(self, x):
        y = self.layer(x) * self.scale
        return y.sum() if self.mode == "sum" else y


class MutatesInput(nn.Module):
    def forward(self, x):
        x.relu_()
        x.mul_(2)
        return x


class MutatesInputSlice(nn.Module):
    def forward(self, x, y):
        x[:, 0] = y
        return x.sum()


class UsesLayerList(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(2, 2), nn.Linear(2, 2)])

    def forward(self, x):
        return self.layers[1](self.layers[0](x))


class KeywordForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x, *, residual=None, scale=1.0):
        y = self.lin(x) * scale
        if residual is not None:
            y = y + residual
        return y


class DictOutput(nn.Module):
    def __init__(self):
        super().__init__()
        self.head_a = nn.Linear(3, 1)
        self.head_b = nn.Linear(3, 2)

    def forward(self, x):
        return {"a": self.head_a(x), "b": self.head_b(x), "features": (x, x.mean())}


class FunctionalWithOwnWeight(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(2, 1, 3, 3))

    def forward(self, image):
        return F.conv2d(image, self.weight, padding=1)


class IteratesParameters(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(2, 2)
        self.b = nn.Linear(2, 2)

    def forward(self, x):
        penalty = torch.stack([p.pow(2).sum() for p in self.parameters()]).sum()
        return self.b(self.a(x)), penalty


class WithProperty(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2, 2)

    @property
    def out_features(self):
        return self.lin.out_features

    def forward(self, x):
        return self.lin(x) * self.out_features


class ReturnsOwnParameter(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(2))

    def forward(self, x):
        return x * self.weight, self.weight


class Outer(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = TwoLayer()
        self.norm = nn.LayerNorm(2)

    def forward(self, x):
        return self.norm(self.inner(x))


class NumberedLayers(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer0 = nn.Linear(2, 2)
        self.layer1 = nn.Linear(2, 2)
        self.norms = nn.ModuleList([nn.LayerNorm(2), nn.LayerNorm(2)])


class GetattrByName(NumberedLayers):
    def forward(self, x):
        for i in range(2):
            x = getattr(self, f"layer{i}")(x)
        return x


class NamedChildren(NumberedLayers):
    def forward(self, x):
        return x + 1, [name for name, _ in self.named_children()]


class ZipLayersAndNorms(NumberedLayers):
    def forward(self, x):
        for layer, norm in zip([self.layer0, self.layer1], self.norms):
            x = norm(layer(x))
        return x


GLOBAL_MODEL = TwoLayer()


def call_global_model(x):
    return GLOBAL_MODEL(x).softmax(-1)


def call_submodule_directly(model, x):
    return model.fc1(x).relu()


def call_forward_method(model, x):
    return model.forward(x) + 1


def model_in_sequence_twice(model, x):
    return model(model(x))


def bn_train():
    return nn.BatchNorm1d(3).train()


def bn_eval():
    bn = nn.BatchNorm1d(3)
    bn.running_mean.fill_(0.5)
    return bn.eval()


MODULES = [
    single(call, nn.Linear(3, 2), tensor(4, 3)).named("linear"),
    single(call, TwoLayer(), tensor(2, 4)).named("custom_two_layer"),
    single(call, TrainingSwitch().train(), tensor(3)).named("self_training_true"),
    single(call, TrainingSwitch().eval(), tensor(3)).named("self_training_false"),
    single(call, Child(), tensor(2, 3)).named("super_forward"),
    single(call, WithHelperMethod(), tensor(2, 3)).named("calls_another_method"),
    single(call, RawParameters(), tensor(4, 3)).named("raw_parameters"),
    single(call, ReadsBuffer(), tensor(2, 3)).named("reads_buffer"),
    single(call, CountsCalls(), tensor(2)).named("inplace_buffer_update"),
    single(call, bn_train(), tensor(4, 3)).named("batchnorm_train_updates_stats"),
    single(call, bn_eval(), tensor(4, 3)).named("batchnorm_eval"),
    single(call, PlainAttributes(), tensor(2)).named("plain_python_attributes"),
    single(call, MutatesInput(), tensor(3)).named("mutates_input_returns_it"),
    single(call, MutatesInputSlice(), tensor(2, 2), tensor(2)).named("mutates_input_slice"),
    single(call, UsesLayerList(), tensor(2)).named("indexes_module_list"),
    single(call, KeywordForward(), tensor(3), residual=tensor(3), scale=2.0)
    .named("keyword_forward"),
    single(call, DictOutput(), tensor(2, 3)).named("dict_output"),
    single(call, FunctionalWithOwnWeight(), tensor(1, 1, 4, 4)).named("functional_own_weight"),
    single(call, IteratesParameters(), tensor(2)).named("iterates_parameters"),
    single(call, WithProperty(), tensor(2)).named("module_property"),
    single(call, ReturnsOwnParameter(), tensor(2)).named("returns_own_parameter"),
    single(call, Outer(), tensor(3, 4)).named("nested_modules"),
    single(call, nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU(), nn.Flatten()), tensor(1, 1, 4, 4))
    .named("conv_sequential"),
    single(call, nn.Embedding(10, 3), torch.tensor([[1, 2], [3, 9]])).named("embedding"),
    single(call, GetattrByName(), tensor(2)).named("getattr_layer_by_name"),
    single(call, NamedChildren(), tensor(2)).named("named_children"),
    single(call, ZipLayersAndNorms(), tensor(2)).named("zip_layers_and_norms"),
    single(call_global_model, tensor(2, 4)),
    single(call_submodule_directly, TwoLayer(), tensor(2, 4)),
    single(call_forward_method, TwoLayer(), tensor(2, 4)),
    single(model_in_sequence_twice, nn.Linear(3, 3), tensor(3)),
]


@pytest.mark.parametrize("case", params(MODULES))
def test_modules(case):
    check(case)

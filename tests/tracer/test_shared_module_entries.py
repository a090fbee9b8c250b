"""One compiled entry shared by identical layers (tracer/module_sharing.py).

The first module seen at an argument of a code object keeps its identity guard; from the second
object of the same type there on, a module is guarded by type and state, not identity, when the
trace reads nothing of it but graph-input tensors, value-guarded constants and submodules under
the same rule.  So N identical layers compile two entries: the first layer's, and one shared by
all (the first layer included: the newer entry is tried first).  Every case compares with eager;
the sharing cases count the graphs the backend got; the soundness cases change one layer
(training, hooks, an attribute, shapes, dtypes, identity) and must recompile or stay correct."""

import pytest
import torch
from torch import nn

import minidynamo
from minidynamo import config

from ..corpus.helpers import CountingBackend
from .test_guards_from_trace import guard_for


@pytest.fixture(autouse=True)
def _fresh():
    minidynamo.reset()
    yield
    minidynamo.reset()


class Block(nn.Module):
    def __init__(self, width=8):
        super().__init__()
        self.lin = nn.Linear(width, width)
        self.norm = nn.LayerNorm(width)
        self.scale = 0.5
        self.register_buffer("shift", torch.full((width,), 0.25))

    def forward(self, x):
        y = self.norm(self.lin(x)).relu() * self.scale + self.shift
        if self.training:
            y = y * 2
        return x + y


def eager_loop(layers, x):
    outputs = []
    for layer in layers:
        x = layer(x)
        outputs.append(x)
    locals()                   # a frame reader: this frame runs eagerly, each forward is its own
    return outputs             # every layer's output is compared


def layers_of(n, cls=Block, seed=0):
    torch.manual_seed(seed)
    return nn.ModuleList([cls() for _ in range(n)])


def compare(layers, x, calls=2):
    """eager_loop optimized vs eager, ``calls`` times, under no_grad; the backend."""
    backend = CountingBackend()
    opt = minidynamo.optimize(backend)(eager_loop)
    with torch.no_grad():
        for _ in range(calls):
            torch.testing.assert_close(opt(layers, x), eager_loop(layers, x))
    return backend


def test_twelve_identical_layers_compile_one_entry():
    layers = layers_of(12)
    backend = compare(layers, torch.randn(2, 8))
    assert backend.compile_count == 2            # layer 0 by identity, then one for all
    assert minidynamo.counters["recompiles"] == 1 and minidynamo.counters["fallbacks"] == 1   # the loop
    assert "cache_size_limit" not in " ".join(minidynamo.counters.snapshot()["fallback_reasons"])


def test_without_sharing_each_layer_compiles_its_own(monkeypatch):
    monkeypatch.setattr(config, "share_module_entries", False)
    backend = compare(layers_of(4), torch.randn(2, 8))
    assert backend.compile_count == 4


def test_a_layer_in_another_training_mode_does_not_share():
    layers = layers_of(6)
    layers[3].eval()
    backend = compare(layers, torch.randn(2, 8))
    assert backend.compile_count == 3            # layer 0, the shared entry, the shared entry in eval


def test_a_layer_with_a_hook_does_not_share():
    layers = layers_of(4)
    layers[2].register_forward_hook(lambda module, args, out: out * 10)
    backend = compare(layers, torch.randn(2, 8))
    # layer 0, the shared entry, the hooked layer's own entry, and the hook itself (a frame of its own)
    assert backend.compile_count <= 4


def test_a_layer_whose_attribute_is_no_longer_a_tensor_does_not_share():
    layers = layers_of(4)
    del layers[1].shift
    layers[1].shift = 3.0                       # a float where the others have a buffer
    backend = compare(layers, torch.randn(2, 8))
    assert backend.compile_count == 3            # layer 0, layer 1's shared entry, one with the buffer


def test_a_layer_whose_submodule_was_replaced_by_a_function():
    layers = layers_of(4)
    del layers[2].lin
    layers[2].lin = torch.tanh
    backend = compare(layers, torch.randn(2, 8))
    assert backend.compile_count == 3


def test_layers_with_other_shapes_do_not_share():
    torch.manual_seed(0)
    layers = nn.ModuleList([Block(8), Block(8), nn.Linear(8, 16), Block(16), Block(16)])
    backend = compare(layers, torch.randn(2, 8))
    # Block(8) by identity, shared Block(8), Linear's own forward (torch.nn's forwards are traced
    # when eager code calls them: minidynamo/skipfiles.py), shared Block(16)
    assert backend.compile_count == 4


class Casting(Block):
    def forward(self, x):
        return super().forward(x.to(self.lin.weight.dtype)).float()


def test_a_layer_with_other_parameter_dtypes_does_not_share():
    layers = layers_of(4, Casting)
    layers[2].double()
    backend = compare(layers, torch.randn(2, 8))
    assert backend.compile_count == 3


class WithConfig(Block):
    class Config:
        factor = 3.0

    def __init__(self):
        super().__init__()
        self.config = WithConfig.Config()

    def forward(self, x):
        return super().forward(x) * self.config.factor


def test_a_layer_read_for_an_arbitrary_object_keeps_its_identity_guard():
    layers = layers_of(3, WithConfig)
    backend = compare(layers, torch.randn(2, 8))
    assert backend.compile_count == 3
    layers[1].config.factor = 5.0                # still seen: the object's attribute is guarded
    compare(layers, torch.randn(2, 8), calls=1)


class Recording(Block):
    def forward(self, x):
        self.last_batch = x.shape[0]             # a side effect on the module
        return super().forward(x)


def test_a_layer_the_frame_changes_keeps_its_identity_guard():
    layers = layers_of(3, Recording)
    backend = CountingBackend()
    opt = minidynamo.optimize(backend)(eager_loop)
    with torch.no_grad():
        for batch in (2, 2, 5):                  # batch 5: the entries again (the shape is not guarded by value)
            x = torch.randn(batch, 8)
            torch.testing.assert_close(opt(layers, x), eager_loop(layers, x))
            for m in layers:
                m.last_batch = None
            opt(layers, x)
            assert [m.last_batch for m in layers] == [batch] * 3
    assert backend.compile_count == 6            # one per layer and batch size (shapes are static)


def pick(a, b, x):
    if a is b:
        return a(x) * 2
    return a(x) - b(x)


def test_which_modules_are_one_object_is_guarded():
    torch.manual_seed(0)
    one, two = Block(), Block()
    opt = minidynamo.optimize(CountingBackend())(pick)
    x = torch.randn(2, 8)
    with torch.no_grad():
        for a, b in ((one, one), (one, two), (two, two), (two, one)):
            torch.testing.assert_close(opt(a, b, x), pick(a, b, x))


def returns_itself(layer, x):
    return layer(x), layer


def test_a_returned_module_is_this_calls_own():
    layers = layers_of(3)
    backend = CountingBackend()
    opt = minidynamo.optimize(backend)(returns_itself)
    with torch.no_grad():
        for layer in layers:
            out, same = opt(layer, torch.ones(2, 8))
            assert same is layer
            torch.testing.assert_close(out, layer(torch.ones(2, 8)))
    assert backend.compile_count == 2


def test_parameters_are_read_from_each_layer():
    layers = layers_of(5)
    backend = compare(layers, torch.randn(2, 8))
    with torch.no_grad():
        layers[3].lin.weight.mul_(-1)            # one layer's weights change: seen, no recompile
    compare(layers, torch.randn(2, 8), calls=1)
    assert backend.compile_count == 2


class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = nn.Linear(2, 2)
        self.factor = 2.0

    def forward(self, x):
        return self.inner(x) * self.factor


def test_the_shared_guard_checks_type_state_and_structure():
    first, second = Scaled(), Scaled()
    guard_for(Scaled.forward, first, torch.ones(1, 2))              # the first one seen: by identity
    accepts = guard_for(Scaled.forward, second, torch.ones(1, 2))   # the second: shared
    assert accepts(Scaled(), torch.ones(1, 2))      # a third instance: its own parameters are read
    m = Scaled()
    m.factor = 3.0                                  # a constant the trace read
    assert not accepts(m, torch.ones(1, 2))
    m = Scaled()
    m.inner = nn.Linear(2, 2).double()              # other parameter dtypes
    assert not accepts(m, torch.ones(1, 2))
    m.inner = nn.Identity()                         # another type
    assert not accepts(m, torch.ones(1, 2))
    m = Scaled()
    m.inner.register_forward_hook(lambda *a: None)  # a hook
    assert not accepts(m, torch.ones(1, 2))
    m = Scaled().eval()                             # training
    assert not accepts(m, torch.ones(1, 2))
    m = Scaled()
    m.extra = 1                                     # an attribute the trace did not read
    assert accepts(m, torch.ones(1, 2))
    m.__class__ = type("Sub", (Scaled,), {})        # another class
    assert not accepts(m, torch.ones(1, 2))

"""Calls on device tensors that the bridge runs eagerly still draw on the host generator.

A graph or a call the bridge does not run as a device program runs eagerly on the caller's
tensors (``backends.EagerGraph``, ``BridgedCall._eager``): a training call whose backward
cannot be recorded (``weight_norm``'s backward has no meta kernel), a graph with a random op
whose draw reads tensor values (``bernoulli(p)``), a graph making a leaf that requires grad.
With the model on the XLA device, such an eager run used to draw its dropout masks from the
device's generator: other masks than CPU eager's with the same ``torch.manual_seed``, and the
host generator did not move, so the next host draw (wav2vec2's LayerDrop ``torch.rand([])``,
deciding with an ``if`` whether a layer runs) differed too, and with it every later graph.
``bench.hf_train --only wav2vec2 --backend torchxla_trace_once`` drifted in the 7th digit of
the first loss. Such runs now make each random op on the device on the host, as CPU eager
makes it (``host_random.EagerHostDraws``).

The oracle: the same program eagerly on the CPU from the same seed: its values, gradients, the
generator's state after each call and its next draw.
"""

import copy

import pytest
import torch
import torch.nn.functional as F

import minidynamo
import xla_bridge
from xla_bridge import device as dev
from tests.xla.xla_testing import BACKENDS, fresh  # noqa: F401  (fixture)


class WeightNormBlock(torch.nn.Module):
    """wav2vec2's positional convolution in small: a weight-norm parametrized conv (whose
    backward the training path cannot record on meta tensors: the call runs eagerly), layer
    norm, dropout, then a LayerDrop draw on the host and a graph break on its value."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.utils.parametrizations.weight_norm(
            torch.nn.Conv1d(8, 8, 3, padding=1), name="weight", dim=2)
        self.norm = torch.nn.LayerNorm(8)
        self.linear = torch.nn.Linear(8, 8)

    def forward(self, h):
        x = self.conv(h.transpose(1, 2)).transpose(1, 2)
        x = F.dropout(self.norm(h + F.gelu(x)), 0.3, self.training)
        for _ in range(2):                           # LayerDrop
            if torch.rand([]) < 0.5:                 # (a graph break on a host value)
                continue
            x = F.dropout(self.linear(x), 0.2, self.training)
        return x


class ValueDraws(torch.nn.Module):
    """A random op whose draw reads tensor values: the graph runs eagerly."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)

    def forward(self, h):
        y = self.linear(h)
        y = y * torch.bernoulli(torch.sigmoid(y.detach())) + F.dropout(y, 0.5)
        return y, torch.rand([])


class MakesALeaf(torch.nn.Module):
    """A graph making a tensor that requires grad (refused: runs eagerly) that also drops out."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)

    def forward(self, h):
        scale = torch.ones(8, device=h.device, requires_grad=True)
        return F.dropout(self.linear(h) * scale, 0.4), torch.rand(2)


def _state_key():
    return torch.random.get_rng_state()


def _run(model, program, device, grad, calls=3):
    """Per call (each after its own seed): outputs, the generator's state, and with grad the
    parameters' gradients; then the next host draw."""
    results = []
    torch.manual_seed(7)
    for call in range(calls):
        x = torch.randn(2, 5, 8, generator=torch.Generator().manual_seed(call)).to(device)
        with torch.set_grad_enabled(grad):
            out = program(x)
        leaves = out if isinstance(out, tuple) else (out,)
        grads = None
        if grad:
            sum(leaf.float().sum() for leaf in leaves if leaf.requires_grad).backward()
            grads = {name: None if p.grad is None else p.grad.detach().cpu().clone()
                     for name, p in model.named_parameters()}
            model.zero_grad()
        results.append(([leaf.detach().cpu() for leaf in leaves], _state_key(), grads))
    return results, torch.rand(4)


def _assert_same(expected, got):
    (calls_e, next_e), (calls_g, next_g) = expected, got
    for (out_e, state_e, grads_e), (out_g, state_g, grads_g) in zip(calls_e, calls_g):
        for a, b in zip(out_e, out_g):
            torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-5)
        assert torch.equal(state_e, state_g), "the host generator does not stand where eager's does"
        if grads_e is not None:
            for name in grads_e:
                assert (grads_g[name] is None) == (grads_e[name] is None), name
                if grads_e[name] is not None:
                    torch.testing.assert_close(grads_g[name], grads_e[name], rtol=1e-4, atol=1e-5)
    assert torch.equal(next_e, next_g), "the next host draw differs from eager's"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("grad", [False, True], ids=["no grad", "grad"])
@pytest.mark.parametrize("make", [WeightNormBlock, ValueDraws, MakesALeaf],
                         ids=["weight norm + layerdrop", "draw reads values", "makes a leaf"])
def test_eager_runs_of_device_calls_draw_on_the_host(backend, grad, make):
    torch.manual_seed(0)
    reference = make().train()
    model = copy.deepcopy(reference).to(dev.xla_device())
    expected = _run(reference, reference, "cpu", grad)
    got = _run(model, minidynamo.optimize(backend)(model), dev.xla_device(), grad)
    _assert_same(expected, got)


def test_the_weight_norm_training_call_runs_eagerly():
    """The case above does take the eager path (else it would not test it)."""
    torch.manual_seed(0)
    model = WeightNormBlock().train().to(dev.xla_device())
    _run(model, minidynamo.optimize("torchxla_trace_once")(model), dev.xla_device(), True, calls=1)
    assert any("_weight_norm_interface_backward" in reason for reason in xla_bridge.counters.reasons)


def test_an_eager_run_on_host_tensors_is_unchanged():
    """A refused graph on host tensors draws as eager does, as before (nothing moves)."""
    torch.manual_seed(0)
    reference = ValueDraws().train()
    model = copy.deepcopy(reference)
    expected = _run(reference, reference, "cpu", False)
    got = _run(model, minidynamo.optimize("torchxla_trace_once")(model), "cpu", False)
    _assert_same(expected, got)

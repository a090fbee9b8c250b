"""Each output of a compiled call lands on the device eager makes it on, when a graph's
arguments live on both the host and the XLA device.

Found in a wav2vec2 training run with dropout on: the encoder loop draws ``torch.rand([])`` (a
host tensor) for LayerDrop, compares it, and breaks on the data-dependent ``if``. The resumed
frame's graph took that host tensor as its first argument and the hidden states (on the device)
after it; the bridge sent every output "home" by the device of the first tensor argument, so
the hidden states came back on the host (the next frame recompiled: ``L['hidden_states'].device:
expected xla:0, got cpu``) and the loss drifted from eager's. The other way round, a graph on
device arguments split around its host ``rand`` (``partition``) returned the comparison of the
host draw on the device where eager keeps it on the host. Eager on the CPU with the same
``torch.manual_seed`` is the oracle here: values, devices and the generator's next draw.
"""

import pytest
import torch

import minidynamo
from tests.xla.xla_testing import fresh, to_xla  # noqa: F401  (fixture)


class LayerDrop(torch.nn.Module):
    """wav2vec2's encoder loop, reduced."""

    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([torch.nn.Linear(4, 4) for _ in range(4)])

    def forward(self, h):
        synced = False
        for layer in self.layers:
            p = torch.rand([])                       # a host tensor, whatever h's device
            skip = self.training and p < 0.5
            if not skip or synced:                   # data-dependent: a graph break
                h = layer(h)
        return h, skip


def _run_layerdrop(model, x, grad):
    torch.manual_seed(7)
    outs = []
    for _ in range(3):
        with torch.set_grad_enabled(grad):
            h, skip = model(x)
        outs.append((h, skip, torch.rand(2)))        # and the generator goes on as eager's
    return outs


@pytest.mark.parametrize("grad", [False, True], ids=["inference", "training"])
def test_layerdrop_loop_keeps_eager_devices(fresh, grad):
    torch.manual_seed(0)
    model = LayerDrop()
    x = torch.randn(2, 4)
    expected = _run_layerdrop(model, x, grad)
    model.to(to_xla(x).device)
    compiled = minidynamo.optimize("torchxla_trace_once")(model)
    got = _run_layerdrop(compiled, to_xla(x), grad)
    for (h, skip, after), (eh, eskip, eafter) in zip(got, expected):
        assert h.device.type == "xla"
        assert skip.device.type == "cpu" == eskip.device.type
        assert after.device.type == "cpu"
        torch.testing.assert_close(h.detach().cpu(), eh.detach(), atol=1e-5, rtol=1e-4)
        assert bool(skip) == bool(eskip)
        torch.testing.assert_close(after, eafter)
    reasons = minidynamo.counters["recompile_reasons"]
    assert not [r for r in reasons if ".device:" in r], reasons


def _mixed(flag, h, layer):
    """A host tensor first, a device tensor after it: the result of each op on its own device."""
    skip = torch.rand([]) < flag                     # flag is the graph's first argument
    h = layer(h)
    return h, skip, flag + 1


@pytest.mark.parametrize("grad", [False, True], ids=["inference", "training"])
def test_host_argument_first_does_not_send_device_outputs_home(fresh, grad):
    torch.manual_seed(0)
    layer = torch.nn.Linear(4, 4)
    x, flag = torch.randn(2, 4), torch.tensor(0.5)
    torch.manual_seed(3)
    with torch.set_grad_enabled(grad):
        expected = _mixed(flag, x, layer)
    layer.to(to_xla(x).device)
    compiled = minidynamo.optimize("torchxla_trace_once")(_mixed)
    for _ in range(2):                               # the trace, then the replay
        torch.manual_seed(3)
        with torch.set_grad_enabled(grad):
            got = compiled(flag, to_xla(x), layer)
        assert [t.device.type for t in got] == ["xla", "cpu", "cpu"]
        torch.testing.assert_close(got[0].detach().cpu(), expected[0].detach(), atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(got[1], expected[1])
        torch.testing.assert_close(got[2], expected[2])


def test_a_graph_holding_a_flattened_vmap_splits_around_an_op_without_a_lowering(fresh):
    """Probe AH r3: ``vmap(cholesky)``: the flattened vmap (``run_flat``) runs eagerly between
    device segments; torch's ``split_module`` read the symbols of every example value, and the
    body's get_attr holds the module itself ("cannot extract sympy expressions from GraphModule"):
    the graph ran eagerly with an internal error for its reason."""
    import xla_bridge

    def f(x):
        return torch.vmap(lambda a: torch.linalg.cholesky(a @ a.mT + torch.eye(3)))(x).sum()

    compiled = minidynamo.optimize("torchxla_trace_once")(f)
    for _ in range(3):
        x = torch.randn(2, 3, 3)
        torch.testing.assert_close(compiled(x), f(x))
    assert not any("Error" in reason for reason in xla_bridge.counters.reasons), xla_bridge.counters.reasons
    assert xla_bridge.counters.replays >= 2

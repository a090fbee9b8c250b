"""Training graphs the bridge used to send to eager without need (real-model probe, F1 and F3).

Both answered as eager (eager ran them); they now replay on the device:
- a graph indexing the result of a multi-output op (``a, g = h.chunk(2, -1)`` of a SwiGLU MLP,
  GPT-2's qkv ``split``, ``sort``/``topk`` values) was taken for one that makes a new autograd
  leaf: the multi-output node has no example value of its own, so its ``getitem`` seemed to read
  nothing that requires grad (``graph_refusals._makes_grad_leaves``);
- a batch norm in training mode whose input does not require grad (the first layer) was taken
  for an in-place op making its input require grad: the check read the op's first argument,
  where batch norm writes its running statistics (``graph_refusals._in_place_write_gains_grad``).
"""

import copy

import pytest
import torch
import torch.nn.functional as F

import minidynamo
import xla_bridge
from tests.xla.xla_testing import BACKENDS, fresh  # noqa: F401  (autouse: caches and counters reset)


class GatedMLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(4, 8)
        self.down = torch.nn.Linear(4, 3)

    def forward(self, x):
        a, g = self.up(x).chunk(2, -1)
        return self.down(a * F.silu(g))


def bn_first():
    return torch.nn.Sequential(torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 3))


def sorted_head():
    class SortedHead(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x):
            values = self.lin(x).sort(-1)[0]
            top = self.lin(x).topk(2, -1).values
            return values.sum(-1) + top.sum(-1) + self.lin(x).max(-1)[0]
    return SortedHead()


MODELS = {"chunk of a SwiGLU MLP": GatedMLP, "batch norm first": bn_first, "sort/topk/max values": sorted_head}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", MODELS)
def test_a_training_step_replays_on_the_device_and_matches_eager(backend, name):
    xla_bridge.device.xla_device()     # torch_xla loaded before the first backward (README)
    torch.manual_seed(0)
    model = MODELS[name]().train()
    reference = copy.deepcopy(model)
    compiled = minidynamo.optimize(backend)(model)
    for step in range(3):
        x = torch.randn(5, 4)
        for net, run in ((reference, reference), (model, compiled)):
            net.zero_grad()
            run(x).square().sum().backward()
        for (label, got), want in zip(model.named_parameters(), reference.parameters()):
            torch.testing.assert_close(got.grad, want.grad, msg=f"step {step}: {label}.grad")
        for got, want in zip(model.buffers(), reference.buffers()):
            torch.testing.assert_close(got, want)
    assert not [r for r in xla_bridge.counters.reasons if "eager" in r], xla_bridge.counters.reasons

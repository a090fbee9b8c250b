"""A comparison of a uniform draw (``torch.rand``: [0, 1)) with a number outside the range's
interior has one answer whatever was drawn: Python may take that branch without the data
(``tracer/value_ranges.py``).  LayerDrop's ``if torch.rand([]) < self.layerdrop`` with the
default ``layerdrop = 0.0`` was a graph break at every layer of a Hugging Face encoder in
training; the draw itself stays in the graph, so the generator moves as in eager."""

import pytest
import torch

import minidynamo

from ..corpus.helpers import CountingBackend


class LayerDrop(torch.nn.Module):
    def __init__(self, layerdrop):
        super().__init__()
        self.layers = torch.nn.ModuleList([torch.nn.Linear(4, 4) for _ in range(3)])
        self.layerdrop = layerdrop

    def forward(self, x):
        for layer in self.layers:
            if torch.rand([]) < self.layerdrop:      # skip the layer
                continue
            x = layer(x)
        return x


@pytest.mark.parametrize("layerdrop, decided", [(0.0, True), (1.0, True), (-1, True), (0.5, False)])
def test_layerdrop_is_decided_without_the_draw_when_its_probability_is_0_or_1(layerdrop, decided):
    torch.manual_seed(0)
    eager = LayerDrop(layerdrop)
    ours = LayerDrop(layerdrop)
    ours.load_state_dict(eager.state_dict())
    backend = CountingBackend()
    compiled = minidynamo.optimize(backend)(ours)
    for call in range(3):
        x = torch.randn(2, 4)
        torch.manual_seed(call)
        expected, next_eager = eager(x), torch.rand(2)
        torch.manual_seed(call)
        got, next_ours = compiled(x), torch.rand(2)
        torch.testing.assert_close(got, expected)
        assert torch.equal(next_ours, next_eager)          # the draws happened, in eager's order
    report = minidynamo.explain(LayerDrop(layerdrop))(torch.randn(2, 4))
    assert (report.graph_break_count == 0) is decided


def written_draw(x):
    p = torch.rand([])
    p.add_(1)                       # no longer in [0, 1)
    return x + 1 if p < 0.0 else x - 1


def half_draw(x):
    p = torch.rand([], dtype=torch.float16)
    return x + 1 if p < 1.0 else x - 1


def scaled_draw(x):
    return x + 1 if torch.rand([]) * 2 >= 1.0 else x - 1


@pytest.mark.parametrize("fn", [written_draw, half_draw, scaled_draw])
def test_draws_whose_range_is_not_known_still_break(fn):
    report = minidynamo.explain(fn)(torch.zeros(2))
    assert report.graph_break_count >= 1
    for seed in range(3):
        torch.manual_seed(seed)
        expected = fn(torch.zeros(2))
        torch.manual_seed(seed)
        torch.testing.assert_close(minidynamo.optimize("eager")(fn)(torch.zeros(2)), expected)

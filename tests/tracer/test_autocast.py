"""Autocast regions (``tracer/autocast.py``): a frame traced inside a CPU ``torch.autocast``
region, or opening one itself, gets eager's dtypes and values; the caller's region is guarded."""

import pytest
import torch
import torch.nn.functional as F

import minidynamo

from ..corpus.helpers import CountingBackend


@pytest.fixture(autouse=True)
def _fresh():
    minidynamo.reset()
    yield
    minidynamo.reset()


class Mixed(torch.nn.Module):
    """Ops of each autocast policy: lower precision (linear, conv, matmul), float32 (cdist,
    mse_loss), widest (cat), and ops autocast leaves alone (layer_norm, softmax, add)."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(2, 3, 3, padding=1)
        self.lin = torch.nn.Linear(12, 6)
        self.norm = torch.nn.LayerNorm(6)

    def forward(self, image, table):
        h = self.conv(image).flatten(2).mean(-1)                  # (B, 3)
        h = torch.cat([h, table], dim=1)                          # (B, 12): bf16 and f32 -> f32
        h = self.norm(self.lin(h))
        scores = F.softmax(h @ h.t(), dim=-1)
        far = torch.cdist(h, h)
        return scores + far, F.mse_loss(h, torch.zeros_like(h))


def _inputs():
    torch.manual_seed(0)
    return torch.randn(4, 2, 5, 5), torch.randn(4, 9)


def _same(actual, expected):
    for a, e in zip(actual, expected):
        assert a.dtype == e.dtype
        torch.testing.assert_close(a, e)


def test_a_frame_in_the_callers_region_gets_eagers_dtypes():
    model = Mixed()
    backend = CountingBackend()
    opt = minidynamo.optimize(backend)(model)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected = model(*_inputs())
        for _ in range(2):
            _same(opt(*_inputs()), expected)
    assert expected[0].dtype == torch.float32 and backend.compile_count == 1
    last = [n for n in backend.graphs[0].graph.nodes if n.op == "output"][0].args[0]
    assert [n.meta["example_value"].dtype for n in last] == [e.dtype for e in expected]
    lin = [n for n in backend.graphs[0].graph.nodes if n.meta.get("autocast") is not None]
    assert lin, "no node recorded as cast by the region"


def test_the_callers_region_is_guarded():
    model = Mixed()
    backend = CountingBackend()
    opt = minidynamo.optimize(backend)(model)
    runs = [dict(enabled=True, dtype=torch.bfloat16), dict(enabled=False), dict(enabled=True, dtype=torch.float16),
            dict(enabled=True, dtype=torch.bfloat16)]
    for region in runs:
        with torch.autocast("cpu", **region):
            _same(opt(*_inputs()), model(*_inputs()))
    assert backend.compile_count == 3         # bfloat16, none, float16; then bfloat16 again hits


def _opens_regions(x, w):
    y = x @ w
    with torch.autocast("cpu", dtype=torch.bfloat16):
        z = y @ w                               # bf16
        inside = torch.is_autocast_enabled("cpu")
        with torch.autocast("cpu", enabled=False):
            kept = y @ w                        # f32: the region is switched off here
        both = z + kept                         # f32: add promotes, autocast leaves it alone
    return z * 2 + int(inside), both, torch.is_autocast_enabled("cpu")


def test_regions_opened_in_the_frame():
    backend = CountingBackend()
    opt = minidynamo.optimize(backend)(_opens_regions)
    x, w = torch.randn(3, 3), torch.randn(3, 3)
    expected = _opens_regions(x, w)
    for _ in range(2):
        actual = opt(x, w)
        assert actual[2] is expected[2] is False
        assert (actual[0].dtype, actual[1].dtype) == (expected[0].dtype, expected[1].dtype) == (torch.bfloat16, torch.float32)
        _same(actual[:2], expected[:2])
    assert backend.compile_count == 1 and not torch.is_autocast_enabled("cpu")


def _break_in_region(x, w):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = x @ w
        print("break")
        return (y @ w).float().sum(-1)


def test_a_graph_break_inside_a_region_resumes_in_it(capsys):
    opt = minidynamo.optimize(CountingBackend())(_break_in_region)
    x, w = torch.randn(3, 3), torch.randn(3, 3)
    torch.testing.assert_close(opt(x, w), _break_in_region(x, w))
    assert minidynamo.counters["graph_breaks"] == 1


def test_gradients_through_a_region():
    model = Mixed()
    opt = minidynamo.optimize(CountingBackend())(model)
    grads = []
    for fn in (model, opt):
        model.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out, loss = fn(*_inputs())
        (out.float().sum() + loss).backward()
        grads.append([p.grad.clone() for p in model.parameters()])
    for a, e in zip(*grads):
        torch.testing.assert_close(a, e)


@torch.autocast("cpu", dtype=torch.bfloat16)
def _project(x, w):
    return x @ w


REGIONS = {}


def _in_a_held_region(x, w):
    with REGIONS["now"]:
        return _project(x, w), x @ w


def test_autocast_objects_made_before_the_frame_are_guarded():
    backend = CountingBackend()
    opt = minidynamo.optimize(backend)(_in_a_held_region)
    x, w = torch.randn(3, 3), torch.randn(3, 3)
    for dtype in (torch.float16, torch.bfloat16, torch.float16):
        REGIONS["now"] = torch.autocast("cpu", dtype=dtype)
        expected = _in_a_held_region(x, w)
        actual = opt(x, w)
        assert (actual[0].dtype, actual[1].dtype) == (torch.bfloat16, dtype)
        _same(actual, expected)
    assert backend.compile_count == 2 and minidynamo.counters["graph_breaks"] == 0


def _writes_in_a_region(x, w):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = x @ w
        y[0] = x[0]                   # setitem answers None: nothing to cast
        y.add_(x)
        return y


def test_ops_answering_none_or_writing_in_place_in_a_region():
    backend = CountingBackend()
    opt = minidynamo.optimize(backend)(_writes_in_a_region)
    x, w = torch.randn(3, 3), torch.randn(3, 3)
    _same([opt(x, w)], [_writes_in_a_region(x, w)])
    assert backend.compile_count == 1 and minidynamo.counters["graph_breaks"] == 0

"""What trace_once promises beyond values: no retrace, eviction survived, ops without an XLA
lowering handled, a cheap import."""

import subprocess
import sys
import textwrap
from pathlib import Path

import torch
import torch.nn as nn

import xla_bridge
from tests.xla.xla_testing import assert_same, compile_with, to_xla, xla_counter, xla_metric_samples

ROOT = Path(__file__).resolve().parents[2]


def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)).eval()


def device_work(run) -> dict:
    """How torch_xla's own counters move while ``run()`` executes."""
    before = (xla_counter("xla::addmm"), xla_metric_samples("LazyTracing"),
              xla_counter("CachedCompile") + xla_counter("UncachedCompile"),
              xla_metric_samples("RunCachedGraphOutputData"))
    run()
    after = (xla_counter("xla::addmm"), xla_metric_samples("LazyTracing"),
             xla_counter("CachedCompile") + xla_counter("UncachedCompile"),
             xla_metric_samples("RunCachedGraphOutputData"))
    return dict(zip(("ops_traced", "lazy_tracing", "compiles", "cached_graph_runs"),
                    (a - b for a, b in zip(after, before))))


def test_replay_neither_traces_nor_compiles_while_trivial_traces_every_call():
    model = mlp()
    x = to_xla([torch.randn(2, 4)])[0]
    with torch.no_grad():
        replayed = compile_with("torchxla_trace_once", model, [x])
        trivial = compile_with("torchxla_trivial", model, [x])
        replayed(x), trivial(x)                       # first calls done: caches are warm
        bridge = xla_bridge.counters.as_dict()
        for _ in range(3):
            assert device_work(lambda: replayed(x)) == {
                "ops_traced": 0, "lazy_tracing": 0, "compiles": 0, "cached_graph_runs": 1}
            work = device_work(lambda: trivial(x))
            assert work["ops_traced"] == 2 and work["lazy_tracing"] > 0 and work["compiles"] == 1
    counted = xla_bridge.counters
    assert (counted.replays - bridge["replays"], counted.traces - bridge["traces"]) == (3, 3)
    assert counted.compiles == bridge["compiles"] and counted.retraces == bridge["retraces"]


def test_op_without_xla_lowering_is_partitioned_not_retraced():
    def with_bessel(x):              # i0 has no XLA lowering: it runs on the CPU
        y = x * 2
        return torch.special.i0(y) + y, y.sum()

    x = torch.randn(5)
    partitions = xla_bridge.counters.partitions
    compiled = compile_with("torchxla_trace_once", with_bessel, [x])
    assert xla_bridge.counters.partitions == partitions + 1
    assert "i0" in xla_bridge.counters.reasons[-1]
    retraces = xla_bridge.counters.retraces
    for _ in range(2):
        other = torch.randn(5)
        work = device_work(lambda: assert_same(compiled(other), with_bessel(other)))
        assert work["compiles"] == 0 and work["cached_graph_runs"] == 2   # x*2 | i0 | add, sum
    assert xla_bridge.counters.retraces == retraces


def _counting_device_copies(monkeypatch):
    from xla_bridge import device as dev

    made, real = [], dev.device_copies
    monkeypatch.setattr(dev, "device_copies", lambda values: made.append(len(values)) or real(values))
    return made


def test_a_partitioned_first_call_copies_the_arguments_once_for_its_three_traces(monkeypatch):
    weight = to_xla([torch.randn(5)])[0]

    def with_bessel(x, w):           # whole-graph trace, node probe, split capture: one copy set
        y = x * w
        return torch.special.i0(y) + w, y.sum()

    made = _counting_device_copies(monkeypatch)
    x = to_xla([torch.randn(5)])[0]
    compiled = compile_with("torchxla_trace_once", with_bessel, [x, weight])
    assert len(made) == 3        # one set for the three traces; each of 2 segments its inputs
    for _ in range(2):
        other = to_xla([torch.randn(5)])[0]
        assert_same(compiled(other, weight), with_bessel(other, weight))


def test_a_partitioned_graph_that_writes_an_argument_traces_on_fresh_copies(monkeypatch):
    def doubles_then_bessel(x):      # i0 reads mul_'s result: the split keeps the order
        y = x.mul_(2)
        return torch.special.i0(y) + y

    made = _counting_device_copies(monkeypatch)
    x = to_xla([torch.randn(5)])[0]
    before = x.cpu()
    compiled = compile_with("torchxla_trace_once", doubles_then_bessel, [x])
    assert len(made) == 5        # each trace wrote its copy: capture, probe, split, 2 segments
    torch.testing.assert_close(x.cpu(), before)
    other = torch.randn(5)
    on_device = to_xla([other.clone()])[0]
    expected = doubles_then_bessel(other)
    torch.testing.assert_close(compiled(on_device).cpu(), expected)
    torch.testing.assert_close(on_device.cpu(), other)


def test_a_split_that_would_move_an_in_place_write_past_a_read_runs_eagerly():
    def doubles_then_bessel(x):      # split_module would run i0(x) before x.mul_(2)
        x.mul_(2)
        return torch.special.i0(x) + x

    x = to_xla([torch.randn(5)])[0]
    before = x.cpu()
    compiled = compile_with("torchxla_trace_once", doubles_then_bessel, [x])
    assert "reorder" in xla_bridge.counters.reasons[-1]
    torch.testing.assert_close(x.cpu(), before)       # compiling never touched the caller's x
    other = torch.randn(5)
    on_device = to_xla([other.clone()])[0]
    expected = doubles_then_bessel(other)
    torch.testing.assert_close(compiled(on_device).cpu(), expected)
    torch.testing.assert_close(on_device.cpu(), other)   # written in place as eager does


def test_op_without_lowering_in_a_module_graph_falls_back_to_eager_with_reason():
    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 3)

        def forward(self, x):
            return torch.special.i0(self.fc(x))

    model = Head().eval()
    x = torch.randn(2, 3)
    with torch.no_grad():
        compiled = compile_with("torchxla_trace_once", model, [x])
        assert_same(compiled(x), model(x))
    assert "graph runs eagerly" in xla_bridge.counters.reasons[-1]
    assert "i0" in xla_bridge.counters.reasons[-1]


EVICTION = """
    import torch, xla_bridge
    from tests.xla.xla_testing import compile_with
    x = torch.randn(4)
    first = compile_with("torchxla_trace_once", lambda x: x.sin() * 2, [x])
    second = compile_with("torchxla_trace_once", lambda x: x.cos() + 1, [x])   # evicts first
    assert torch.allclose(first(x), x.sin() * 2)
    assert torch.allclose(second(x), x.cos() + 1)
    assert torch.allclose(first(x), x.sin() * 2)
    print(xla_bridge.counters.retraces, xla_bridge.counters.reasons)
"""


def test_evicted_hash_is_recompiled_not_a_crash():
    env = {"PJRT_DEVICE": "CPU", "XLA_COMPILATION_CACHE_SIZE": "1", "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(EVICTION)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    retraces, _, reasons = done.stdout.strip().splitlines()[-1].partition(" ")
    assert int(retraces) >= 2 and "compilation cache" in reasons


def test_importing_the_bridge_does_not_import_torch_xla():
    code = ("import sys, xla_bridge; "
            "print('torch_xla' in sys.modules, 'torch._dynamo' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.stdout.split() == ["False", "False"]

"""Ops without an XLA lowering traced as their PyTorch decomposition (``xla_bridge.decompose``):
the graph stays one replayed graph where a decomposition lowers, the partitioner keeps the rest,
and finding out touches none of the caller's tensors."""

import copy

import torch
import torch.fx as fx
import torch.nn.functional as F

import xla_bridge
from xla_bridge import decompose
from xla_bridge.lifting import FlatProgram
from tests.xla.test_xla_replay_properties import device_work
from tests.xla.xla_testing import assert_same, compile_with, to_xla, xla_counter


def upsampling_pool(x):            # 2x2 -> 3x3: the sizes do not divide, XLA falls back
    return F.adaptive_avg_pool2d(x * 2, (3, 3)) + 1


def fallback_total() -> int:
    return sum(xla_counter(name) for name in xla_bridge.device.executed_fallback_ops())


def test_decompositions_for_reads_op_names_with_an_overload():
    assert torch.ops.aten._adaptive_avg_pool2d.default in \
        decompose.decompositions_for(["aten::_adaptive_avg_pool2d"])
    assert torch.ops.aten.xlogy.Tensor in decompose.decompositions_for(["aten::xlogy.Tensor"])
    assert decompose.decompositions_for(["aten::no_such_op"]) == {}


def test_stand_ins_find_the_decomposition_only_where_the_op_falls_back():
    flat = FlatProgram(fx.symbolic_trace(upsampling_pool))
    found = decompose.decompositions_on_stand_ins(flat, to_xla([torch.randn(1, 2, 2, 2)]))
    assert torch.ops.aten._adaptive_avg_pool2d.default in found
    lowered = decompose.decompositions_on_stand_ins(flat, to_xla([torch.randn(1, 2, 6, 6)]))
    assert lowered == {}              # 6x6 -> 3x3 lowers: its lowering is kept


def test_a_decomposable_fallback_op_keeps_the_graph_whole():
    x = torch.randn(1, 2, 2, 2)
    partitions, decompositions = xla_bridge.counters.partitions, xla_bridge.counters.decompositions
    compiled = compile_with("torchxla_trace_once", upsampling_pool, [x])
    assert xla_bridge.counters.partitions == partitions
    assert xla_bridge.counters.decompositions == decompositions + 1
    assert "_adaptive_avg_pool2d" in xla_bridge.counters.reasons[-1]
    for _ in range(2):
        other = torch.randn(1, 2, 2, 2)
        fallbacks = fallback_total()
        work = device_work(lambda: assert_same(compiled(other), upsampling_pool(other)))
        assert work["compiles"] == 0 and work["cached_graph_runs"] == 1    # one graph
        assert fallback_total() == fallbacks                              # nothing on the CPU


def test_finding_decompositions_leaves_the_callers_tensors_alone():
    def doubles_then_pools(x, w):
        x.mul_(2)
        return F.adaptive_avg_pool2d(x * w, (3, 3))

    x, w = to_xla([torch.randn(1, 2, 2, 2), torch.randn(2, 2)])
    before = x.cpu()
    compiled = compile_with("torchxla_trace_once", doubles_then_pools, [x, w])
    assert "decomposition" in xla_bridge.counters.reasons[-1]
    torch.testing.assert_close(x.cpu(), before)      # compiling wrote nothing
    other = torch.randn(1, 2, 2, 2)
    on_device = to_xla([other.clone()])[0]
    expected = doubles_then_pools(other, w.cpu())          # doubles ``other`` in place
    torch.testing.assert_close(compiled(on_device, w).cpu(), expected)
    torch.testing.assert_close(on_device.cpu(), other)     # written in place as eager does


def test_a_graph_with_a_decomposable_and_a_lasting_fallback_op_splits_around_the_second():
    def pools_then_bessel(x):      # i0's decomposition falls back too: i0 stays on the CPU
        y = F.adaptive_avg_pool2d(x, (3, 3))
        return torch.special.i0(y) + y

    x = torch.randn(1, 2, 2, 2)
    compiled = compile_with("torchxla_trace_once", pools_then_bessel, [x])
    reason = xla_bridge.counters.reasons[-1]
    assert reason.startswith("partition") and "i0" in reason
    assert "decomposed: _adaptive_avg_pool2d" in reason and "adaptive_avg_pool2d," not in reason
    for _ in range(2):
        other = torch.randn(1, 2, 2, 2)
        work = device_work(lambda: assert_same(compiled(other), pools_then_bessel(other)))
        assert work["compiles"] == 0 and work["cached_graph_runs"] == 2   # pool | i0 | add


def test_the_trivial_backend_still_runs_the_op_as_lazy_mode_does():
    x = torch.randn(1, 2, 2, 2)
    compiled = compile_with("torchxla_trivial", upsampling_pool, [x])
    fallbacks = fallback_total()
    assert_same(compiled(x), upsampling_pool(x))
    assert fallback_total() > fallbacks


def test_a_leaf_module_writing_its_buffers_is_probed_on_stand_ins_and_stays_on_the_device():
    torch.manual_seed(0)              # call_module nodes with state: a split is refused, so
    model = torch.nn.Sequential(torch.nn.BatchNorm2d(2), torch.nn.AdaptiveAvgPool2d(3))
    model.train()                     # before this rule, this graph ran eagerly
    reference = copy.deepcopy(model)
    x = torch.randn(2, 2, 2, 2)
    with torch.no_grad():
        compiled = compile_with("torchxla_trace_once", model, [x])
        assert "decomposition" in xla_bridge.counters.reasons[-1]
        torch.testing.assert_close(model[0].running_mean, reference[0].running_mean)
        torch.testing.assert_close(model[0].num_batches_tracked, reference[0].num_batches_tracked)
        for _ in range(2):
            other = torch.randn(2, 2, 2, 2)
            assert_same(compiled(other), reference(other))
            torch.testing.assert_close(model[0].running_mean, reference[0].running_mean)
            # XLA's batch norm updates the running variance with the biased variance; the
            # module's batch norm, reached by no node name, still gets eager's formula
            # (eager_faithful.FormulaProbe)
            torch.testing.assert_close(model[0].running_var, reference[0].running_var)

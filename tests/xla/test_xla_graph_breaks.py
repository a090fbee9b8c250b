"""Graph breaks on torchxla_trace_once: every graph of a broken frame is traced once and then
replayed by hash, with no retrace (torch_xla's own metrics say so)."""

import torch
import torchvision
from torchvision.models.resnet import BasicBlock

import minidynamo
import xla_bridge
from tests.xla.xla_testing import assert_same, fresh, xla_work  # noqa: F401 (fresh: autouse)


class PrintingResNet(torchvision.models.ResNet):
    """resnet18 whose forward prints a shape half way (a copy of torchvision's _forward_impl)."""

    def _forward_impl(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer2(self.layer1(x))
        print("features", tuple(x.shape))
        x = self.avgpool(self.layer4(self.layer3(x)))
        return self.fc(torch.flatten(x, 1))


def test_resnet18_with_a_print_replays_both_graphs(capsys):
    torch.manual_seed(0)
    model = PrintingResNet(BasicBlock, [2, 2, 2, 2], num_classes=10).eval()
    optimized = minidynamo.optimize("torchxla_trace_once")(model)
    x = torch.randn(1, 3, 32, 32)
    with torch.no_grad():
        expected = model(x)
        eager_out = capsys.readouterr().out
        assert_same(optimized(x), expected, atol=1e-4, rtol=1e-3)       # compiles both graphs
        assert capsys.readouterr().out == eager_out
        assert xla_bridge.counters.compiles == 2
        for _ in range(2):
            work = xla_work(lambda: assert_same(optimized(x), expected, atol=1e-4, rtol=1e-3))
            assert work == {"lazy_tracing": 0, "compiles": 0, "cached_graph_runs": 2}
            assert capsys.readouterr().out == eager_out
    counts = xla_bridge.counters
    assert (counts.compiles, counts.replays, counts.retraces, counts.fallbacks) == (2, 6, 0, 0)   # 3 calls
    # the break is taken where ResNet.forward calls _forward_impl, which then breaks at the print
    assert minidynamo.counters["graph_breaks"] == 2 and minidynamo.counters["fallbacks"] == 0
    with torch.no_grad():
        report = minidynamo.explain(model)(x)
    assert (report.graph_count, report.graph_break_count, report.fallback_count) == (2, 2, 0)
    assert [b.function for b in report.breaks] == ["ResNet.forward", "PrintingResNet._forward_impl"]

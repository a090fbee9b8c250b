"""Operators called through ``torch.ops`` (``torch.ops.aten.add``, ``torch.ops.aten.add.Tensor``):
graph nodes like any torch function, their examples from meta kernels and their writes from
their schemas; guarded by identity."""

import torch

import minidynamo

from .helpers import compiled_twice


def test_packets_and_overloads_are_nodes_and_in_place_writes_are_seen():
    def f(x, y, i):
        picked = torch.ops.aten.index(x, [i])                 # a packet: the dispatcher picks
        out = torch.ops.aten.add.Tensor(picked, y)            # an overload, read as an attribute
        torch.ops.aten.mul_.Tensor(out, 2)                    # in place on a graph value
        return out, torch.ops.aten.sum.default(x)

    report = compiled_twice(f, lambda: (torch.randn(5), torch.randn(3), torch.randint(0, 5, (3,))))
    assert "torch.ops.aten.index" in report.graph_codes[0]


def test_an_in_place_operator_on_the_callers_tensor_is_replayed():
    def f(x, y):
        torch.ops.aten.add_.Tensor(y, x)                      # the schema says: writes y
        return torch.ops.aten.mul.Tensor(y, 2)

    compiled = minidynamo.optimize("eager")(f)
    for seed in range(2):
        torch.manual_seed(seed)
        x, y = torch.randn(3), torch.randn(3)
        y_eager = y.clone()
        expected = f(x, y_eager)
        torch.testing.assert_close(compiled(x, y), expected)
        torch.testing.assert_close(y, y_eager)
    minidynamo.reset()


def test_an_operator_with_a_data_dependent_shape_breaks_the_graph():
    def f(x):
        y = x * 2
        nz = torch.ops.aten.nonzero.default(y > 0)            # no meta kernel: eager runs it
        return nz.float().sum() + y.sum()

    signs = torch.tensor([1.0, -1.0, 1.0, 1.0, -1.0, -1.0])  # three positives on every call
    report = compiled_twice(f, lambda: (torch.rand(6) * signs,), graphs=2, breaks=1)
    assert any("nonzero" in r for r in report.reasons), report.reasons

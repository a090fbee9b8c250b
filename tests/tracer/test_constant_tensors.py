"""Tensors made from constants only (tracer/variables/constant_tensors.py): Python may read their data while
tracing, as eager does, because the guards pin everything they were made from; a tensor whose
value could differ between calls (an input, random numbers, uninitialized memory, a write) is
never read."""

import torch

import minidynamo

from .helpers import compiled_twice


def test_data_reads_of_tensors_made_from_constants_stay_in_one_graph():
    def f(x, y):
        items = [x, y, x + 1, y + 1]
        n = torch.div(x.shape[0], 2, rounding_mode="trunc")       # an aten op on numbers alone
        positions = torch.arange(0, 8)
        span = positions[-1] - positions[0]
        steps = torch.arange(span, -1, -2)                         # start from a known 0-d tensor
        out = x.view(int(n), -1) + x.view(n, -1)                   # int(t), and t as a size
        if steps.sum() > 5:                                        # bool(t)
            out = out * 2
        return items[torch.as_tensor(2)], out, steps, positions.tolist(), n.item()

    report = compiled_twice(f, lambda: (torch.randn(4), torch.randn(4)))
    assert [n.target for n in report.graphs[0].graph.nodes].count(torch.arange) == 2


def test_a_size_made_from_an_input_shape_recompiles_with_the_shape():
    def f(x):
        half = torch.tensor(x.shape[0]) // 2                       # known: the shape is guarded
        return x.view(half, -1) * half.item()

    compiled = minidynamo.optimize("eager")(f)
    for n in (4, 6, 4):
        x = torch.randn(n)
        torch.testing.assert_close(compiled(x), f(x))
    minidynamo.reset()


def test_a_write_forgets_the_value_of_every_tensor_sharing_the_memory():
    def f(x):
        t = torch.arange(4)
        tail = t[1:]
        tail.mul_(x.shape[0])                 # writes t through a view: t's old value is stale
        return x * t[2].item()

    # equal to eager (t[2] is 2 * 4 = 8, not the 2 it was made with): the read breaks the graph
    report = compiled_twice(f, lambda: (torch.randn(4),), graphs=None, breaks=None)
    assert any("needs the tensor's data" in r for r in report.reasons), report.reasons


def test_values_that_may_differ_between_calls_are_never_read():
    def from_input(x, k):
        return x * k.item()                   # a graph input: its value is data

    def from_random(x):
        return x * torch.randint(0, 5, ()).item()

    def from_empty(x):
        return x * torch.empty(()).fill_(2.0).item()   # written: and empty memory is never known

    for fn, args in ((from_input, (torch.randn(3), torch.tensor(3))), (from_random, (torch.randn(3),)),
                     (from_empty, (torch.randn(3),))):
        torch.manual_seed(0)
        expected = fn(*args)
        torch.manual_seed(0)
        report = minidynamo.explain(fn)(*args)
        assert report.graph_break_count + report.fallback_count >= 1, (fn.__name__, report.reasons)
        torch.manual_seed(0)
        torch.testing.assert_close(minidynamo.optimize("eager")(fn)(*args), expected)
        minidynamo.reset()


def test_a_read_eager_refuses_raises_the_same_error():
    def ambiguous(x):
        return x if torch.arange(3) else -x          # bool() of three elements

    def float_index(x):
        return [x, x + 1][torch.tensor(1.5)]         # not an integer

    for fn, error in ((ambiguous, RuntimeError), (float_index, TypeError)):
        compiled = minidynamo.optimize("eager")(fn)
        for call in (fn, compiled):
            try:
                call(torch.randn(2))
            except error:
                continue
            raise AssertionError(f"{fn.__name__} did not raise {error.__name__}")
        minidynamo.reset()

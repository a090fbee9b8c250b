"""``torch.vmap`` flattened into the aten operations it runs (tracer/vmap_flatten.py): where the
recording can stand for vmap the graph calls the flat graph, elsewhere it keeps the runtime
vmap; either way equal to eager on new inputs every call."""

import torch

import minidynamo
from minidynamo.eval_frame import OptimizeContext
from minidynamo.explain import ExplainOutput

from .helpers import compiled_twice
from .test_higher_order import IndexThroughFunction, vmap_nodes


def flat_nodes(report):
    return vmap_nodes(report, ("run_flat",))


def runtime_vmaps(report):
    return vmap_nodes(report, ("vmap_call",))


def padding_mask_like(batch: int, n: int):
    """A 4-level (batch, head, query, key) mask like transformers' sdpa mask: causal and a
    padding table read through 0-d tensor indices."""
    lengths = torch.randint(1, n + 1, (batch,))
    padding = torch.arange(n)[None, :] < lengths[:, None]
    return (padding,)


def test_a_four_level_mask_vmap_is_one_flat_call_that_reads_new_data_every_call():
    def f(padding):
        batch, n = padding.shape

        def mask(b, h, q, kv):
            return (kv <= q) & padding[b, kv]

        for in_dims in ((None, None, None, 0), (None, None, 0, None), (None, 0, None, None), (0, None, None, None)):
            mask = torch.vmap(mask, in_dims=in_dims)
        with IndexThroughFunction():   # `padding[b, kv]` with 0-d indices: vmap itself would call .item()
            return mask(torch.arange(batch), torch.arange(1), torch.arange(n), torch.arange(n))

    report = compiled_twice(f, lambda: padding_mask_like(3, 6))
    assert len(flat_nodes(report)) == 1 and not runtime_vmaps(report)


def test_out_dims_and_a_tuple_result_are_flattened():
    def f(x, w):
        return torch.vmap(lambda row: (row @ w, row.amax()), out_dims=(1, 0))(x)

    report = compiled_twice(f, lambda: (torch.randn(5, 4), torch.randn(4, 3)))
    assert len(flat_nodes(report)) == 1


class DoubledGradIndex(torch.autograd.Function):
    """An index whose backward is deliberately not aten.index's: a flat recording (which sees
    only the forward's aten.index) would give the wrong gradient."""
    generate_vmap_rule = True

    @staticmethod
    def forward(x, i):
        return x.index_select(0, i.reshape(1)).reshape(())

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[1])
        ctx.shape = inputs[0].shape

    @staticmethod
    def backward(ctx, grad):
        (i,) = ctx.saved_tensors
        return torch.zeros(ctx.shape, dtype=grad.dtype).index_put((i,), grad * 2, accumulate=True), None


def test_an_input_requiring_grad_keeps_the_runtime_vmap_and_its_custom_backward():
    def f(x, idx):
        return torch.vmap(lambda i: DoubledGradIndex.apply(x, i))(idx).sum()

    minidynamo.reset()
    report = ExplainOutput()
    compiled = OptimizeContext("eager", recorder=report)(f)
    for seed in range(2):
        torch.manual_seed(seed)
        x, idx = torch.randn(5, requires_grad=True), torch.randint(0, 5, (3,))
        expected = torch.autograd.grad(f(x, idx), x)[0]
        got = torch.autograd.grad(compiled(x, idx), x)[0]
        torch.testing.assert_close(got, expected)
    assert report.fallback_count == 0 and report.graph_count == 1, report.reasons
    assert runtime_vmaps(report) and not flat_nodes(report)
    minidynamo.reset()


def test_a_body_making_a_constant_tensor_keeps_the_runtime_vmap():
    def f(x):
        return torch.vmap(lambda row: row * torch.tensor([1.0, 2.0, 3.0, 4.0]))(x)

    report = compiled_twice(f, lambda: (torch.randn(3, 4),))
    assert runtime_vmaps(report) and not flat_nodes(report)


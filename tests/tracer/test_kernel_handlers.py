"""``try: <tensor ops> except NotImplementedError`` (or ``TypeError``) around ops that write state in
place: the handler catches what an op raises for what it is called with, which the guards pin, so
the ops go into the graph once each has run on stand-ins on its real device (kernel_probe.py);
where one does not run there, the handler is eager's, and the frame runs eagerly."""

import pytest
import torch

import minidynamo


class StaticCache(torch.nn.Module):
    """transformers' StaticLayer.update: index_copy_ where the backend has it, else a setitem."""

    def __init__(self, dtype=torch.float32):
        super().__init__()
        self.register_buffer("keys", torch.zeros(1, 2, 8, 3, dtype=dtype))

    def forward(self, k, position):
        try:
            self.keys.index_copy_(2, position, k)
        except NotImplementedError:
            self.keys[:, :, position] = k
        return self.keys.sum(-1)


class CatchesTypeErrors(StaticCache):
    """transformers' check_model_inputs: ``except TypeError`` around the whole forward."""

    def forward(self, k, position):
        try:
            self.keys.index_copy_(2, position, k)
        except (TypeError, NotImplementedError):
            self.keys[:, :, position] = k
        return self.keys.sum(-1)


class CatchesRuntimeErrors(StaticCache):
    def forward(self, k, position):
        try:
            self.keys.index_copy_(2, position, k)
        except RuntimeError:
            self.keys[:, :, position] = k
        return self.keys.sum(-1)


def run(make, calls):
    eager, ours = make(), make()
    minidynamo.reset()
    minidynamo.counters.reset()
    compiled = minidynamo.optimize("eager")(ours)
    for step in range(calls):
        k, position = torch.full((1, 2, 1, 3), float(step + 1)), torch.tensor([step % 8])
        torch.testing.assert_close(compiled(k, position), eager(k, position))
        torch.testing.assert_close(ours.keys, eager.keys)
    return minidynamo.counters


@pytest.mark.parametrize("make", [StaticCache, CatchesTypeErrors])
def test_a_cache_written_in_place_under_such_a_handler_is_one_graph(make):
    counters = run(make, 5)
    assert counters["fallbacks"] == 0 and counters["compiles"] == 1, counters["fallback_reasons"]


def test_a_broader_handler_still_runs_the_frame_eagerly():
    """``except RuntimeError`` also catches what a kernel raises for values (an index out of
    range): only a re-run reproduces the handler, and a graph that writes in place cannot run twice."""
    counters = run(CatchesRuntimeErrors, 2)
    assert counters["compiles"] == 0
    assert any("catches RuntimeError" in reason for reason in counters["fallback_reasons"])


class Flags(torch.nn.Module):
    """A kernel the CPU lacks (``bitwise_not`` of floats; its meta kernel answers): eager's handler runs."""

    def __init__(self, dtype):
        super().__init__()
        self.register_buffer("state", torch.arange(6, dtype=dtype))

    def forward(self, x):
        try:
            self.state.bitwise_not_()
        except NotImplementedError:
            self.state.neg_()
        return self.state + x


@pytest.mark.parametrize("dtype, compiles", [(torch.int64, 1), (torch.float32, 2)], ids=["int64", "float32"])
def test_the_ops_run_on_stand_ins_decide(dtype, compiles):
    """An integer buffer: one graph. A float one: eager's kernel refuses ``bitwise_not_`` for its
    dtype (asked at trace time, as for any op of integers only), so the call breaks there and
    the handler runs as in eager, the rest captured on either side."""
    eager, ours = Flags(dtype), Flags(dtype)
    minidynamo.reset()
    minidynamo.counters.reset()
    compiled = minidynamo.optimize("eager")(ours)
    for _ in range(3):
        x = torch.ones(6, dtype=dtype)
        torch.testing.assert_close(compiled(x), eager(x))
        torch.testing.assert_close(ours.state, eager.state)
    assert minidynamo.counters["compiles"] == compiles
    if dtype == torch.float32:
        assert any("not implemented for 'Float'" in r for r in minidynamo.counters["break_reasons"])


class SplitsFirst(StaticCache):
    """An op with several results in the try body (Phi-3 splits its fused projection with chunk)."""

    def forward(self, k, position):
        try:
            first, second = torch.cat([k, k], dim=-1).chunk(2, dim=-1)
            self.keys.index_copy_(2, position, first + second)
        except TypeError:
            self.keys.zero_()
        return self.keys.sum(-1)


def test_the_results_of_an_op_with_several_are_not_run_apart():
    counters = run(SplitsFirst, 3)
    assert counters["fallbacks"] == 0 and counters["compiles"] == 1, counters["fallback_reasons"]


class MasksByVmap(StaticCache):
    """transformers' attention masks are made by nested vmaps inside check_model_inputs' ``try``:
    the flattened vmap's graph (aten ops only, vmap_flatten.py) runs on stand-ins like any op
    (probe AF: LLaMA's StaticCache decode steps ran eagerly)."""

    def forward(self, k, position):
        try:
            self.keys.index_copy_(2, position, k)
            mask = torch.vmap(lambda row: row > position.float())(torch.arange(8.0).unsqueeze(-1))
        except TypeError:
            self.keys.zero_()
            mask = None
        return self.keys.sum(-1) * mask.squeeze(-1).float()


def test_a_flattened_vmap_in_the_try_body_runs_on_stand_ins():
    counters = run(MasksByVmap, 4)
    assert counters["fallbacks"] == 0 and counters["compiles"] == 1, counters["fallback_reasons"]


"""Graph inputs that share one storage (``tracer/shared_storage.py``): their examples share a
meta storage, so the trace sees what a write through one does to the other, and a graph that
writes an input is guarded on which inputs share storage."""

import pytest
import torch

import minidynamo

from ..corpus.helpers import CountingBackend

STORE = {}


@pytest.fixture(autouse=True)
def _fresh():
    minidynamo.reset()
    STORE.clear()
    yield
    minidynamo.reset()


def _store_then_copy_overlapping(y):
    row = y[0]
    print("break")                 # the resumed frame receives y and row: one storage
    STORE["n"] = y.size(-1)
    y.copy_(row)                   # eager refuses: the written and the read memory overlap
    return y


def test_an_op_refused_for_overlap_raises_after_the_effects_before_it(capsys):
    with pytest.raises(RuntimeError, match="single memory location") as eager_error:
        _store_then_copy_overlapping(torch.ones(2, 3))
    assert STORE.pop("n") == 3
    opt = minidynamo.optimize(CountingBackend())(_store_then_copy_overlapping)
    for _ in range(2):
        with pytest.raises(type(eager_error.value), match="single memory location"):
            opt(torch.ones(2, 3))
        assert STORE.pop("n") == 3     # the store eager made before the error is made here too


def _write_one_read_other(a, b):
    a.mul_(2)
    return b + 1


def test_a_graph_writing_an_input_is_guarded_on_sharing():
    backend = CountingBackend()
    opt = minidynamo.optimize(backend)(_write_one_read_other)
    for make in (lambda: (lambda x: (x, x[0]))(torch.arange(6.).reshape(2, 3)),
                 lambda: (torch.arange(6.).reshape(2, 3), torch.arange(3.)),
                 lambda: (lambda x: (x, x[0]))(torch.arange(6.).reshape(2, 3))):
        expected_args, args = make(), make()
        expected = _write_one_read_other(*expected_args)
        torch.testing.assert_close(opt(*args), expected)
        torch.testing.assert_close(args, expected_args)
    assert backend.compile_count == 2       # shared, then apart (recompiled), then shared (a hit)
    assert minidynamo.counters["cache_hits"] == 1


def test_reading_inputs_that_share_storage_adds_no_guard():
    backend = CountingBackend()
    opt = minidynamo.optimize(backend)(lambda a, b: a * b)
    x = torch.ones(2, 3)
    opt(x, x[1])
    opt(torch.ones(2, 3), torch.ones(3))
    assert backend.compile_count == 1


def test_examples_of_inputs_in_one_storage_share_a_meta_storage():
    seen = []

    def backend(gm, example_inputs):
        seen.extend(node.meta["example_value"] for node in gm.graph.nodes if node.op == "placeholder")
        return gm.forward

    x = torch.zeros(4, 3)
    minidynamo.optimize(backend)(lambda a, b, c: a + b.sum() + c.sum())(x[1], x[2:], torch.zeros(2))
    a, b, c = seen
    assert a.untyped_storage()._cdata == b.untyped_storage()._cdata != c.untyped_storage()._cdata
    assert (a.storage_offset(), b.storage_offset(), tuple(b.shape)) == (3, 6, (2, 3))
    assert a.untyped_storage().nbytes() >= x.untyped_storage().nbytes()


def test_a_view_of_an_activation_shares_the_autograd_history_of_its_example():
    def f(h, row):
        row.mul_(2)                # eager allows it: row is a view of a non-leaf
        return h.sum()

    w = torch.ones(2, 3, requires_grad=True)
    h = w * 1
    opt = minidynamo.optimize(CountingBackend())(f)
    out = opt(h, h[0])
    out.backward()
    w2 = torch.ones(2, 3, requires_grad=True)
    h2 = w2 * 1
    expected = f(h2, h2[0])
    expected.backward()
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(w.grad, w2.grad)

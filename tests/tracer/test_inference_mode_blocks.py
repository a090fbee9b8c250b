"""``with torch.inference_mode(mode):`` inside a traced frame: switched for real while the block is
traced and by graph nodes at call time, so values, ``is_inference()`` of results and
``torch.is_inference_mode_enabled()`` are eager's, with or without a graph break in the block."""

import pytest
import torch

import minidynamo

from ..corpus.helpers import CountingBackend


@pytest.fixture(autouse=True)
def _fresh():
    minidynamo.reset()
    yield
    minidynamo.reset()
    assert not torch.is_inference_mode_enabled()


def _block(x):
    with torch.inference_mode():
        y = x * 2
        inside = torch.is_inference_mode_enabled()
        with torch.inference_mode(False):
            z = x + 1                      # a normal tensor again
    return y + inside, z, y.is_inference(), z.is_inference(), torch.is_inference_mode_enabled()


def _break_in_block(x):
    with torch.inference_mode():
        y = x * 2
        print("break")
        z = y.relu()
    return z, z.is_inference()


def _same(actual, expected):
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        if isinstance(e, torch.Tensor):
            assert a.is_inference() == e.is_inference()
            torch.testing.assert_close(a, e)
        else:
            assert a == e


def test_an_inference_block_is_one_graph_with_eagers_answers():
    backend = CountingBackend()
    opt = minidynamo.optimize(backend)(_block)
    x = torch.randn(3)
    for _ in range(2):
        _same(opt(x), _block(x))
    assert backend.compile_count == 1 and minidynamo.counters["graph_breaks"] == 0


def test_a_break_inside_an_inference_block(capsys):
    opt = minidynamo.optimize(CountingBackend())(_break_in_block)
    x = torch.randn(3)
    for _ in range(2):
        _same(opt(x), _break_in_block(x))
    assert minidynamo.counters["graph_breaks"] == 1 and minidynamo.counters["fallbacks"] == 0


def test_whether_an_input_is_an_inference_tensor_is_guarded():
    opt = minidynamo.optimize(CountingBackend())(lambda x: x * 2 if x.is_inference() else x + 1)
    with torch.inference_mode():
        inference = torch.ones(2)
    for x in (torch.ones(2), inference, torch.ones(2)):
        torch.testing.assert_close(opt(x), x * 2 if x.is_inference() else x + 1)
    assert minidynamo.counters["compiles"] == 2


STATE = {}


def _first_read_in_a_block(x):
    with torch.inference_mode():
        y = x * STATE["w"]            # the global tensor is read first here
    STATE["w"].add_(1)                # allowed: it is no inference tensor, wherever it was read
    return y + STATE["w"]


def test_an_inputs_example_is_an_inference_tensor_only_if_the_input_is():
    backend = CountingBackend()
    opt = minidynamo.optimize(backend)(_first_read_in_a_block)
    STATE["w"] = torch.ones(2)
    expected = _first_read_in_a_block(torch.ones(2))
    STATE["w"] = torch.ones(2)
    torch.testing.assert_close(opt(torch.ones(2)), expected)
    torch.testing.assert_close(STATE["w"], torch.full((2,), 2.0))
    assert backend.compile_count == 1 and minidynamo.counters["graph_breaks"] == 0
    with torch.inference_mode():
        STATE["w"] = torch.ones(2)
    with pytest.raises(RuntimeError, match="Inplace update to inference tensor"):
        opt(torch.ones(2))            # as eager: the write is refused

"""Arguments that differ between calls of one compiled function, checked against eager.

Found by a probe of argument structure and aliasing (see tests/fuzz/FINDINGS.md). Every example
value of the trace lives on the meta device, so an op that moves a tensor to another device
(``x.to(d)``, ``torch.as_tensor(x, device=d)``) answered the argument itself there: the graph
dropped the move and returned the caller's tensor, on its old device."""

import pytest
import torch

import minidynamo
from tests.test_soundness import CountingBackend


@pytest.fixture(autouse=True)
def fresh_caches():
    minidynamo.reset()
    yield
    minidynamo.reset()


def move(x, d):
    y = x.to(d)
    return y, y * 2


def move_with_a_keyword(x, d):
    y = x.to(device=d)
    return y, y * 2


def as_tensor_on(x, d):
    y = torch.as_tensor(x, device=d)
    return y, y * 2


def asarray_on(x, d):
    y = torch.asarray(x, device=d)
    return y, y * 2


def move_a_transpose(x, d):
    y = x.t().to(d)
    return y, y * 2


MOVES = [move, move_with_a_keyword, as_tensor_on, asarray_on, move_a_transpose]


@pytest.mark.parametrize("program", MOVES, ids=lambda p: p.__name__)
def test_a_move_to_another_device_gives_a_tensor_there_as_eager(program):
    optimized = minidynamo.optimize(CountingBackend())(program)
    x = torch.randn(2, 3)
    (same, _), (expected_same, _) = optimized(x, "cpu"), program(x, "cpu")   # its own device: no copy
    assert (same is x) == (expected_same is x) and same.data_ptr() == expected_same.data_ptr() == x.data_ptr()
    for moved, expected in zip(optimized(x, "meta"), program(x, "meta")):
        assert moved.device == expected.device == torch.device("meta")
        assert (moved.shape, moved.stride()) == (expected.shape, expected.stride())


def test_a_write_to_a_moved_tensor_leaves_the_argument_as_it_was():
    def bump_a_copy(x, d):
        y = x.to(d)
        y.add_(1)
        return y

    optimized = minidynamo.optimize(CountingBackend())(bump_a_copy)
    x = torch.zeros(3)
    out = optimized(x, "meta")
    assert out.device.type == "meta"
    assert torch.equal(x, torch.zeros(3))                     # eager: x untouched
    assert torch.equal(optimized(x, "cpu"), torch.ones(3)) and torch.equal(x, torch.ones(3))


def test_the_first_call_on_another_device_is_not_folded_either():
    optimized = minidynamo.optimize(CountingBackend())(move)
    assert all(t.is_meta for t in optimized(torch.randn(3), torch.device("meta")))

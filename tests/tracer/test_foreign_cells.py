"""``nonlocal`` in a function the trace inlines whose cell belongs to a function defined outside
the trace (PyTorch's test_change_parent_nonlocal_*: a decorator's call counter, a closure's
state): the store is replayed after the graph into the cell that function's ``__closure__``
holds on this call; a cell the trace also reaches through another function is refused."""

import pytest
import torch

import minidynamo


@pytest.fixture(autouse=True)
def _fresh():
    minidynamo.reset()
    yield
    minidynamo.reset()


def make_counter():
    count = 0

    def bump(x):
        nonlocal count
        count = count + 1
        return x * count

    def read():
        return count
    return bump, read


def test_a_callee_counting_in_its_closure():
    bump, read = make_counter()
    reference, reference_read = make_counter()

    def f(x):
        return bump(x).sin()

    def g(x):
        return reference(x).sin()

    compiled = minidynamo.optimize("eager")(f)
    for _ in range(4):
        x = torch.randn(3)
        torch.testing.assert_close(compiled(x), g(x))
        assert read() == reference_read()
    assert not minidynamo.counters["fallback_reasons"] and minidynamo.counters["graph_breaks"] == 0


def test_a_fresh_closure_per_call_writes_its_own_cell():
    def f(x, bump):
        y = bump(x)
        return bump(y)

    compiled = minidynamo.optimize("eager")(f)
    for _ in range(3):
        ours, ours_read = make_counter()
        theirs, theirs_read = make_counter()
        x = torch.randn(2)
        torch.testing.assert_close(compiled(x, ours), f(x, theirs))
        assert ours_read() == theirs_read() == 2


def test_one_cell_reached_through_two_functions_is_refused_not_wrong():
    bump, read = make_counter()
    reference, reference_read = make_counter()

    def f(x, bump, read):
        y = bump(x) + read()
        return y + read()

    compiled = minidynamo.optimize("eager")(f)
    for _ in range(2):
        x = torch.randn(2)
        torch.testing.assert_close(compiled(x, bump, read), f(x, reference, reference_read))
        assert read() == reference_read()


def test_a_callee_called_twice_counts_twice_in_one_graph():
    bump, read = make_counter()
    reference, reference_read = make_counter()

    def f(x, bump):
        return bump(bump(x))

    compiled = minidynamo.optimize("eager")(f)
    for _ in range(3):
        x = torch.randn(2)
        torch.testing.assert_close(compiled(x, bump), f(x, reference))
        assert read() == reference_read()
    assert minidynamo.counters["graph_breaks"] == 0 and not minidynamo.counters["fallback_reasons"]

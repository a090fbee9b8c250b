"""Graph breaks in awkward contexts (with-blocks, re-entrancy), each differential against eager
over several calls: values, ``requires_grad``, grad mode inside and after the block."""

import dis
import threading

import pytest
import torch

import minidynamo


@pytest.fixture(autouse=True)
def _fresh():
    minidynamo.reset()
    torch.set_grad_enabled(True)
    yield
    minidynamo.reset()
    torch.set_grad_enabled(True)


@minidynamo.disable
def switch_grad(mode):
    """A callee the frame breaks at, which switches grad mode and leaves it switched."""
    torch.set_grad_enabled(mode)


def described(value):
    if isinstance(value, torch.Tensor):
        return ("tensor", value.detach().tolist(), value.requires_grad, value.grad_fn is None)
    if isinstance(value, (tuple, list)):
        return tuple(described(v) for v in value)
    return value


def assert_matches_eager(fn, make_args, calls=3):
    opt = minidynamo.optimize("eager")(fn)
    for i in range(calls):
        expected = described(fn(*make_args(i)))
        mode_after = torch.is_grad_enabled()
        torch.set_grad_enabled(True)
        assert described(opt(*make_args(i))) == expected
        assert torch.is_grad_enabled() == mode_after
        torch.set_grad_enabled(True)
    assert minidynamo.counters["graph_breaks"] >= 1


def leaf(i):
    return (torch.arange(3.0) + i).requires_grad_(),


# -- the eager instruction switches grad mode inside a with-block: eager keeps that mode for the
# -- rest of the block (the resume function re-entered the block in the block's own mode) -------
def grad_on_inside_no_grad(x):
    with torch.no_grad():
        a = x * 2
        switch_grad(True)
        b = x * 3
        inside = torch.is_grad_enabled()
    return a, b, inside, torch.is_grad_enabled(), x * 4


def grad_off_inside_enable_grad_under_no_grad(x):
    with torch.no_grad():
        with torch.enable_grad():
            switch_grad(False)
            b = x * 3
        c = x * 5
    return b, c, torch.is_grad_enabled()


def grad_on_inside_no_grad_and_autocast_off(x):
    with torch.no_grad():
        with torch.autocast("cpu", enabled=False):
            switch_grad(True)
            b = x * 3
        c = x * 5
        switch_grad(False)
        d = x * 6
    return b, c, d


def grad_switch_inside_set_grad_enabled(x, flag):
    with torch.set_grad_enabled(flag):
        switch_grad(not flag)
        b = x * 3
    return b, torch.is_grad_enabled()


@pytest.mark.parametrize("fn", [grad_on_inside_no_grad, grad_off_inside_enable_grad_under_no_grad,
                                grad_on_inside_no_grad_and_autocast_off])
def test_grad_mode_the_eager_instruction_leaves_inside_a_block_holds_until_its_end(fn):
    assert_matches_eager(fn, leaf)


def test_grad_mode_switched_inside_set_grad_enabled():
    assert_matches_eager(grad_switch_inside_set_grad_enabled, lambda i: (*leaf(i), i % 2 == 0), calls=4)


def test_a_block_the_instruction_leaves_alone_is_compiled_once():
    def f(x):
        with torch.no_grad():
            a = x * 2
            print("inside")
            b = a + x
        return a, b

    assert_matches_eager(f, leaf)
    assert minidynamo.counters["fallbacks"] == 0 and minidynamo.counters["compiles"] == 2


# -- ``with torch.autocast(...) as a`` binds the autocast object (eager's __enter__ returns it) ---
def autocast_as_target(x):
    with torch.autocast("cpu", enabled=False) as ac:
        y = x * 2
    return y, ac is None, type(ac).__name__, isinstance(ac, torch.autocast)


def autocast_as_target_across_a_break(x):
    with torch.autocast("cpu", enabled=False) as ac:
        y = x * 2
        print(type(ac).__name__)
    return y, ac is None


@pytest.mark.parametrize("fn", [autocast_as_target, autocast_as_target_across_a_break])
def test_autocast_as_target_is_the_autocast_object(fn, capsys):
    opt = minidynamo.optimize("eager")(fn)
    for i in range(2):
        x = torch.arange(3.0) + i
        expected = described(fn(x))
        eager_out = capsys.readouterr().out
        assert described(opt(x)) == expected
        assert capsys.readouterr().out == eager_out


# -- the eager instruction switches autocast inside an autocast block (the sibling of grad mode):
# -- eager keeps the switch for the rest of the block -------------------------------------------
@minidynamo.disable
def switch_autocast(enabled, dtype=None):
    """A callee the frame breaks at, which switches CPU autocast and leaves it switched."""
    torch.set_autocast_enabled("cpu", enabled)
    if dtype is not None:
        torch.set_autocast_dtype("cpu", dtype)


@pytest.fixture
def autocast_restored():
    yield
    torch.set_autocast_enabled("cpu", False)
    torch.set_autocast_dtype("cpu", torch.bfloat16)


def autocast_on_inside_autocast_off(x, w, switch):
    with torch.autocast("cpu", enabled=False):
        a = x @ w
        if switch:
            switch_autocast(True)
        else:
            print("no switch")
        b = x @ w
        inside = torch.is_autocast_enabled("cpu")
    return a.dtype, b.dtype, inside, torch.is_autocast_enabled("cpu"), (x @ w).dtype


def autocast_dtype_inside_nested_autocast_off(x, w, switch):
    with torch.autocast("cpu", enabled=False):
        with torch.autocast("cpu", enabled=False):
            switch_autocast(switch, torch.float16)
            b = x @ w
        c = x @ w
    return b.dtype, c.dtype, torch.get_autocast_dtype("cpu")


@pytest.mark.parametrize("fn", [autocast_on_inside_autocast_off, autocast_dtype_inside_nested_autocast_off])
def test_autocast_the_eager_instruction_switches_inside_a_block_holds_until_its_end(fn, autocast_restored):
    opt = minidynamo.optimize("eager")(fn)
    x, w = torch.randn(3, 3), torch.randn(3, 3)
    for switch in (False, True, False, True):
        expected = fn(x, w, switch)
        state_after = (torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu"))
        torch.set_autocast_enabled("cpu", False)
        torch.set_autocast_dtype("cpu", torch.bfloat16)
        assert opt(x, w, switch) == expected
        assert (torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu")) == state_after
        torch.set_autocast_enabled("cpu", False)
        torch.set_autocast_dtype("cpu", torch.bfloat16)
    assert minidynamo.counters["graph_breaks"] >= 1


# -- a resume function whose code keeps a handler it can no longer enter ----------------------------
INNER_LOCK = threading.Lock()


def exits_a_block_the_trace_cannot_run_then_raises(x, i):
    with torch.set_grad_enabled(False):
        with INNER_LOCK:                                          # breaks at its with and its exit
            y = torch.cat([x, x], dim=1)
        z = x[i]                                                  # out of range on some calls
    return y, z


def test_a_run_time_error_after_an_inner_block_the_resume_function_exits():
    """Fuzz seed 332 i692 (C28): the resume function starting at the inner block's exit keeps that
    block's handler, now unreachable, and the exception-table region that opens inside it.  Depths
    recomputed from the reachable code gave that region a junk stack depth (32768), so the
    IndexError below unwound the frame's stack past its end: a segmentation fault."""
    from minidynamo.breaks.resume_code import _origins

    x = torch.arange(6.0).reshape(2, 3).requires_grad_()
    opt = minidynamo.optimize("eager")(exits_a_block_the_trace_cannot_run_then_raises)
    for i in (7, 7, 1, 1):
        index = torch.tensor([i])
        try:
            expected = described(exits_a_block_the_trace_cannot_run_then_raises(x, index))
        except IndexError:
            with pytest.raises(IndexError):
                opt(x, index)
        else:
            assert described(opt(x, index)) == expected
        assert torch.is_grad_enabled()
    assert minidynamo.counters["graph_breaks"] >= 2
    made = [code for code in list(_origins.keys())
            if code.co_name == exits_a_block_the_trace_cannot_run_then_raises.__name__]
    assert len(made) >= 2
    for code in made:       # every handler keeps no more than the frame's stack holds
        assert all(entry.depth <= code.co_stacksize for entry in dis._parse_exception_table(code))

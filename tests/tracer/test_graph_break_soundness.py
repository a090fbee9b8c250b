"""Soundness across graph breaks, beyond the one-case-per-family tests of test_graph_breaks.py:
re-entrancy (the eager instruction calls the optimized function again), recursion with state,
generators and coroutines (never traced, even when they print), exceptions of the eager
instruction caught by the caller, and the break families the differential fuzzer generates
(tests/fuzz/generator.py ``graph_breaks``), each differential against eager."""

import asyncio
import operator

import pytest
import torch

import minidynamo
from tests.fuzz.oracle import run_program

from ..corpus.helpers import CountingBackend


@pytest.fixture(autouse=True)
def _fresh():
    minidynamo.reset()
    yield
    minidynamo.reset()


# -- re-entrancy: the eager instruction of a break calls the optimized function again ------------
def reentrant(x, depth, log):
    y = x.sin() + depth
    log.append(depth)
    if depth > 0:
        # the break's eager instruction: an unmodelled C call whose argument re-enters reentrant
        z = operator.length_hint(iter([]), len(log)) + OPT[0](y, depth - 1, log).sum()
    else:
        z = y.sum()
    print("depth", depth, len(log))
    return y * z


OPT = []


def test_reentrant_call_from_the_eager_instruction(capsys):
    backend = CountingBackend()
    OPT[:] = [reentrant]
    x = torch.randn(3, generator=torch.Generator().manual_seed(0))
    eager_log = []
    expected = reentrant(x, 3, eager_log)
    eager_out = capsys.readouterr().out
    OPT[:] = [minidynamo.optimize(backend)(reentrant)]
    try:
        for _ in range(2):
            log = []
            actual = OPT[0](x, 3, log)
            assert capsys.readouterr().out == eager_out
            assert log == eager_log
            torch.testing.assert_close(actual, expected)
    finally:
        OPT[:] = []
    assert backend.compile_count >= 2


# -- recursion that mutates shared state before each break ---------------------------------------
def count_down(x, n, seen):
    seen.append(n)
    y = x * 2
    print("at", n, len(seen))
    if n == 0:
        return y
    return count_down(y, n - 1, seen) + len(seen)


def test_recursion_with_side_effects_before_each_break(capsys):
    opt = minidynamo.optimize(CountingBackend())(count_down)
    for n in (3, 3, 1):
        x = torch.ones(2)
        seen_e, seen_o = [], []
        expected = count_down(x, n, seen_e)
        out_e = capsys.readouterr().out
        torch.testing.assert_close(opt(x, n, seen_o), expected)
        assert capsys.readouterr().out == out_e and seen_o == seen_e


# -- generators and coroutines are never traced, breaks or not ----------------------------------
def gen_with_print(x):
    for i in range(2):
        print("gen", i)
        yield x * i


async def coro_with_print(x):
    print("coro")
    await asyncio.sleep(0)
    return x.sin()


def uses_generator(x):
    parts = list(gen_with_print(x))
    return parts[0] + parts[1]


def test_generator_and_coroutine_frames_are_never_traced(capsys):
    backend = CountingBackend()
    opt = minidynamo.optimize(backend)(gen_with_print)
    x = torch.randn(2)
    assert [t.tolist() for t in opt(x)] == [t.tolist() for t in gen_with_print(x)]
    copt = minidynamo.optimize(backend)(coro_with_print)
    torch.testing.assert_close(asyncio.run(copt(x)), x.sin())
    uopt = minidynamo.optimize(backend)(uses_generator)
    torch.testing.assert_close(uopt(x), uses_generator(x))
    assert capsys.readouterr().out.count("coro") == 1
    reasons = minidynamo.counters.snapshot()["break_reasons"] + minidynamo.counters.snapshot()["fallback_reasons"]
    assert not any(r.startswith(("gen_with_print", "coro_with_print")) for r in reasons)   # about them, never in them
    assert backend.compile_count >= 1          # uses_generator itself is compiled around the generator


# -- the eager instruction raises, the caller catches: state as eager leaves it -----------------
def breaks_then_raises(x, log, flags):
    log.append(1)
    flags.n = flags.n + 1
    with torch.no_grad():
        y = x * 2
        v = float(y)            # raises for more than one element
    log.append(2)
    return y + v


class Flags:
    n = 0


def caller(x, log, flags):
    try:
        return breaks_then_raises(x, log, flags)
    except (RuntimeError, ValueError) as e:
        return type(e).__name__, torch.is_grad_enabled(), len(log), flags.n


def test_exception_of_the_eager_instruction_reaches_the_callers_handler():
    opt = minidynamo.optimize(CountingBackend())(breaks_then_raises)
    for x in (torch.ones(3), torch.ones(1), torch.ones(3)):
        le, lo, fe, fo = [], [], Flags(), Flags()
        expected = caller(x, le, fe)
        try:
            actual = opt(x, lo, fo)
        except (RuntimeError, ValueError) as e:
            actual = type(e).__name__, torch.is_grad_enabled(), len(lo), fo.n
        if isinstance(expected, tuple):
            assert actual == expected
        else:
            torch.testing.assert_close(actual, expected)
        assert lo == le and fo.n == fe.n and torch.is_grad_enabled()


# -- the fuzzer's break families, one hand-written program each through the same oracle ----------
FAMILIES = {
    "print_between_blocks": "t1 = x.sin() + y\n    print('gb', t1.shape, t1.detach().round(decimals=2))\n    t2 = t1 * n",
    "if_on_tensor": "t1 = x + 1\n    if t1.sum() > 0:\n        t1 = t1 * 2\n    else:\n        t1 = t1 - y\n    t2 = t1.cos()",
    "item_in_arithmetic": "f1 = float(x.sum()) * 2 + n\n    i1 = int(y.max().item() > 0) + n\n    t2 = x * f1 + i1",
    "unmodelled_c_call": "i1 = sys.getsizeof(n) + n\n    t2 = x * i1 + y",
    "with_no_grad": "with torch.no_grad():\n        t1 = x * 2\n        print('in', torch.is_grad_enabled(), t1.requires_grad)\n        t2 = t1 + y",
    "inlined_helper": "t2 = helper_print(x, k=n) + y",
    "pending_effects": "xs.append(n)\n    G_DICT['gb'] = n\n    OBJ.last = x * 2\n    MOD.count += 1\n    print(xs, G_DICT, MOD.count)\n    t2 = OBJ.last + len(xs)",
    "two_in_a_row": "t1 = x * 2\n    print('one', t1.shape)\n    print('two', n)\n    t2 = t1 + n",
    "raising_instruction": "t1 = x + 1\n    if n > 1:\n        i1 = int(t1)\n    t2 = t1 * 3",
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_fuzzer_break_family_matches_eager(family):
    from tests.fuzz.generator import PRELUDE
    prelude = "\n\n".join(block for _, block in PRELUDE)
    source = prelude + "\n\ndef f(x, y, n, xs):\n    " + FAMILIES[family] + "\n    return t2, xs\n"
    base = {"B": 2, "C": 3, "dtype": "float32", "n": 2, "xs": [1, 2], "nts": 0, "seed": 1}
    steps = [("call", base), ("call", dict(base, seed=2)), ("call", dict(base, n=0, seed=3)),
             ("exec", "torch.set_grad_enabled(False)"), ("call", dict(base, seed=4)),
             ("exec", "torch.set_grad_enabled(True)"), ("call", dict(base, grad=True, seed=5)),
             ("call", dict(base, reuse=True))]
    out = run_program(source, steps, CountingBackend())
    assert out.setup_error is None
    assert out.mismatch is None, out.mismatch
    assert out.f_breaks >= 1, (out.breaks, out.fallbacks)
    assert out.f_fallbacks == 0, out.fallbacks


# -- fuzzer finding: torch.is_grad_enabled() inside a with block guarded the live mode ----------
def reads_grad_mode_in_no_grad(x):
    with torch.no_grad():
        t = x * 2
        print("in", torch.is_grad_enabled(), t.requires_grad)
        t = t + 1
    return t, torch.is_grad_enabled()


def test_grad_mode_read_inside_a_with_block_is_not_guarded_as_the_entry_mode(capsys):
    """The query inside ``no_grad`` used to add a guard 'grad mode is False' for the frame's
    entry, which the entry (grad on) never meets: the break failed and the frame fell back."""
    backend = CountingBackend()
    opt = minidynamo.optimize(backend)(reads_grad_mode_in_no_grad)
    for enabled in (True, False, True):
        with torch.set_grad_enabled(enabled):
            x = torch.ones(2, requires_grad=True)
            expected = reads_grad_mode_in_no_grad(x)
            out_e = capsys.readouterr().out
            actual = opt(x)
            assert capsys.readouterr().out == out_e
        assert actual[1] == expected[1]
        torch.testing.assert_close(actual[0], expected[0])
    snap = minidynamo.counters.snapshot()
    assert snap["fallback_reasons"] == [] and snap["graph_breaks"] == 2     # one per entry grad mode

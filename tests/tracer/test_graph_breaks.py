"""Graph breaks: a frame the tracer cannot finish is split at the instruction it cannot trace.

Every case runs eagerly and optimized on equal fresh inputs (twice, the second call must hit
the cache), compares results, printed output and mutations, and asserts how many graphs the
backend got and how many breaks ``explain`` reports."""

import functools
import logging
import random
import sys

import pytest
import torch

import minidynamo

from ..corpus.helpers import CountingBackend


@pytest.fixture(autouse=True)
def _fresh():
    minidynamo.reset()
    yield
    minidynamo.reset()


def run_both(fn, make_args, capsys, calls=2):
    """Run ``fn`` eagerly and optimized on equal fresh inputs; return the backend."""
    backend = CountingBackend()
    opt = minidynamo.optimize(backend)(fn)
    compiled_after_first = None
    for _ in range(calls):
        expected = fn(*make_args())
        eager_out = capsys.readouterr().out
        actual = opt(*make_args())
        assert capsys.readouterr().out == eager_out, "printed output differs from eager"
        torch.testing.assert_close(actual, expected)
        if compiled_after_first is None:
            compiled_after_first = backend.compile_count
    assert backend.compile_count == compiled_after_first, "the second call compiled again"
    return backend


def inputs(*shape, seed=0):
    def make():
        return (torch.randn(*shape, generator=torch.Generator().manual_seed(seed)),)
    return make


# -- a print between two blocks of tensor ops ---------------------------------------------------
def print_between(x):
    y = x.sin() + 1
    print("shape", y.shape)
    return y.cos() * 2


def test_print_between_two_blocks_gives_two_graphs(capsys):
    backend = run_both(print_between, inputs(4), capsys)
    assert backend.compile_count == 2
    assert minidynamo.counters["graph_breaks"] == 1      # not again on the second call
    report = minidynamo.explain(print_between)(*inputs(4)())
    assert (report.graph_count, report.graph_break_count, report.fallback_count) == (2, 1, 0)
    info = report.breaks[0]
    assert "print" in info.reason and info.instruction == "CALL"
    assert info.where == f"{__file__}:{print_between.__code__.co_firstlineno + 2}"


# -- a jump on a tensor value: graph before, one resume per branch ------------------------------
def branch_on_sum(x):
    y = x * 3
    if y.sum() > 0:
        z = y.relu() + 1
    else:
        z = y.abs() - 1
    return z * 2


def test_if_on_tensor_sum_breaks_at_the_jump(capsys):
    positive, negative = (lambda: (torch.ones(3),)), (lambda: (-torch.ones(3),))
    backend = run_both(branch_on_sum, positive, capsys)
    assert backend.compile_count == 2                      # before the jump, the taken branch
    run_both(branch_on_sum, negative, capsys)
    report = minidynamo.explain(branch_on_sum)(-torch.ones(3))
    assert (report.graph_count, report.graph_break_count) == (2, 1)
    assert report.breaks[0].instruction.startswith("POP_JUMP")
    assert "sum" in str(report.graphs[0].code)            # the condition is computed by graph 1


def test_both_branches_share_one_entry():
    backend = CountingBackend()
    opt = minidynamo.optimize(backend)(branch_on_sum)
    for x in (torch.ones(3), -torch.ones(3), torch.ones(3), -torch.ones(3)):
        torch.testing.assert_close(opt(x), branch_on_sum(x))
    assert backend.compile_count == 3                      # graph 1 and each branch, once


# -- an unsupported builtin call in the middle ---------------------------------------------------
def builtin_in_the_middle(x):
    y = x + 1
    key = sys.getsizeof(y.shape[0]) > 0              # a C function the tracer does not model
    return y * 2 if key else y


def test_unsupported_builtin_in_the_middle(capsys):
    backend = run_both(builtin_in_the_middle, inputs(3), capsys)
    report = minidynamo.explain(builtin_in_the_middle)(*inputs(3)())
    assert report.graph_break_count == 1 and report.fallback_count == 0
    assert backend.compile_count == report.graph_count == 2


# -- a C method bound to an object: a break at its call, not a fallback of the frame -------------
RNG = random.Random(0)


def draws_from_bound_c_methods(x):
    y = x + random.random()                 # random.random is ``Random.random`` bound to random's own instance
    z = y * RNG.random()                    # a C method of the caller's object, bound anew at each read
    return z - int.from_bytes(b"\x01\x02", "big")   # a C classmethod: bound to its class


def test_a_bound_c_method_breaks_at_its_call(capsys):
    def make():
        random.seed(3)
        RNG.seed(4)
        return inputs(3)()

    backend = run_both(draws_from_bound_c_methods, make, capsys)
    assert not minidynamo.counters["fallback_reasons"]
    assert backend.compile_count == 3                  # after each draw (nothing to compute before the first)
    make()
    report = minidynamo.explain(draws_from_bound_c_methods)(*make())
    assert report.fallback_count == 0 and report.graph_break_count == 3
    assert all("C method" in b.reason for b in report.breaks)


def logs_and_asks_the_tracer_state(x):
    torch._C._log_api_usage_once("minidynamo.test")      # pybind11 functions: their ``__self__``
    if torch._C._get_tracing_state() is None:           # is pybind11's record, not an object
        x = x + 1
    return x * 2


def test_a_module_function_bound_to_its_pybind11_record_is_not_a_method():
    backend = CountingBackend()
    opt = minidynamo.optimize(backend)(logs_and_asks_the_tracer_state)
    x = torch.randn(3)
    torch.testing.assert_close(opt(x), logs_and_asks_the_tracer_state(x))
    assert backend.compile_count == 1
    assert not minidynamo.counters["break_reasons"] and not minidynamo.counters["fallback_reasons"]


# -- a break inside an inlined helper: taken at the call site, the helper runs as its own frame --
def noisy_helper(t, scale):
    u = t * scale
    print("inside", u.shape)
    return u - 1


def calls_noisy_helper(x):
    a = x.exp()
    b = a.sin() + noisy_helper(a, scale=2.0)      # a stack value below the call, a keyword
    return b.sum(0)


def test_break_inside_an_inlined_helper(capsys):
    backend = run_both(calls_noisy_helper, inputs(2, 3), capsys)
    report = minidynamo.explain(calls_noisy_helper)(*inputs(2, 3)())
    breaks = [(b.function, b.instruction) for b in report.breaks]
    assert breaks == [("calls_noisy_helper", "CALL"), ("noisy_helper", "CALL")]
    assert report.graph_count == backend.compile_count == 4


# -- a break inside with torch.no_grad() ---------------------------------------------------------
seen_modes = []


@minidynamo.disable
def record_grad_mode(t):
    seen_modes.append((torch.is_grad_enabled(), t.requires_grad))


def break_in_no_grad(x, w):
    y = x * w
    with torch.no_grad():
        z = y * 2
        record_grad_mode(z)
        z = z + w
    return y + z, z


def test_break_inside_no_grad(capsys):
    def make():
        return torch.ones(3), torch.ones(3, requires_grad=True)

    seen_modes.clear()
    run_both(break_in_no_grad, make, capsys)
    assert seen_modes == [(False, False)] * 4            # eager and compiled, twice each
    opt = minidynamo.optimize("eager")(break_in_no_grad)
    out, z = opt(*make())
    assert out.requires_grad and not z.requires_grad and torch.is_grad_enabled()
    report = minidynamo.explain(break_in_no_grad)(*make())
    assert (report.graph_count, report.graph_break_count) == (2, 1)


def test_break_inside_no_grad_restores_grad_mode_when_the_instruction_raises():
    @minidynamo.disable
    def boom(t):
        raise KeyError("boom")

    def f(x):
        with torch.no_grad():
            y = x + 1
            boom(y)
        return y

    opt = minidynamo.optimize("eager")(f)
    with pytest.raises(KeyError):
        opt(torch.ones(2, requires_grad=True))
    assert torch.is_grad_enabled()


# -- two breaks in a row -------------------------------------------------------------------------
def two_breaks(x):
    a = x + 1
    print("first", a.shape)
    b = a * 2
    print("second", b.dim())
    return b - 3


def test_two_breaks_in_a_row(capsys):
    backend = run_both(two_breaks, inputs(5), capsys)
    report = minidynamo.explain(two_breaks)(*inputs(5)())
    assert (report.graph_count, report.graph_break_count) == (3, 2)
    assert backend.compile_count == 3


# -- the eager instruction raises ----------------------------------------------------------------
@minidynamo.disable
def refuse_negative(t):
    if bool((t < 0).any()):
        raise ValueError("negative")
    return t


def raising_break(x, log):
    log.append("before")
    y = refuse_negative(x - 1)
    log.append("after")
    return y


def test_exception_of_the_eager_instruction_propagates_with_eager_state():
    opt = minidynamo.optimize("eager")(raising_break)
    for x in (torch.zeros(2), torch.full((2,), 5.0), torch.zeros(2)):
        eager_log, opt_log = [], []
        try:
            expected, eager_error = raising_break(x, eager_log), None
        except ValueError as e:
            expected, eager_error = None, e
        if eager_error is None:
            torch.testing.assert_close(opt(x, opt_log), expected)
        else:
            with pytest.raises(ValueError, match="negative"):
                opt(x, opt_log)
        assert opt_log == eager_log


# -- side effects before the break are visible after it, once -----------------------------------
class Holder:
    pass


def effects_across_break(x, items, holder):
    items.append(x.sum())
    holder.scale = x * 2
    holder.count = holder.count + 1
    print("items", len(items), holder.count)
    items.append(holder.scale + len(items))
    return holder.scale + items[0]


def test_side_effects_on_a_list_and_an_attribute_across_a_break(capsys):
    opt = minidynamo.optimize("eager")(effects_across_break)
    for _ in range(2):
        x = torch.arange(3.0)
        eager_items, eager_holder = [torch.ones(1)], Holder()
        eager_holder.count = 0
        expected = effects_across_break(x, eager_items, eager_holder)
        eager_out = capsys.readouterr().out
        items, holder = [torch.ones(1)], Holder()
        holder.count = 0
        actual = opt(x, items, holder)
        assert capsys.readouterr().out == eager_out
        torch.testing.assert_close(actual, expected)
        assert len(items) == len(eager_items) == 3
        for got, want in zip(items, eager_items):
            torch.testing.assert_close(got, want)
        torch.testing.assert_close(holder.scale, eager_holder.scale)
        assert holder.count == eager_holder.count == 1
    assert minidynamo.counters["graph_breaks"] == 1


# -- a break inside a try block: the resume function keeps the try statement -------------------
def break_in_try(x):
    try:
        x = x + 1
        print("inside")
    finally:
        x = x * 2
    return x


def test_a_break_inside_a_try_block(capsys):
    """The rest of the try body, and its finally, run in the resume function (whose exception
    table keeps the try statement)."""
    backend = run_both(break_in_try, inputs(2), capsys)
    assert backend.compile_count >= 1
    report = minidynamo.explain(break_in_try)(*inputs(2)())
    assert report.graph_break_count == 1 and report.fallback_count == 0


def loop_after_break(x):
    print("start")
    for i in range(3):
        x = x * 2 + i
    return x


def test_a_loop_after_the_break_is_in_the_resume_function(capsys):
    backend = run_both(loop_after_break, inputs(2), capsys)
    assert backend.compile_count == 1


@minidynamo.disable
def fail_on_negative_sum(t):
    print("checking")
    if t.sum() < 0:
        raise KeyError("negative")


def handled_by_the_frame(x):
    log = ["start"]
    try:
        y = x + 1
        fail_on_negative_sum(x)           # the break: its exception goes to the frame's handler
        log.append("passed")
    except KeyError as error:
        log.append(str(error))
        y = x - 1
    finally:
        log.append("finally")
    return y * 2, log


def test_the_eager_instructions_exception_reaches_the_frames_handler(capsys):
    opt = minidynamo.optimize("eager")(handled_by_the_frame)
    for sign in (1, -1, 1, -1):
        x = torch.ones(2) * sign
        expected = handled_by_the_frame(x)
        eager_out = capsys.readouterr().out
        got = opt(x)
        assert capsys.readouterr().out == eager_out
        torch.testing.assert_close(got[0], expected[0])
        assert got[1] == expected[1]
    assert minidynamo.counters["graph_breaks"] >= 1
    assert not any(reason.startswith("handled_by_the_frame (") for reason in minidynamo.counters["fallback_reasons"])


# -- frames with cell variables: the cells are handed to the resume function ------------------
def counts(fn, *args):
    report = minidynamo.explain(fn)(*args)
    return report.graph_count, report.graph_break_count, report.fallback_count


def lambda_around_break(x):
    scale = x.sum()
    g = lambda t: t * scale      # noqa: E731  (scale is a cell of this frame)
    y = g(x) + 1
    print("cells")
    return g(y) - scale


def test_a_lambda_capturing_a_local_is_called_before_and_after_the_break(capsys):
    backend = run_both(lambda_around_break, inputs(3), capsys)
    assert backend.compile_count == 2
    assert counts(lambda_around_break, *inputs(3)()) == (2, 1, 0)


def nonlocal_after_break(x):
    n = 0

    def bump(d):
        nonlocal n
        n += d
        return n
    y = x + bump(1)
    print("cells")
    y = y * bump(2)
    return y, n, bump(0)


def test_a_nonlocal_write_after_the_break_is_seen_by_the_frame_and_the_closure(capsys):
    run_both(nonlocal_after_break, inputs(3), capsys)
    graphs, breaks, fallbacks = counts(nonlocal_after_break, *inputs(3)())
    assert graphs >= 2 and breaks >= 1          # the frame broke at print and did not fall back whole
    assert not any("cell variables" in r for r in minidynamo.explain(nonlocal_after_break)(*inputs(3)()).reasons)


def closure_returned_after_break(x):
    total = x * 2

    def add(t):
        return t + total
    print("cells")
    total = total + 1              # the closure sees the write made after the break
    return add


def test_a_closure_returned_after_the_break_sees_the_frame_writes(capsys):
    opt = minidynamo.optimize(CountingBackend())(closure_returned_after_break)
    for _ in range(2):
        expected = closure_returned_after_break(torch.ones(2))
        actual = opt(torch.ones(2))
        torch.testing.assert_close(actual(torch.ones(2)), expected(torch.ones(2)))
        assert actual.__closure__[0] is not expected.__closure__[0]
    report = minidynamo.explain(closure_returned_after_break)(torch.ones(2))
    assert (report.graph_break_count, report.fallback_count) == (1, 0)   # the resume writes its cell


def make_accumulator():
    total = torch.zeros(2)

    def accumulate(x):
        nonlocal total            # the frame's own free variable, written: replayed on its cell
        total = total + x
        return total * 2
    return accumulate


def test_a_closure_writing_its_free_variable_is_compiled_and_replays_the_write():
    eager, compiled = make_accumulator(), make_accumulator()
    backend = CountingBackend()
    opt = minidynamo.optimize(backend)(compiled)
    for step in range(3):
        x = torch.full((2,), float(step + 1))
        torch.testing.assert_close(opt(x), eager(x))
        torch.testing.assert_close(compiled.__closure__[0].cell_contents, eager.__closure__[0].cell_contents)
    assert backend.compile_count == 1          # a tensor in the cell: a graph input, not a constant


def _twice(fn):
    @functools.wraps(fn)
    def wrapper(t):                # a library-style decorator: its closure holds ``fn``
        return fn(t) * 2
    return wrapper


@_twice
def _plus_one(t):
    return t + 1


def cell_written_then_decorated_call(x, n):
    print("cells")
    k = n                          # the frame's own cell, written after the break
    make = [x * k + i for i in range(2)]      # (a comprehension: ``k`` and ``x`` are cells)
    return _plus_one(make[1])     # reads ``fn`` from another function's closure: not one of ours


def test_another_functions_cells_of_other_names_do_not_stop_a_cell_write(capsys):
    """rwkv's pattern: after a break the frame writes a cell its comprehension reads, then
    calls a decorated function (whose wrapper reads its closure).  A function shares a cell of
    the frame only when its code is nested in the frame's, naming the cell alike."""
    run_both(cell_written_then_decorated_call, lambda: (torch.ones(2), 3), capsys)
    assert counts(cell_written_then_decorated_call, torch.ones(2), 3)[2] == 0


def closure_of_the_frame_called_after_a_write(x):
    k = 1

    def g():
        return x * k
    print("cells")
    k = 2                          # g, handed over at the break, holds this very cell
    return g()


def test_a_closure_holding_the_frames_cell_sees_the_write(capsys):
    run_both(closure_of_the_frame_called_after_a_write, inputs(3), capsys)


def argument_cells(x, k):
    f = lambda t: t * k + x        # noqa: E731  (x and k are arguments and cells)
    y = f(x)
    print("cells")
    return f(y), k


def test_cells_that_are_arguments(capsys):
    run_both(argument_cells, lambda: (torch.ones(2), 3), capsys)
    assert counts(argument_cells, torch.ones(2), 3) == (2, 1, 0)


def empty_cell_read_after_break(x):
    def g():
        return v
    y = x + 1
    print("cells")
    if y.sum() > 100:
        v = y
    return v * 2


def test_an_empty_cell_that_may_be_read_after_the_break_is_refused(capsys):
    opt = minidynamo.optimize(CountingBackend())(empty_cell_read_after_break)
    for _ in range(2):            # eager's UnboundLocalError, not the free variable's NameError
        with pytest.raises(UnboundLocalError):
            opt(torch.ones(2))
    reasons = minidynamo.counters.snapshot()["fallback_reasons"]
    assert len(reasons) == 1 and "empty at the graph break" in reasons[0]


def empty_cell_written_after_break(x):
    def g():
        return v * 3
    y = x + 1
    print("cells")
    v = y
    return g()


def test_an_empty_cell_written_after_the_break_is_handed_over(capsys):
    run_both(empty_cell_written_after_break, inputs(2), capsys)
    graphs, breaks, _ = counts(empty_cell_written_after_break, *inputs(2)())
    assert graphs >= 1 and breaks >= 1


def empty_cell_in_a_try_body(x, flag):
    if flag:                       # (check_model_inputs' ``supported_attn``: only set on one path)
        names = ["a", "b"]
        assert all(n in names for n in "ab")        # a generator reads it: a cell
    y = x + 1
    try:
        print("inside try")        # the break: an exception here goes to the handler below
    except TypeError:
        y = y - 1
    return y * 2


def test_an_empty_cell_in_a_try_body_whose_handler_never_reads_it_is_handed_over(capsys):
    run_both(empty_cell_in_a_try_body, lambda: (torch.ones(2), False), capsys)
    graphs, breaks, _ = counts(empty_cell_in_a_try_body, torch.ones(2), False)
    assert graphs >= 1 and breaks >= 1
    assert not minidynamo.counters.snapshot()["fallback_reasons"]


def empty_cell_read_by_a_handler(x, flag):
    if flag:
        names = ["a"]
        assert all(n in names for n in "a")
    y = x + 1
    try:
        print(y.shape, end="")    # the break
        raise KeyError("a")
    except KeyError:
        return names              # eager: UnboundLocalError when flag is False


def test_an_empty_cell_a_handler_reads_is_refused(capsys):
    opt = minidynamo.optimize(CountingBackend())(empty_cell_read_by_a_handler)
    for _ in range(2):
        with pytest.raises(UnboundLocalError):
            opt(torch.ones(2), False)
    reasons = minidynamo.counters.snapshot()["fallback_reasons"]
    assert any("empty at the graph break" in r for r in reasons)


@minidynamo.disable
def _opaque():
    pass


def loop_over_a_held_iterator(x, make):
    it = make()
    seen = []
    for v in it:
        seen.append(v)
        _opaque()                  # a break in the body: the loop's iterator is also the local `it`
        if v == 1:
            next(it, None)         # the body advances the same iterator
    return x + len(seen), seen, list(it)


def loop_over_an_iterator_inside_a_list(x, make):
    holder = [make()]
    seen = []
    for v in holder[0]:
        _opaque()
        seen.append((v, next(holder[0], None)))
    return x * 2, seen


ITERATOR_MAKERS = {"list": lambda: iter([1, 2, 3, 4, 5]), "tuple": lambda: iter((1, 2, 3, 4)),
                   "range": lambda: iter(range(1, 5)), "reversed": lambda: reversed([4, 3, 2, 1]),
                   "enumerate": lambda: enumerate([1, 2, 3]), "zip": lambda: zip([1, 2, 3], [4, 5, 6])}


def loop_over_a_wrapper_of_a_held_iterator(x, make):
    it = make()
    seen = []
    for i, v in enumerate(it):       # the loop walks enumerate(it); the program holds it
        _opaque()
        seen.append((i, v))
        if len(seen) == 2:
            break
    return x - 1, seen, list(it)


@pytest.mark.parametrize("fn", [loop_over_a_held_iterator, loop_over_an_iterator_inside_a_list,
                                loop_over_a_wrapper_of_a_held_iterator])
@pytest.mark.parametrize("kind", list(ITERATOR_MAKERS))
def test_a_loop_over_an_iterator_the_program_holds_advances_that_iterator(fn, kind):
    """Before: after the break the loop walked a copy (rebuilt for the resume function, then
    walked by its trace) while ``it`` stayed behind: ``list(it)`` gave the items already seen."""
    make = ITERATOR_MAKERS[kind]
    opt = minidynamo.optimize(CountingBackend())(fn)
    for _ in range(2):
        expected, actual = fn(torch.ones(2), make), opt(torch.ones(2), make)
        assert repr(actual[1:]) == repr(expected[1:])
        torch.testing.assert_close(actual[0], expected[0])


def iterator_past_its_lists_end(x, items):
    it = iter(items)
    next(it)
    items.clear()                 # it now stands past the end
    _opaque()
    items.extend([7, 8, 9])
    return x + 1, list(it)        # eager: [8, 9] (it kept its index)


def reversed_past_its_lists_end(x, items):
    it = reversed(items)
    items.clear()
    _opaque()
    items.extend([7, 8, 9, 10])
    return x + 1, list(it)        # eager: [9, 8, 7]


def loop_over_a_list_cleared_in_the_body(x, items):
    seen = []
    for v in items:
        if v == 1:
            items.clear()
        _opaque()                 # the loop's iterator stands past the end here
        if v == 1:
            items.extend([7, 8, 9])
        seen.append(v)
    return x + len(seen), seen    # eager: [1, 8, 9]


@pytest.mark.parametrize("fn", [iterator_past_its_lists_end, reversed_past_its_lists_end,
                                loop_over_a_list_cleared_in_the_body])
def test_a_list_iterator_past_its_lists_end_keeps_its_index(fn):
    """Probe L: made again at the break, the iterator's index was clamped to the list's length
    (``__setstate__``), so items put back later were seen from the wrong place."""
    opt = minidynamo.optimize(CountingBackend())(fn)
    for _ in range(2):
        expected, actual = fn(torch.ones(2), [1, 2, 3]), opt(torch.ones(2), [1, 2, 3])
        assert actual[1] == expected[1]
        torch.testing.assert_close(actual[0], expected[0])


def make_closure_with_cells():
    base = torch.full((2,), 3.0)

    def f(x):                      # a closure (free variable base) with a cell of its own (s)
        s = x * base
        g = lambda t: t + s + base      # noqa: E731  (holds the frame's cell and its free variable)
        if s.sum() > 0:            # a jump: each branch's resume function gets the cells
            r = g(x) * 2
        else:
            r = g(x) - 1
        return r, g(s), g
    return f


def test_a_closure_over_the_frames_cells_and_free_variables_crosses_a_jump_break():
    f = make_closure_with_cells()
    opt = minidynamo.optimize(CountingBackend())(f)
    for sign in (1, -1, 1, -1):
        expected, actual = f(torch.ones(2) * sign), opt(torch.ones(2) * sign)
        torch.testing.assert_close(actual[:2], expected[:2])
        cells = dict(zip(actual[2].__code__.co_freevars, actual[2].__closure__))
        assert cells["base"] is f.__closure__[0]                   # the frame's own cell of base
        assert cells["s"] is not dict(zip(expected[2].__code__.co_freevars, expected[2].__closure__))["s"]
        torch.testing.assert_close(actual[2](torch.ones(2)), expected[2](torch.ones(2)))
    graphs, breaks, fallbacks = counts(f, torch.ones(2))
    assert breaks == 1 and fallbacks == 0


def test_free_variables_reach_the_resume_function(capsys):
    scale = torch.full((2,), 3.0)

    def f(x):
        y = x * scale
        print("closure")
        return y + scale

    backend = run_both(f, inputs(2), capsys)
    assert backend.compile_count == 2


# -- recursion and re-entrancy -------------------------------------------------------------------
def recursive(x, n):
    if n == 0:
        return x
    print("depth", n)
    return recursive(x * 2, n - 1) + 1


def test_recursion_through_a_break(capsys):
    run_both(lambda x: recursive(x, 3), inputs(2), capsys)


# -- jumps that keep their value, f-strings ------------------------------------------------------
def or_on_tensor(x):
    y = x.sum() > 100 or x.mean() > -100
    return x + 1 if y else x - 1


def f_string_of_a_tensor(x):
    y = x.sum()
    label = f"total={y:.3f}"
    return x * len(label), label


def test_jump_if_or_pop_and_format_value_break(capsys):
    run_both(or_on_tensor, inputs(3), capsys)
    backend = CountingBackend()
    opt = minidynamo.optimize(backend)(f_string_of_a_tensor)
    x = torch.arange(3.0)
    out, label = opt(x)
    assert label == f_string_of_a_tensor(x)[1]
    torch.testing.assert_close(out, f_string_of_a_tensor(x)[0])
    assert minidynamo.counters["graph_breaks"] >= 2


# -- nopython, logs ------------------------------------------------------------------------------
def test_nopython_still_raises_at_the_first_break():
    opt = minidynamo.optimize("eager", nopython=True)(print_between)
    with pytest.raises(minidynamo.Unsupported, match="print"):
        opt(torch.ones(2))


def test_logs_show_the_break_and_the_generated_code(caplog):
    with caplog.at_level(logging.DEBUG, logger="minidynamo.output_code"), \
            caplog.at_level(logging.DEBUG, logger="minidynamo.graph_breaks"):
        minidynamo.optimize("eager")(print_between)(torch.ones(2))
    text = caplog.text
    assert "graph break in print_between" in text
    assert "def break_print_between(___func, a0):" in text and "make_function(resume_0" in text
    assert "return hand_over(___resume, ___box)" in text
    assert "# resume function: def print_between__resume_at_" in text and "RETURN_VALUE" in text


# -- issue 10 item 3: frames with no tensor operations, frames that fell back ---------------------
def python_only(a, b):
    return a * b + 1


def test_a_graph_without_operations_is_not_given_to_the_backend():
    backend = CountingBackend()
    opt = minidynamo.optimize(backend)(python_only)
    assert opt(3, 4) == 13 and opt(3, 4) == 13
    assert backend.compile_count == 0
    assert minidynamo.counters["compiles"] == 1 and minidynamo.counters["cache_hits"] == 1
    assert opt(5, 4) == 21                      # numbers only counted with: computed per call
    assert minidynamo.counters["compiles"] == 1
    assert opt(5.0, 4) == 21.0                  # their types are guarded
    assert minidynamo.counters["compiles"] == 2


def break_in_except(x):
    try:
        raise KeyError("k")
    except KeyError:
        print("in handler")            # the handler of the program's own raise cannot break (its
        y = x                          # exception is the trace's): the frame runs eagerly
    return y


def test_a_frame_that_fell_back_is_never_traced_again(capsys):
    opt = minidynamo.optimize("eager")(break_in_except)
    for _ in range(5):
        opt(torch.ones(2))
    assert minidynamo.counters["fallbacks"] == 1 and minidynamo.counters["compiles"] == 0
    entries = minidynamo.cache_entries(break_in_except)
    assert len(entries) == 1 and entries[0].guard_fn is None and entries[0].compiled_fn is None   # always matches: eager


@minidynamo.disable
def record_autocast_and_grad(t):
    seen_modes.append((torch.is_autocast_enabled("cpu"), torch.is_grad_enabled()))


def break_in_autocast_off_and_set_grad(x, w):
    with torch.autocast("cpu", enabled=False):
        with torch.set_grad_enabled(False):
            y = x * w
            record_autocast_and_grad(y)
            y = y + 1
        z = y * w
    return z


def test_break_inside_autocast_off_and_set_grad_enabled():
    x, w = torch.ones(3), torch.ones(3, requires_grad=True)
    seen_modes.clear()
    expected = break_in_autocast_off_and_set_grad(x, w)
    opt = minidynamo.optimize("eager")(break_in_autocast_off_and_set_grad)
    for _ in range(2):
        got = opt(x, w)
        torch.testing.assert_close(got, expected)
        assert got.requires_grad == expected.requires_grad and torch.is_grad_enabled()
    with torch.autocast("cpu", dtype=torch.bfloat16):         # the caller's autocast is switched off inside
        opt(x, w)
        break_in_autocast_off_and_set_grad(x, w)
        assert torch.is_autocast_enabled("cpu")
    assert seen_modes[:3] == [(False, False)] * 3 and seen_modes[3:] == [(False, False)] * 2
    assert minidynamo.counters["graph_breaks"] >= 1 and minidynamo.counters["fallbacks"] <= 1


# -- values rebuilt at the break: a tensor method before its call, a function made by the frame ---
def item_then_scale(x):
    y = x.abs() + 1
    s = y.sum().item()               # x.item is rebuilt from the graph's y.sum(), called eagerly
    return y * s


def nested_helper_breaks(x):
    def pick(t, sign=1.0):
        return t * sign if t.mean() > 0 else -t
    return pick(x + 1, sign=2.0) * 2


def test_tensor_methods_and_nested_functions_are_rebuilt(capsys):
    backend = run_both(item_then_scale, inputs(3), capsys)
    assert backend.compile_count == 2
    run_both(nested_helper_breaks, inputs(3), capsys)
    report = minidynamo.explain(nested_helper_breaks)(*inputs(3)())
    assert report.fallback_count == 0 and report.graph_break_count == 2   # the call site, then pick's jump


# -- zero-argument super() after a break: CPython reads the frame's first local ----------------------
class Scaled:
    def __init__(self, x):
        self.x = x * 2


class ScaledAfterPrint(Scaled):
    def __init__(self, x):
        y = x + 1
        print("init")                # the break: the rest calls super() without arguments
        super().__init__(y)


def build_through_super(x):
    return ScaledAfterPrint(x).x + 1


def test_zero_argument_super_after_a_break_finds_the_first_argument(capsys):
    """The resume function takes ``self`` as its first parameter, where super() looks."""
    run_both(build_through_super, inputs(3), capsys)
    assert counts(build_through_super, torch.ones(3)) == (3, 2, 0)


def test_a_boolean_mask_subscript_breaks_the_graph_instead_of_the_frame():
    """``y[y > 0]`` has a shape only the data decides (no meta kernel for ``nonzero``): the
    subscript runs eagerly at a graph break (``BINARY_SUBSCR``), the rest is traced again;
    before, the whole frame ran eagerly (real-model probe F6)."""
    def f(x):
        y = x * 2
        z = y[y > 0]
        return z.sum() + 1, z

    compiled = minidynamo.optimize("eager")(f)
    for x in (torch.tensor([1.0, -2.0, 3.0]), torch.tensor([-1.0, 2.0, -3.0, 4.0])):
        got, want = compiled(x), f(x)
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    snapshot = minidynamo.counters.snapshot()
    assert not snapshot.get("fallback_reasons")
    assert any("BINARY_SUBSCR" in r for r in snapshot.get("break_reasons", []))


def test_a_module_imported_in_the_frame_is_handed_over_at_a_break():
    def f(x):
        import torch.nn.functional as F
        y = F.relu(x)
        print("", end="")              # a graph break: F is a live local
        return F.gelu(y)

    opt = minidynamo.optimize("eager")(f)
    x = torch.randn(4)
    for _ in range(2):
        torch.testing.assert_close(opt(x), f(x))
    assert not minidynamo.counters["fallback_reasons"]
    assert minidynamo.counters["compiles"] == 2          # the frame's graph and the resume function's


# -- a constant's method on the stack at a break: bound again to the constant ----------------------
def format_then_break(x):
    label = "{a}-{b}".format_map({"a": int(x.shape[0]), "b": x.sum()})   # formatting a tensor breaks
    return x * len(label)


def test_a_constants_method_waiting_for_its_call_is_handed_over():
    report = minidynamo.explain(format_then_break)(torch.ones(3))
    assert report.fallback_count == 0 and report.graph_break_count == 1
    torch.testing.assert_close(report.output, format_then_break(torch.ones(3)))


# -- a tensor's method waiting for its call at a break: traced again in the resume function --------
STATE = torch.zeros(3, 4)


def fill_after_item(x):
    STATE.index_fill_(1, torch.tensor([1]), x.mean().item())   # .item() breaks before the call
    return x + STATE.sum()


def test_a_tensor_method_waiting_for_its_call_is_traced_after_the_break():
    expected_state = STATE.clone().index_fill_(1, torch.tensor([1]), 1.0)
    report = minidynamo.explain(fill_after_item)(torch.ones(2))
    assert report.fallback_count == 0 and report.graph_break_count == 1, report.reasons
    assert torch.equal(STATE, expected_state)
    torch.testing.assert_close(report.output, torch.ones(2) + expected_state.sum())


def test_a_break_inside_a_torch_nn_forward_leaves_the_forward_traced():
    """BatchNorm with ``momentum=None`` breaks at ``float(num_batches_tracked)``: the caller breaks
    at the module's call, and the module's ``forward`` (torch.nn's own code, which the hook
    otherwise skips) is traced on its own, as torch.compile does, so its batch norm is in a
    graph rather than run uncaptured."""
    minidynamo.reset()
    torch.manual_seed(0)
    bn = torch.nn.BatchNorm1d(3, momentum=None)
    twin = torch.nn.BatchNorm1d(3, momentum=None)

    def f(x):
        return bn(x * 2) + 1

    backend = CountingBackend()
    opt = minidynamo.optimize(backend)(f)
    for _ in range(2):
        x = torch.randn(4, 3)
        assert torch.allclose(opt(x), twin(x * 2) + 1)
    assert torch.equal(bn.running_var, twin.running_var) and torch.equal(bn.num_batches_tracked, twin.num_batches_tracked)
    graphs = "\n".join(gm.code for gm in backend.graphs)
    assert "batch_norm" in graphs
    minidynamo.reset()


class Noisy:
    """A container and an operand whose dunders print: the trace breaks at the instruction."""

    def __init__(self):
        self.items = {}

    def __setitem__(self, key, value):
        print("store", key)
        self.items[key] = value

    def __radd__(self, other):
        print("radd")
        return other * 10


def _store_into(x, box):
    y = x * 3
    for i in range(2):
        box[i] = y + i             # STORE_SUBSCR breaks (inside the loop: each iteration)
    return y.cos()


def _add_noisy(x, log):
    y = x.sin()
    log.append("before")
    z = y + Noisy()                # BINARY_OP breaks
    return z * 2


def _in_place_refused(x, log):
    y = x * 2
    log.append("before")
    x += y                         # eager refuses (a leaf that requires grad): BINARY_OP breaks
    return x


@pytest.mark.parametrize("case", ["store", "binary", "in_place"])
def test_subscript_stores_and_binary_operators_break_rather_than_fall_back(case, capsys):
    """STORE_SUBSCR and BINARY_OP are graph-break instructions: the graph before them runs, the
    instruction runs eagerly (printing, or raising as eager does, after the effects before
    it), and the rest is resumed, instead of the whole frame falling back to eager."""
    minidynamo.reset()
    fn, make = {"store": (_store_into, lambda: (torch.ones(3), Noisy())),
                "binary": (_add_noisy, lambda: (torch.ones(3), [])),
                "in_place": (_in_place_refused, lambda: (torch.ones(3, requires_grad=True), []))}[case]

    def run(f):
        x, other = make()
        try:
            result = ("ok", f(x, other).detach())
        except RuntimeError as error:
            result = ("raise", str(error).split(".")[0])
        return result, other.items if isinstance(other, Noisy) else other, capsys.readouterr().out

    want = run(fn)
    opt = minidynamo.optimize(CountingBackend())(fn)
    for _ in range(2):
        got = run(opt)
        assert got[0][0] == want[0][0] and got[2] == want[2]
        if want[0][0] == "ok":
            assert torch.allclose(got[0][1], want[0][1])
        else:
            assert got[0][1] == want[0][1] and got[1] == want[1] == ["before"]
        if case == "store":
            assert list(got[1]) == [0, 1] and all(torch.equal(got[1][k], want[1][k]) for k in (0, 1))
    counters = minidynamo.counters.snapshot()
    assert not counters["fallback_reasons"], counters["fallback_reasons"]
    opcode = "STORE_SUBSCR" if case == "store" else "BINARY_OP"
    assert any(f"{opcode} at" in reason for reason in counters["break_reasons"]), counters["break_reasons"]
    minidynamo.reset()


class Loud:
    """An object whose attribute store, comparisons and ``in`` print."""

    def __init__(self):
        object.__setattr__(self, "stored", None)

    def __setattr__(self, name, value):
        print("set", name)
        object.__setattr__(self, name, value)

    def __eq__(self, other):
        print("eq")
        return True

    def __lt__(self, other):
        print("lt")
        return False

    def __contains__(self, item):
        print("contains", item)
        return item == 5

    __hash__ = object.__hash__


def _attribute_compare_contains(x, loud):
    y = x * 2
    loud.stored = y                # STORE_ATTR breaks
    same, less = loud == 3, loud < 3          # COMPARE_OP breaks (twice)
    inside, outside = 5 in loud, 6 not in loud  # CONTAINS_OP breaks (twice)
    return y.sin() + same + 2 * less + 4 * inside + 8 * outside


def test_attribute_stores_comparisons_and_in_break_rather_than_fall_back(capsys):
    minidynamo.reset()
    want_loud = Loud()
    want = _attribute_compare_contains(torch.ones(3), want_loud)
    printed = capsys.readouterr().out
    opt = minidynamo.optimize(CountingBackend())(_attribute_compare_contains)
    for _ in range(2):
        loud = Loud()
        assert torch.allclose(opt(torch.ones(3), loud), want)
        assert torch.equal(loud.stored, want_loud.stored) and capsys.readouterr().out == printed
    counters = minidynamo.counters.snapshot()
    assert not counters["fallback_reasons"], counters["fallback_reasons"]
    for opcode in ("STORE_ATTR", "COMPARE_OP", "CONTAINS_OP"):
        assert any(f"{opcode} at" in reason for reason in counters["break_reasons"]), opcode
    minidynamo.reset()


class Chatty:
    """``del`` of an item and of an attribute, and ``-obj``, each printing."""

    def __init__(self):
        self.spare = 1

    def __delitem__(self, key):
        print("delitem", key)

    def __delattr__(self, name):
        print("delattr", name)
        object.__delattr__(self, name)

    def __neg__(self):
        print("neg")
        return 7


def _deletes_negates(x, chatty):
    y = x * 3
    del chatty[1]                  # DELETE_SUBSCR breaks
    del chatty.spare               # DELETE_ATTR
    z = -chatty                    # UNARY_NEGATIVE
    flag = not (y.sum() > 0)       # UNARY_NOT of a tensor: its data
    return y + z + int(flag)


def test_deletes_and_unary_operators_break_rather_than_fall_back(capsys):
    minidynamo.reset()
    want = _deletes_negates(torch.ones(3), Chatty())
    printed = capsys.readouterr().out
    opt = minidynamo.optimize(CountingBackend())(_deletes_negates)
    for _ in range(2):
        chatty = Chatty()
        assert torch.allclose(opt(torch.ones(3), chatty), want)
        assert not hasattr(chatty, "spare") and capsys.readouterr().out == printed
    counters = minidynamo.counters.snapshot()
    assert not counters["fallback_reasons"], counters["fallback_reasons"]
    for opcode in ("DELETE_SUBSCR", "DELETE_ATTR", "UNARY_NEGATIVE", "UNARY_NOT"):
        assert any(f"{opcode} at" in reason for reason in counters["break_reasons"]), opcode
    minidynamo.reset()


EQUAL_TEXT = """
SCALE = {k}

def f(x):
    y = x * SCALE
    print("", end="")
    return y + SCALE
"""


def test_equal_functions_keep_their_resume_functions_apart(capsys):
    """The same text run ten times (a notebook cell, a class factory) makes ten code objects that
    compare equal.  Each gets resume functions of its own: shared, one optimize context's
    entries for all ten piled up on one resume code, recompiling per function until the cache
    limit made the last ones run eagerly."""
    compiled = minidynamo.optimize(CountingBackend())
    functions = []
    for k in range(10):
        namespace = {}
        exec(compile(EQUAL_TEXT.format(k=k), "<cell>", "exec"), namespace)
        functions.append(compiled(namespace["f"]))
    minidynamo.counters.reset()
    for k, fn in enumerate(functions):
        torch.testing.assert_close(fn(torch.ones(2)), torch.full((2,), 2.0 * k))
    assert minidynamo.counters["compiles"] == 20 and not minidynamo.counters["fallback_reasons"]



# -- a property or __getattr__ whose code breaks: the frame breaks at the attribute read ----------
class WithLossProperty(torch.nn.Module):
    """transformers' ``loss_function`` property calls ``logger.warning_once`` (an lru_cache, a
    break); here a print."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc = torch.nn.Linear(4, 4)

    @property
    def loss_function(self):
        print("using the default loss")
        return torch.nn.functional.mse_loss

    @property
    def scale(self):
        print("scale read")
        return 2.0

    def __getattr__(self, name):
        if name == "offset":
            print("offset made")
            return torch.ones(4)
        return super().__getattr__(name)

    def forward(self, x):
        y = self.fc(x).relu()
        loss = self.loss_function(y, x)             # LOAD_METHOD: the getter runs eagerly
        return loss, y * self.scale + self.offset   # LOAD_ATTR: a property, a __getattr__


def test_an_attribute_read_whose_code_breaks_breaks_the_frame_there(capsys):
    model = WithLossProperty()
    run_both(model, inputs(2, 4), capsys)
    assert not minidynamo.counters["fallback_reasons"]
    reasons = minidynamo.counters["break_reasons"]
    assert any("LOAD_METHOD at" in r and "print" in r for r in reasons), reasons
    assert any("LOAD_ATTR at" in r and "print" in r for r in reasons), reasons

"""``with obj:`` over a user's context manager: ``__enter__`` and ``__exit__`` are inlined, also
when the trace raises an exception inside the block (``__exit__`` gets it and may swallow it: the
frame goes on after the block).  An ``__exit__`` that reads the traceback, which the trace does
not have, makes a graph break whose eager instruction raises the exception for real inside the
block, where the real ``__exit__`` sees it.  Each case is differential against eager, comparing the values and the log of what the
managers saw."""

import contextlib

import pytest
import torch

import minidynamo

LOG = []


@pytest.fixture(autouse=True)
def _fresh():
    minidynamo.reset()
    LOG.clear()
    yield
    minidynamo.reset()


class Logged:
    def __init__(self, tag, suppress=False):
        self.tag = tag
        self.suppress = suppress

    def __enter__(self):
        LOG.append(("enter", self.tag))
        return self

    def __exit__(self, kind, value, traceback):
        LOG.append(("exit", self.tag, kind.__name__ if kind else None))
        return self.suppress


@contextlib.contextmanager
def scoped(tag):
    LOG.append(("open", tag))
    try:
        yield tag * 2
    finally:
        LOG.append(("close", tag))


def outcome(fn, *args):
    """(result or exception class, what the managers logged) of one call."""
    LOG.clear()
    try:
        result = fn(*args)
    except Exception as error:
        result = type(error)
    if isinstance(result, torch.Tensor):
        result = result.tolist()
    elif isinstance(result, tuple):
        result = tuple(r.tolist() if isinstance(r, torch.Tensor) else r for r in result)
    return result, list(LOG)


def assert_matches_eager(fn, calls, backend="eager"):
    opt = minidynamo.optimize(backend)(fn)
    for args in calls:
        assert outcome(opt, *args) == outcome(fn, *args)


X = torch.arange(6.0).reshape(2, 3)


def nested(x):
    with Logged("outer") as outer:
        y = x * 2
        with Logged("inner"):
            y = y + 1
    return y, outer.tag


def generator_based(x):
    with scoped(3) as k:
        y = x * k
    return y


@pytest.mark.parametrize("fn", [nested, generator_based])
@pytest.mark.parametrize("backend", ["eager", "torchxla_trace_once"])
def test_a_block_is_one_graph_entered_and_left_once_per_call(fn, backend):
    assert_matches_eager(fn, [(X,), (X + 1,), (X,)], backend)
    assert minidynamo.counters["compiles"] == 1
    assert minidynamo.counters["fallbacks"] == 0


def suppressed_at_trace_time(x):
    with Logged("s", suppress=True):
        x = x + {}["missing"]            # KeyError: __exit__ sees it and swallows it
    return x * 3


def frame_compiled(fn) -> bool:
    """The frame itself compiled, with a graph break (its handler's resume function may run eagerly)."""
    return minidynamo.counters["graph_breaks"] >= 1 and not any(
        reason.startswith(f"{fn.__name__} (") for reason in minidynamo.counters["fallback_reasons"])


class ReadsTraceback(Logged):
    def __exit__(self, kind, value, traceback):
        LOG.append(("exit", self.tag, kind.__name__ if kind else None, traceback.tb_lineno > 0))
        return True


def reads_the_traceback(x):
    y = x + 1
    with ReadsTraceback("t"):
        y = y * {}["missing"]
    return y * 3


def swallowed_by_contextlib(x):
    with contextlib.suppress(IndexError, KeyError):
        x = x + [1][3]
    with contextlib.suppress(KeyError):
        x = x - 1                        # no exception: __exit__(None, None, None)
    return x * 2


def test_an_exception_the_trace_raises_reaches_an_inlined_exit():
    """The KeyError (IndexError) is raised at trace time inside the block: the block's
    ``__exit__`` is inlined with it and swallows it, and the frame goes on after the block, all
    in one graph."""
    for fn in (suppressed_at_trace_time, swallowed_by_contextlib):
        minidynamo.reset()
        assert_matches_eager(fn, [(X,), (X + 1,)])
        assert minidynamo.counters["graph_breaks"] == 0 and minidynamo.counters["fallbacks"] == 0
        assert minidynamo.counters["compiles"] == 1


class Renamed(Logged):
    def leave_quietly(self, kind, value, traceback):
        LOG.append(("quiet", self.tag, kind.__name__ if kind else None))
        return True


Renamed.__exit__ = Renamed.leave_quietly          # the exit is any function the class holds there


def suppressed_by_a_renamed_exit(x):
    with Renamed("q"):
        x = x + {}["missing"]
    return x * 3


def test_an_exit_under_another_name_is_inlined_too():
    assert_matches_eager(suppressed_by_a_renamed_exit, [(X,), (X + 1,)])
    assert minidynamo.counters["graph_breaks"] == 0 and minidynamo.counters["fallbacks"] == 0
    assert minidynamo.counters["compiles"] == 1


def test_an_exit_that_reads_the_traceback_gets_the_real_one_at_a_graph_break():
    """The trace has no traceback to give: the break goes to the raising instruction, whose entry
    raises the exception for real inside the block, and the real ``__exit__`` reads it."""
    assert_matches_eager(reads_the_traceback, [(X,), (X,)])
    assert frame_compiled(reads_the_traceback)
    assert any("TracebackVariable" in r for r in minidynamo.counters["break_reasons"])


def suppressed_at_run_time(x, i):
    y = x * 2
    with Logged("r", suppress=True):
        y = y + x[i].sum()               # an index out of range raises only when the graph runs
    LOG.append("after")
    return y


def propagated_at_run_time(x, i):
    with Logged("p"):
        y = x[i] * 2
    return y


@pytest.mark.parametrize("fn", [suppressed_at_run_time, propagated_at_run_time])
def test_an_error_the_graph_raises_reaches_exit_through_a_rerun(fn):
    good, bad = torch.tensor([0, 1]), torch.tensor([0, 9])
    assert_matches_eager(fn, [(X, good), (X, bad), (X, good)])
    assert minidynamo.counters["compiles"] == 1


def breaks_inside(x):
    with Logged("b"):
        y = x * 2
        print("inside", bool(y.sum() > 100))
        y = y + 1
    return y


def test_a_graph_break_inside_the_block():
    assert_matches_eager(breaks_inside, [(X,), (X,)])
    assert minidynamo.counters["fallbacks"] == 0 and minidynamo.counters["graph_breaks"] >= 1


class Swappable:
    def __enter__(self):
        LOG.append("enter")

    def __exit__(self, *exc):
        LOG.append("old exit")


SWAPPABLE = Swappable()


def uses_swappable(x):
    with SWAPPABLE:
        y = x + 1
    return y


def test_a_method_replaced_on_the_class_is_seen():
    opt = minidynamo.optimize("eager")(uses_swappable)
    assert outcome(opt, X)[1] == ["enter", "old exit"]
    original = Swappable.__exit__
    try:
        Swappable.__exit__ = lambda self, *exc: LOG.append("new exit")
        assert outcome(opt, X)[1] == ["enter", "new exit"]
    finally:
        Swappable.__exit__ = original
    assert outcome(opt, X)[1] == ["enter", "old exit"]


class EnterOnly:
    def __enter__(self):
        return 1


def no_exit(x):
    with EnterOnly():
        y = x + 1
    return y


def test_a_manager_without_exit_raises_as_in_eager():
    assert_matches_eager(no_exit, [(X,)])
    assert outcome(minidynamo.optimize("eager")(no_exit), X)[0] is TypeError


def next_or_default(x, items):
    it = iter(items)
    total = x
    while True:
        try:
            total = total + next(it)
        except StopIteration:
            break
    return total


def test_stop_iteration_of_next_is_caught_by_the_program():
    assert_matches_eager(next_or_default, [(X, [1, 2]), (X, [1, 2]), (X, [])])
    assert minidynamo.counters["fallbacks"] == 0


class Documented:
    pass


def stores_a_dunder(x):
    note = Documented()
    note.__doc__ = "made in the frame"
    return x + len(note.__doc__)


def test_a_special_name_stored_on_a_new_object_is_a_plain_attribute():
    assert_matches_eager(stores_a_dunder, [(X,), (X,)])
    assert minidynamo.counters["fallbacks"] == 0


class Shadowed(Logged):
    pass


SHADOWED = Shadowed("class")
SHADOWED.__enter__ = lambda: LOG.append("instance attribute")    # `with` never looks here


def uses_shadowed(x):
    with SHADOWED:
        y = x + 1
    return y


def test_enter_and_exit_come_from_the_class_not_the_instance():
    assert_matches_eager(uses_shadowed, [(X,), (X,)])
    assert LOG == [("enter", "class"), ("exit", "class", None)]
    assert minidynamo.counters["compiles"] == 1


# -- a manager the trace cannot enter (its __enter__ or __exit__ in C, or doing what the trace
# -- cannot): the frame breaks at the with statement, which runs eagerly; the block is traced in
# -- the resume function, with the real __exit__ on its stack -------------------------------------
class CountingAnnotation(Logged):
    """A profiler-range-like manager whose __enter__ calls what the trace cannot run."""

    def __enter__(self):
        LOG.append(("enter", self.tag, len(repr(object()))))    # object() is refused by the trace
        return self


def annotated(x):
    y = x * 2
    with CountingAnnotation("range"):
        z = y + 1
    return z * 3


def under_a_device(x):
    with torch.device("meta"):            # C methods; factories inside make meta tensors
        made = torch.ones(2)
    with torch.device("cpu"):
        y = torch.zeros(2) + x[0, :2]
    return y * 2, made.device.type


@pytest.mark.parametrize("fn", [annotated, under_a_device])   # (record_function: test_no_effect_blocks.py)
def test_a_manager_the_trace_cannot_enter_breaks_at_the_with(fn):
    assert_matches_eager(fn, [(X,), (X + 1,), (X,)])
    assert minidynamo.counters["graph_breaks"] >= 1
    assert not any(reason.startswith(f"{fn.__name__} (") for reason in minidynamo.counters["fallback_reasons"])


def under_inference_mode(x):
    w = x + 1
    with torch.inference_mode():
        y = w * 2
    return y, y.is_inference(), y.requires_grad


def not_a_manager(x):
    with 5:
        y = x + 1
    return y


@pytest.mark.parametrize("fn", [under_inference_mode, not_a_manager])
def test_the_eager_with_statement_enters_exactly_as_cpython(fn):
    leaf = X.clone().requires_grad_()
    assert_matches_eager(fn, [(leaf,), (leaf,)])
    if fn is not_a_manager:
        assert outcome(minidynamo.optimize("eager")(fn), X)[0] is TypeError


def nested_in_a_user_block(x):
    with Logged("outer"):
        with CountingAnnotation("inner"):
            y = x + 1
    return y


def test_a_break_at_a_with_inside_a_users_block():
    assert_matches_eager(nested_in_a_user_block, [(X,), (X,)])
    assert minidynamo.counters["fallbacks"] == 0 and minidynamo.counters["graph_breaks"] >= 1


# -- a graph break inside user blocks: the eager instruction's exception goes to their __exit__ --------
@minidynamo.disable
def fails_when(n):
    """A callee the frame breaks at, which raises on some calls."""
    LOG.append(("call", n))
    if n > 1:
        raise ValueError(n)
    return n


def swallowed_by_the_inner_block(x, n):
    with Logged("outer"):
        y = x * 2
        with Logged("inner", suppress=True):
            y = y + fails_when(n)            # raises on n > 1: inner swallows it
            y = y * 10                       # skipped then
        y = y - 1
    return y


def swallowed_by_the_outer_block(x, n):
    with Logged("outer", suppress=True):
        y = x * 2
        with Logged("inner"):
            y = y + fails_when(n)
        y = y - 1                            # skipped when the outer block swallows
    return y * 3


def passed_on_by_every_block(x, n):
    with Logged("outer"):
        with Logged("inner"):
            y = x + fails_when(n)
    return y


def inside_a_grad_block(x, n):
    with torch.no_grad():
        with Logged("inner", suppress=True):
            y = x * fails_when(n)
        z = x * 2                            # still under no_grad after the swallowed error
    return z, z.requires_grad, torch.is_grad_enabled()


def a_grad_block_inside(x, n):
    with Logged("outer", suppress=True):
        with torch.no_grad():
            y = x * fails_when(n)
    return x + 1, torch.is_grad_enabled()


@pytest.mark.parametrize("fn", [swallowed_by_the_inner_block, swallowed_by_the_outer_block,
                                passed_on_by_every_block, inside_a_grad_block])
def test_the_eager_instructions_exception_reaches_the_exits_of_the_blocks_around_it(fn):
    leaf = X.clone().requires_grad_()
    assert_matches_eager(fn, [(leaf, 1), (leaf, 2), (leaf, 1), (leaf, 3)])
    assert frame_compiled(fn)


def test_a_grad_block_inside_a_users_block():
    """The exception passes the grad block's cleanup (grad mode restored) before the user's."""
    assert_matches_eager(a_grad_block_inside, [(X, 1), (X, 2), (X, 1)])
    assert frame_compiled(a_grad_block_inside)


def entered_inside_a_grad_block_then_raises(x, i):
    with torch.set_grad_enabled(True):
        with CountingAnnotation("inner"):
            y = torch.cat([x, x], dim=1)
        z = x[i]                                # out of range at run time
    return y, z


def test_a_with_the_trace_cannot_enter_inside_another_block():
    """Fuzz seed 332 i692: a break at this inner with statement, then a run-time error in the
    resume function (see tests/tracer/test_break_contexts.py for the cause)."""
    bad = torch.tensor([7])
    assert_matches_eager(entered_inside_a_grad_block_then_raises, [(X, bad), (X, bad), (X, torch.tensor([1]))])


class RawGradMode:
    """PyTorch's test_generic_context_manager: a context manager switching grad mode itself."""

    def __init__(self, mode):
        self.mode = mode

    def __enter__(self):
        self.previous = torch.is_grad_enabled()
        torch._C._set_grad_enabled(self.mode)

    def __exit__(self, *exc):
        torch._C._set_grad_enabled(self.previous)


@pytest.mark.parametrize("outer", [True, False])
@pytest.mark.parametrize("mode", [True, False])
def test_a_context_manager_calling_set_grad_enabled_itself(outer, mode):
    def f(x, w):
        y = x * w
        with RawGradMode(mode):
            z = y * w
            if torch.is_grad_enabled():
                z = z + 1
        return y + z, z.requires_grad, torch.is_grad_enabled()

    compiled = minidynamo.optimize("eager")(f)
    x, w = torch.randn(3), torch.randn(3, requires_grad=True)
    with torch.set_grad_enabled(outer):
        got, expected = compiled(x, w), f(x, w)
        assert torch.is_grad_enabled() is outer
    torch.testing.assert_close(got[0], expected[0])
    assert got[0].requires_grad == expected[0].requires_grad and got[1:] == expected[1:]
    assert minidynamo.counters["graph_breaks"] == 0 and not minidynamo.counters["fallback_reasons"]


def test_grad_mode_left_switched_by_the_program_breaks_at_the_switch():
    def f(x):
        torch._C._set_grad_enabled(False)
        return x * 2

    compiled = minidynamo.optimize("eager")(f)
    try:
        torch.testing.assert_close(compiled(torch.ones(2)), torch.full((2,), 2.0))
        assert not torch.is_grad_enabled()                  # as eager leaves it
    finally:
        torch._C._set_grad_enabled(True)
    assert any("leaves grad mode switched" in r for r in minidynamo.counters["break_reasons"])
    assert not minidynamo.counters["fallback_reasons"]


# the same switch from a ``contextlib.contextmanager`` (test_ctx_manager's customized_ctx_manager)
@contextlib.contextmanager
def raw_grad_mode(mode):
    previous = torch.is_grad_enabled()
    try:
        yield torch._C._set_grad_enabled(mode)
    finally:
        torch._C._set_grad_enabled(previous)


@pytest.mark.parametrize("manager", [RawGradMode, raw_grad_mode], ids=["class", "contextmanager"])
def test_a_graph_break_inside_a_block_that_switched_grad_mode(manager, capsys):
    def f(x, w):
        with manager(False):
            y = x * w
            print("inside")                          # the break: the switch runs eagerly instead
            z = y * w
        return y + z, z.requires_grad, torch.is_grad_enabled()

    compiled = minidynamo.optimize("eager")(f)
    x, w = torch.randn(3), torch.randn(3, requires_grad=True)
    got, expected = compiled(x, w), f(x, w)
    torch.testing.assert_close(got[0], expected[0])
    assert got[1:] == expected[1:] and torch.is_grad_enabled()
    assert capsys.readouterr().out == "inside\ninside\n"
    assert not minidynamo.counters["fallback_reasons"]


def test_a_switch_in_a_graph_with_effects_breaks_at_the_switch():
    """A graph that writes an input cannot be re-run eagerly if it raises, and would then leave
    the mode it began in, not the one the program switched: the switch runs eagerly instead."""
    def f(x, w):
        x.add_(1)                                   # an effect on the caller's tensor
        with RawGradMode(False):
            y = x * w
        return y, y.requires_grad

    compiled = minidynamo.optimize("eager")(f)
    ours, theirs, w = torch.zeros(3), torch.zeros(3), torch.randn(3, requires_grad=True)
    got, expected = compiled(ours, w), f(theirs, w)
    torch.testing.assert_close(got[0], expected[0])
    assert got[1] == expected[1] and torch.equal(ours, theirs) and torch.is_grad_enabled()
    refusals = minidynamo.counters["break_reasons"] + minidynamo.counters["fallback_reasons"]
    assert any("cannot be re-run" in r or "graph with effects" in r for r in refusals), refusals

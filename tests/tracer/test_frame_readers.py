"""Calls that read the frame they run in (``globals()``, ``locals()``, ``eval``, ``vars()``,
``dir()``, ``type(name, bases, ns)``, ``sys._getframe``, ``warnings.warn``, logging's caller
lookup).  A graph break runs its eager instruction in the break's entry function, another
frame: one that shows the frame's file, name and line and has the frame's own globals, but
other locals and another place on the stack.  So a call that reads its caller's globals, file
or line (``type(name, bases, ns)``, ``warnings.warn`` with ``stacklevel=1``) may be one; a call
that reads its locals or walks the stack must never be, nor ``globals()`` (the dict it returns
would reach the resume function as a value whose entries are also the frame's globals): the
frame runs eagerly (``NeedsItsFrame``), and a helper that makes the call runs as a real frame
of its own."""

import inspect
import logging
import sys
import warnings
from warnings import warn     # warns_by_its_global_name names it as a global

import pytest
import torch

import minidynamo

G = 0


@pytest.fixture(autouse=True)
def _fresh():
    global G
    minidynamo.reset()
    G = 0
    yield
    minidynamo.reset()


def write_a_global(x):
    globals()["G"] = 5                       # writes this module's G
    return x * G


def eval_a_local(x):
    return x * eval("x.shape[0]")


def list_locals(x):
    a = 1
    return x + a, sorted(locals())


def list_vars_and_dir(x):
    a = 2
    return x * a, sorted(vars()), sorted(dir())


def make_a_class(x):
    K = type("K", (), {"v": 2})              # __module__ comes from the calling frame's globals
    return x * K.v, K.__module__, K.__qualname__


def own_name(x):
    return x + 1, sys._getframe().f_code.co_name, inspect.currentframe().f_code.co_name


def caller_name():
    return sys._getframe(1).f_code.co_name


def ask_who_called(x):
    return x + 1, caller_name()


def read_globals_in_a_helper():
    return globals()["G"] + 1


def helper_reads_its_globals(x):
    return x * read_globals_in_a_helper()


def locals_after_a_break(x):
    a = 1
    y = x.sin()
    print("a break before it:", tuple(y.shape))
    return y, sorted(locals())                 # the resume function's locals are other names


def eval_after_a_break(x):
    a = 5
    y = x.sin()
    print("a break before it:", tuple(y.shape))
    return y * eval("a")                      # ``a`` is dead to the liveness analysis


def own_name_after_a_break(x):
    y = x.sin()
    print("a break before it:", tuple(y.shape))
    return y, sys._getframe().f_code.co_name


this_frame = sys._getframe                    # a frame reader under another name


def renamed_reader_after_a_break(x):
    y = x.sin()
    print("a break before it:", tuple(y.shape))
    return y, this_frame().f_code.co_name


PROGRAMS = [write_a_global, eval_a_local, list_locals, list_vars_and_dir, make_a_class, own_name,
            ask_who_called, helper_reads_its_globals, locals_after_a_break, eval_after_a_break,
            own_name_after_a_break, renamed_reader_after_a_break]


def same(a, b):
    if isinstance(a, torch.Tensor):
        return torch.equal(a, b)
    if isinstance(a, tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda f: f.__name__)
def test_a_frame_reader_sees_the_frame_eager_would(program):
    global G
    x = torch.ones(2)
    expected, expected_g = program(x), G
    G = 0
    got = minidynamo.optimize("eager")(program)(x)
    assert same(got, expected) and G == expected_g
    G = 0
    assert same(minidynamo.optimize("eager")(program)(x), expected)   # the cached decision too


def test_a_frame_reader_in_the_frame_runs_it_eagerly_with_the_reason():
    minidynamo.optimize("eager")(eval_a_local)(torch.ones(2))
    assert any("eval reads the frame it is called from" in reason
               for reason in minidynamo.counters["fallback_reasons"])


def warn_here(x):
    warnings.warn("here")
    return x + 1


@pytest.mark.parametrize("program", [make_a_class, warn_here], ids=lambda f: f.__name__)
def test_a_call_reading_only_the_frames_globals_is_a_graph_break(program):
    """Its break's entry runs with the frame's own globals: the frame keeps its graphs."""
    minidynamo.optimize("eager")(program)(torch.ones(2))
    assert not minidynamo.counters["fallback_reasons"] and minidynamo.counters["graph_breaks"] == 1


# Globals of the program named like what a break's entry uses: the entry never reads them.
rerun = hand_over = compiled_graph = read_inputs = "the program's own"


def break_among_helper_names(x):
    y = x.sin()
    print("a break:", tuple(y.shape), rerun, hand_over)
    return y * 2, compiled_graph, read_inputs


def test_a_programs_globals_named_like_the_entrys_helpers_change_nothing(capsys):
    expected = break_among_helper_names(torch.ones(2))
    for _ in range(2):
        got = minidynamo.optimize("eager")(break_among_helper_names)(torch.ones(2))
        assert same(got, expected)
    assert minidynamo.counters["graph_breaks"] >= 1 and not minidynamo.counters["fallback_reasons"]
    assert break_among_helper_names.__globals__["rerun"] == "the program's own"


def test_a_helper_reading_its_own_globals_still_lets_the_caller_break():
    """``globals()`` inside an inlined helper: the break at the helper's call runs the helper as
    a real frame, whose globals are the ones it reads, so the caller keeps its graphs."""
    minidynamo.optimize("eager")(helper_reads_its_globals)(torch.ones(2))
    assert not minidynamo.counters["fallback_reasons"]


def warn_about_caller():
    warnings.warn("your fault", stacklevel=2)


def warn_through_a_helper(x):
    y = x * 2
    warn_about_caller()
    return y + 1


def warn_once_per_line(x):
    for _ in range(3):
        warnings.warn("once here")       # the default filter: once per module and line (the registry)
        x = x + 1
    return x


def warn_as_error(x):
    y = x * 2
    try:
        warnings.warn("as an error")
    except UserWarning as error:
        return y, str(error)
    return y, None


def test_a_warning_at_a_break_uses_the_frames_registry_and_filters(capsys):
    """``warnings.warn`` (stacklevel 1) at a break: the module, line and registry are the frame's,
    so "once per line" warns once, as in eager; a filter that makes it an error raises there."""
    def shown(fn):
        warn_once_per_line.__globals__.pop("__warningregistry__", None)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("default")
            fn(torch.ones(2))
        return [(w.filename, w.lineno, str(w.message)) for w in caught]

    expected = shown(warn_once_per_line)
    assert len(expected) == 1 and shown(minidynamo.optimize("eager")(warn_once_per_line)) == expected
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert same(minidynamo.optimize("eager")(warn_as_error)(torch.ones(2)), warn_as_error(torch.ones(2)))
    assert not minidynamo.counters["fallback_reasons"]


@pytest.mark.parametrize("program", [warn_here, warn_through_a_helper], ids=lambda f: f.__name__)
def test_a_warning_names_the_line_eager_names(program):
    def where(fn):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fn(torch.ones(2))
        return [(w.filename, w.lineno, str(w.message)) for w in caught]

    expected = where(program)
    assert expected and where(minidynamo.optimize("eager")(program)) == expected


class Records(logging.Handler):
    def __init__(self):
        super().__init__()
        self.seen = []

    def emit(self, record):
        self.seen.append((record.funcName, record.lineno, record.getMessage()))


LOG = logging.getLogger("minidynamo.tests.frame_readers")


def log_a_line(x):
    y = x.sin()
    LOG.warning("shape %s", tuple(y.shape))
    return y + 1


def test_a_log_record_names_the_function_eager_names():
    records = Records()
    LOG.addHandler(records)
    try:
        log_a_line(torch.ones(2))
        minidynamo.optimize("eager")(log_a_line)(torch.ones(2))
    finally:
        LOG.removeHandler(records)
    assert len(records.seen) == 2 and records.seen[0] == records.seen[1]


def _traced_helper(x):
    return x + 1


def traces_a_helper(x, events):
    def tracer(frame, event, arg):
        events.append((frame.f_code.co_name, event))
        return None
    y = x * 2
    try:
        sys.settrace(tracer)                 # frames started from here on are traced; not this one
        y = _traced_helper(y)
    finally:
        sys.settrace(None)
    return y


def logs_around_a_break(x):
    y = x.sin()
    LOG.warning("first %s", tuple(y.shape))
    y = y * 2
    print("a break before the next record")
    LOG.error("second %d", 2)
    LOG.debug("not emitted: below the logger's level")
    return y + 1


def test_a_logging_call_is_a_graph_break_and_its_record_is_eagers(capsys):
    """``logging``'s caller lookup walks the stack (``sys._getframe``): broken at the root's call,
    it meets the break's entry in the frame's place, which shows the frame's name, file and line,
    so the record is eager's; the frame is captured around it (it ran eagerly)."""
    class Full(Records):
        def emit(self, record):
            self.seen.append((record.funcName, record.lineno, record.pathname, record.module,
                              record.levelname, record.getMessage()))

    records = Full()
    LOG.addHandler(records)
    LOG.setLevel(logging.INFO)
    for level in (logging.DEBUG, logging.WARNING, logging.ERROR):   # the logger's level cache filled:
        LOG.isEnabledFor(level)                                      # (a miss takes a lock: a break)
    try:
        expected = logs_around_a_break(torch.ones(2))
        eager_records = list(records.seen)
        records.seen.clear()
        compiled = minidynamo.optimize("eager")(logs_around_a_break)
        for _ in range(2):
            assert torch.equal(compiled(torch.ones(2)), expected)
            assert records.seen == eager_records
            records.seen.clear()
    finally:
        LOG.removeHandler(records)
        LOG.setLevel(logging.NOTSET)
    assert not minidynamo.counters["fallback_reasons"]
    assert minidynamo.counters["graph_breaks"] >= 2


def prints_then_warns_for_its_caller(x):
    y = x.sin()
    print("a break before the warning")
    warnings.warn("for the caller", UserWarning, stacklevel=2)
    return y


def calls_the_warner(x):
    return prints_then_warns_for_its_caller(x) + 1     # the warning names this line


@pytest.mark.parametrize("walker", ["warnings", "logging"])
def test_a_walk_past_the_frame_after_a_break_names_eagers_caller(capsys, walker):
    """``stacklevel=2`` names the frame's caller.  After a break the rest of the frame is a resume
    function, which the frame hook calls once the break's entry has returned, so its caller is
    the frame's caller (called from the entry, it named the entry: the frame at the earlier
    break's line); the call itself is a break whose entry stands in the frame's place."""
    def logs_for_its_caller(x):
        y = x.sin()
        print("a break before the record")
        LOG.warning("for the caller", stacklevel=2)
        return y

    def calls_the_logger(x):
        return logs_for_its_caller(x) + 1

    program = calls_the_warner if walker == "warnings" else calls_the_logger
    records = Records()
    LOG.addHandler(records)
    try:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            program(torch.ones(2))
            minidynamo.optimize("eager")(program)(torch.ones(2))
            minidynamo.optimize("eager")(program)(torch.ones(2))
    finally:
        LOG.removeHandler(records)
    where = [(w.filename, w.lineno) for w in seen] if walker == "warnings" else records.seen
    assert len(where) == 3 and where[0] == where[1] == where[2], where
    assert not minidynamo.counters["fallback_reasons"]


def warns_by_its_global_name(x):
    y = x.sin()
    print("a break before the warning")
    warn("for the caller", UserWarning, stacklevel=2)
    return y * 2


def calls_the_global_warner(x):
    return warns_by_its_global_name(x) + 1     # the warning names this line


def test_a_frame_naming_warn_as_a_global_breaks_like_any_other(capsys):
    """``from warnings import warn``: the frame breaks at the print and at the call (it ran
    eagerly whole: a frame reading a frame reader cannot break), and the warning names the
    caller's line, as in eager."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        expected = calls_the_global_warner(torch.ones(2))
        compiled = minidynamo.optimize("eager")(calls_the_global_warner)
        for _ in range(2):
            assert torch.equal(compiled(torch.ones(2)), expected)
    where = [(w.filename, w.lineno) for w in seen]
    assert len(where) == 3 and where[0] == where[1] == where[2], where
    assert not minidynamo.counters["fallback_reasons"]
    assert minidynamo.counters["graph_breaks"] >= 2


def names_its_callers_caller(x):
    warnings.warn("two frames up", UserWarning, stacklevel=3)
    return x + 1, sys._getframe(2).f_code.co_name


def breaks_then_calls_a_walker(x):
    y = x * 2
    print("a break before the call")
    return names_its_callers_caller(y)


def calls_the_breaking_frame(x):
    return breaks_then_calls_a_walker(x)       # the frame eager's walk names


def test_a_walk_from_the_rest_of_a_frame_meets_the_frames_caller(capsys):
    """After a break the rest of the frame is a resume function, which the frame hook calls once
    the break's entry has returned (``run_entry``'s trampoline): its caller is the frame's
    caller, so a helper it calls that walks two frames up names what eager's names (it named
    the entry, the frame at the break's line)."""
    def run(fn):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            _, name = fn(torch.ones(2))
        return name, [(w.filename, w.lineno) for w in seen]

    expected = run(calls_the_breaking_frame)
    compiled = minidynamo.optimize("eager")(calls_the_breaking_frame)
    assert run(compiled) == expected and run(compiled) == expected
    assert minidynamo.counters["graph_breaks"] >= 1


def test_a_frame_calling_settrace_does_not_break():
    """After a break the rest of the frame would be a resume function: a frame started after
    ``sys.settrace``, which eager's frame is not, so the tracer would see its events too
    (CPython's test_sys_settrace)."""
    opt = minidynamo.optimize("eager")(traces_a_helper)
    for _ in range(2):
        expected, got = [], []
        torch.testing.assert_close(opt(torch.ones(2), got), traces_a_helper(torch.ones(2), expected))
        assert got == expected == [("_traced_helper", "call")]


SMALL_MODULE = """
G = 1

def write_through_a_namespace(x, ns):
    ns["G"] = ns["G"] + 1                    # when ns is this module's globals: G itself
    return x * G
"""


def test_the_frames_globals_passed_as_a_dict_are_the_globals_it_reads():
    """A dict holding a module's namespace (``globals()``, ``vars(module)``) is refused as a
    value: a write through it would not be seen by the trace's reads of the same globals."""
    eager_ns, our_ns = {}, {}
    exec(SMALL_MODULE, eager_ns)
    exec(SMALL_MODULE, our_ns)
    expected = [eager_ns["write_through_a_namespace"](torch.ones(1), eager_ns) for _ in range(2)]
    compiled = minidynamo.optimize("eager")(our_ns["write_through_a_namespace"])
    got = [compiled(torch.ones(1), our_ns) for _ in range(2)]
    assert same(tuple(got), tuple(expected)) and our_ns["G"] == eager_ns["G"] == 3

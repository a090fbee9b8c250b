"""What CPython's own test suite found when run through minidynamo (``bench/cpython_cases.py``):
every test method of a module run as an optimized frame, compared with the same method run
plainly.  Each test here is one family it found, as a small frame that breaks where the
suite's frames broke (a call the tracer cannot model: ``opaque()``).

- An iterator handed to the instruction a graph break runs eagerly (a comprehension's
  function is called with it) was handed over as a tuple: the comprehension's FOR_ITER then
  called a NULL slot and the process died.
- Values rebuilt at a break (or returned) were rebuilt once per place that held them: two
  names for one tuple, set or slice became two objects (``t is u`` False; ``s.add`` through
  one name not seen through the other).
- A set rebuilt from its items may iterate in another order than the trace's set (a table's
  history decides the order): it is now a copy of the trace's very table (``_set_table.c``);
  ``set(s)`` of a set, and a caller's set, were copies whose order could differ too.
- ``l.append == l.append`` was False (each read is a new method object; equality compares the
  function and the object bound).
- A function made in the frame answered ``__name__`` with its qualified name.
- A resume function's frame was called ``f__resume_at_12`` in tracebacks, ``logging`` and
  ``inspect``: it is ``f``.
- The entry of a break held every value it handed to the resume function until that returned,
  and the trace of a first call kept what it read in reference cycles: a local the rest of the
  frame deleted stayed alive (its weak references, its memory).  The other way round, a local
  bound but never read again must live on: a ``memoryview`` in it pins its ``bytearray``.
- Which operand of ``==`` goes first was decided with ``issubclass`` (an ABC's ``register``
  answers it); CPython asks the MRO.
- A star call run at a break passed a copy of its argument tuple.
- The instruction a break runs eagerly ran in a frame called ``break_f`` in the file
  ``<minidynamo graph break in f>``: ``logging``'s ``stacklevel`` and tracebacks showed it. The
  entry's code now has the frame's name and file and the instruction's line.
"""

import copy
import gc
import logging
import random
import weakref

import pytest
import torch

import minidynamo


@pytest.fixture(autouse=True)
def fresh_caches():
    minidynamo.reset()
    yield
    minidynamo.reset()


def opaque(*args):
    """A call the tracer does not model: a graph break."""
    return random.Random(0).random() >= 0 and (args[0] if args else None)


def run_both(fn, *args, calls=2):
    """fn's eager result and the optimized one's on each call (both must be equal)."""
    expected = fn(*args)
    optimized = minidynamo.optimize("eager")(fn)
    results = [optimized(*args) for _ in range(calls)]
    return expected, results


def assert_same_as_eager(fn, *args):
    expected, results = run_both(fn, *args)
    for got in results:
        assert repr(got) == repr(expected), (got, expected)
    return results


# -- an iterator as an operand of the eager instruction -------------------------------------------
def comprehension_over_a_range_calls_opaque():
    rng = random.Random(1)
    out = []
    for _ in range(2):
        out.append({x: rng.randrange(3) for x in range(4) if rng.randrange(2)})
    return out


def generator_argument_breaks_outside_any_loop(x):
    rng = random.Random(2)
    total = sum(rng.randrange(5) for _ in range(4))
    return x + total


def test_a_comprehension_that_breaks_inside_gets_an_iterator_not_a_tuple():
    assert_same_as_eager(comprehension_over_a_range_calls_opaque)
    assert_same_as_eager(generator_argument_breaks_outside_any_loop, torch.ones(2))


# -- one object per value, wherever it is held ----------------------------------------------------
def tuple_under_two_names(x):
    t = (1, x)
    u = t
    opaque()
    return u is t


def slice_copied_and_kept(x):
    s = slice(1, 3)
    c = copy.copy(s)
    opaque()
    return s is c, x[s]


def set_aliased_then_added_to(x):
    s = {1, 2}
    c = s
    opaque()
    s.add(3)
    return c, x.sum()


def tuple_twice_in_a_list(x):
    t = (1, x)
    pair = [t, t]
    opaque()
    return pair[0] is pair[1]


def set_bound_method_kept_across_a_break():
    seen = set()
    add = seen.add
    for i in range(5):
        add(i * 7 % 5)
        if i == 2:
            opaque()
    return len(seen), sorted(seen)


@pytest.mark.parametrize("fn", [tuple_under_two_names, slice_copied_and_kept, set_aliased_then_added_to,
                                tuple_twice_in_a_list])
def test_a_value_held_in_two_places_is_one_object_after_a_break(fn):
    assert_same_as_eager(fn, torch.arange(4.0))


def test_a_bound_method_of_a_set_adds_to_that_set_after_a_break():
    assert_same_as_eager(set_bound_method_kept_across_a_break)


# -- set iteration order --------------------------------------------------------------------------
WORDS = ["gallahad", "lancelot", "robin", "arthur", "bedevere", "patsy", "tim", "roger", "zoot", "dingo",
         "concorde", "herbert", "brother maynard", "the knights who say ni"]


def set_grown_by_adds_then_iterated():
    s = set()
    for w in WORDS:
        s.add(w)
    opaque()
    return list(s), repr(s)


def set_with_removals_then_iterated():
    s = set(WORDS)
    for w in WORDS[::2]:
        s.discard(w)
    opaque()
    s.add("spam")
    return list(s)


def set_copied_from_a_set_then_grown():
    s = set(WORDS[:5])
    t = set(s)
    t.update(WORDS[5:9])
    opaque()
    return list(t), str(t)


def caller_set_printed(words):
    opaque()
    return str(words), list(words)


@pytest.mark.parametrize("fn", [set_grown_by_adds_then_iterated, set_with_removals_then_iterated,
                                set_copied_from_a_set_then_grown])
def test_a_set_iterates_in_eagers_order_after_a_break(fn):
    assert_same_as_eager(fn)


def test_a_callers_set_is_read_in_its_own_order():
    words = set(WORDS)
    for w in WORDS[1::3]:
        words.discard(w)          # a table with deleted slots: a copy would iterate differently
    assert_same_as_eager(caller_set_printed, words)


def test_a_set_with_deleted_slots_is_rebuilt_with_its_very_table():
    """Removals leave deleted slots that decide where later items go: the rebuilt set is an
    exact copy of the trace's table, so it grows and iterates as eager's does, on every call,
    and the frame is still captured."""
    assert_same_as_eager(set_with_removals_then_iterated)
    assert minidynamo.counters["fallback_reasons"] == []
    assert minidynamo.counters["graph_breaks"] >= 1


def returns_sets_made_by_dict_views(d, x):
    return d.keys() & {"a", "q"}, d.keys() - {"a"}, d.keys() | ["q", "r", "s"], x + 1


def test_a_returned_set_that_cpython_made_keeps_its_order():
    keys = {w: i for i, w in enumerate(WORDS)}
    assert_same_as_eager(returns_sets_made_by_dict_views, keys, torch.ones(2))
    assert minidynamo.counters["fallback_reasons"] == []


# -- methods and functions ------------------------------------------------------------------------
def bound_methods_compared(x):
    items = []
    return (items.append == items.append, items.append != items.append, items.append == [].append,
            x.add == x.add, x.add == x.mul)


def nested_function_names(x):
    def inner(y):
        return y + 1

    async def coroutine():
        pass

    square = lambda z: z * z  # noqa: E731
    return (x + 1, inner.__name__, inner.__qualname__, coroutine.__name__, square.__name__,
            square.__qualname__)


def test_bound_methods_are_equal_when_they_bind_one_function_to_one_object():
    assert_same_as_eager(bound_methods_compared, torch.ones(2))


class Plain:
    pass


def c_methods_compared(x):
    """C methods bound to an object (a class's, a constant's): each read is a new object, equal
    to the others (``inspect.getmembers`` compares them so)."""
    hook = Plain.__init_subclass__
    return (x + 1, hook == Plain.__init_subclass__, "a".upper == "a".upper, "a".upper != "b".upper,
            [hook] == [Plain.__init_subclass__], Plain.__init_subclass__ in [hook], x.__add__ == x.__add__)


def test_c_methods_are_equal_when_they_bind_one_function_to_one_object():
    assert_same_as_eager(c_methods_compared, torch.ones(2))


def test_a_nested_functions_name_is_its_code_name_not_its_qualified_name():
    assert_same_as_eager(nested_function_names, torch.ones(2))


# -- the frame as the program sees it -------------------------------------------------------------
def logs_its_function_name(x):
    y = x + 1
    opaque()
    logging.getLogger("minidynamo.test.funcname").info("after the break")
    return y * 2


def test_the_rest_of_a_frame_after_a_break_has_the_frames_name(caplog):
    """logging's funcName, tracebacks and inspect read the code's name: the resume function's
    frame is still ``logs_its_function_name``."""
    with caplog.at_level(logging.INFO, logger="minidynamo.test.funcname"):
        optimized = minidynamo.optimize("eager")(logs_its_function_name)
        optimized(torch.ones(2))
    assert minidynamo.counters["graph_breaks"] >= 1
    assert [r.funcName for r in caplog.records] == ["logs_its_function_name"]


CALLER_LOG = logging.getLogger("minidynamo.test.caller")


class LogsForItsCaller:
    """Its ``__str__`` (called by ``print``, which a break runs eagerly) logs for its caller."""

    def __str__(self):
        CALLER_LOG.info("for my caller", stacklevel=2)
        return ""


class RaisesWhenPrinted:
    def __str__(self):
        raise ValueError("from __str__")


def prints_at_a_break(x, obj):
    y = x + 1
    print(obj, end="")
    return y * 2


def test_the_instruction_run_at_a_break_is_seen_at_the_frames_line(caplog, capsys):
    """The instruction a break runs eagerly runs in the entry's frame: what it calls sees that
    frame as its caller, and ``logging`` (``stacklevel``) and tracebacks show it as eager's frame,
    the function at the instruction's line (test_logging ``test_find_caller_with_stacklevel``:
    it was ``break_prints_at_a_break`` in ``<minidynamo graph break in ...>``)."""
    import traceback

    optimized = minidynamo.optimize("eager")(prints_at_a_break)
    with caplog.at_level(logging.INFO, logger="minidynamo.test.caller"):
        prints_at_a_break(torch.ones(2), LogsForItsCaller())
        optimized(torch.ones(2), LogsForItsCaller())
    assert minidynamo.counters["graph_breaks"] >= 1
    eager, ours = caplog.records
    assert (ours.funcName, ours.lineno, ours.pathname) == (eager.funcName, eager.lineno, eager.pathname)

    def frames(fn):
        try:
            fn(torch.ones(2), RaisesWhenPrinted())
        except ValueError as error:
            return [(f.name, f.lineno, f.filename) for f in traceback.extract_tb(error.__traceback__)][-2:]

    assert frames(optimized) == frames(prints_at_a_break)


# -- lifetimes ------------------------------------------------------------------------------------
class Payload:
    pass


def drops_a_local_after_a_break():
    obj = Payload()
    ref = weakref.ref(obj)
    opaque()
    obj = None
    return ref() is None


def rebinds_a_tensor_after_a_break(x):
    y = x * 2
    ref = weakref.ref(y)
    opaque()
    y = x + 1
    return ref() is None, y


def test_a_local_the_rest_of_the_frame_drops_is_freed_then():
    gc.disable()      # freed by reference counting, as in eager, not by a collection
    try:
        expected, results = run_both(drops_a_local_after_a_break, calls=3)
        assert expected is True and results == [True] * 3
        # the first call compiles too: the trace lets go of the values it read (its own objects
        # are freed by a collection only)
        expected, results = run_both(rebinds_a_tensor_after_a_break, torch.ones(3), calls=3)
        assert expected[0] is True and [r[0] for r in results] == [True] * 3
    finally:
        gc.enable()


def keeps_an_unread_memoryview():
    data = bytearray(range(10))
    view = memoryview(data)  # noqa: F841  never read again, yet it pins data's size until the frame ends
    opaque()

    def resize(n):
        data[1:-1] = range(n + 1, 2 * n - 1)
    try:
        resize(11)
    except BufferError:
        return "refused", bytes(data)
    return "resized", bytes(data)


def test_a_local_bound_but_never_read_again_lives_to_the_frames_end():
    """test_bytes: the resume function takes the frame's unread locals that hold the program's
    objects (an earlier instruction's result), as eager's frame keeps them."""
    assert_same_as_eager(keeps_an_unread_memoryview)


# -- operators and calls --------------------------------------------------------------------------
class Logged:
    def __init__(self, log):
        self.log = log


class Base(Logged, metaclass=__import__("abc").ABCMeta):
    def __eq__(self, other):
        self.log.append("Base.__eq__")
        return NotImplemented


class Virtual(Logged):
    def __eq__(self, other):
        self.log.append("Virtual.__eq__")
        return NotImplemented


Base.register(Virtual)


def compares_with_a_virtual_subclass(x):
    log = []
    same = Base(log) == Virtual(log)
    return log, same, x + 1


def test_a_virtual_subclass_does_not_go_first_in_a_comparison():
    """test_binop: CPython tries the right operand first only when its class really derives
    from the left's (the MRO), not when an ABC registered it."""
    assert issubclass(Virtual, Base)
    assert_same_as_eager(compares_with_a_virtual_subclass, torch.ones(1))


def calls_with_a_star_tuple(f):
    args = tuple(range(5))
    opaque()
    return f(*args) is args


def test_a_star_call_at_a_break_passes_the_very_tuple():
    """test_call: CALL_FUNCTION_EX hands an exact tuple to the callee as it is (a C callable
    that returns its arguments returns that tuple)."""
    testcapi = pytest.importorskip("_testcapi")
    returns_its_arguments = testcapi.MethodDescriptorNopGet()
    assert calls_with_a_star_tuple(returns_its_arguments) is True
    assert_same_as_eager(calls_with_a_star_tuple, returns_its_arguments)


def ignores_its_second_argument(x, unused=None):
    return x + 1


def test_an_argument_the_code_never_reads_is_not_guarded():
    """Only what the code reads is wrapped: an unread argument (here, and a resume function's
    parameter that only keeps an object alive) can change freely without a recompile."""
    optimized = minidynamo.optimize("eager")(ignores_its_second_argument)
    for unused in (torch.ones(2), torch.ones(5, dtype=torch.int64), "text", None):
        assert torch.equal(optimized(torch.ones(3), unused), torch.full((3,), 2.0))
    assert minidynamo.counters["compiles"] == 1, minidynamo.counters["recompile_reasons"]


# -- a long computation in plain Python -----------------------------------------------------------
def squares_then_scales(x):
    total = 0
    for i in range(60_000):
        total += i * i % 7
    return x * total


def test_a_long_plain_python_computation_runs_eagerly():
    """test_statistics: a frame that spends 10**5 iterations in plain Python (no tensor op
    recorded for MAX_PYTHON_ONLY_STEPS instructions) made the tracer unroll it for seconds per
    compile; it is refused with a reason instead, and runs eagerly."""
    assert_same_as_eager(squares_then_scales, torch.ones(2))
    reasons = minidynamo.counters["fallback_reasons"]
    assert any("without a tensor op" in reason for reason in reasons), reasons


# -- objects whose __class__ is not their type ------------------------------------------------------
def scaled(a, b):
    return a * b


def calls_a_mock(fn, x):
    y = x + 1
    return fn(y.shape[0], 2) * y


def test_a_mock_made_with_a_spec_is_called_not_probed_as_what_it_imitates():
    """unittest.mock's ``create_autospec`` (test_unittest): a mock with a function, a module or a
    tensor as its spec answers ``isinstance`` for its spec (``__class__`` is a property), and the
    tracer took it for one, reading ``fn.__code__.co_qualname`` and the like from it, which the
    mock recorded as calls. It is now only its real type to the trace: calling it is a break."""
    from unittest import mock

    x = torch.ones(3)
    for spec in (scaled, torch.nn.Linear(2, 2), torch.Tensor):
        recorded = {}
        for mode in ("eager", "optimized"):
            fake = mock.MagicMock(spec=spec, return_value=torch.full((3,), 5.0))
            run = calls_a_mock if mode == "eager" else minidynamo.optimize("eager")(calls_a_mock)
            assert torch.equal(run(fake, x), torch.full((3,), 10.0))
            recorded[mode] = fake.mock_calls
            minidynamo.reset()
        assert len(recorded["optimized"]) == 1 and recorded["optimized"] == recorded["eager"], recorded
    autospecced = mock.create_autospec(scaled, return_value=torch.full((3,), 5.0))
    assert torch.equal(minidynamo.optimize("eager")(calls_a_mock)(autospecced, x), torch.full((3,), 10.0))
    assert autospecced.mock_calls == [mock.call(3, 2)]


# -- a read that changes what it reads ----------------------------------------------------------------
def reads_a_modules_annotations(x, module):
    before = "__annotations__" in module.__dict__
    annotations = module.__annotations__
    return x + len(annotations), before, "__annotations__" in module.__dict__


def test_reading_a_modules_annotations_does_not_create_them_at_compile_time():
    """test_module: a module's (or a class's) ``__annotations__`` is made by its first read. The
    trace read it for real while compiling, so the program's own check before the read already
    found it (True where eager says False)."""
    from types import ModuleType

    optimized = minidynamo.optimize("eager")(reads_a_modules_annotations)
    for _ in range(2):
        expected = reads_a_modules_annotations(torch.ones(2), ModuleType("eager"))
        got = optimized(torch.ones(2), ModuleType("optimized"))
        assert expected[1:] == got[1:] == (False, True) and torch.equal(expected[0], got[0])
    annotated = ModuleType("annotated")
    annotated.__annotations__ = {"a": int}
    got = optimized(torch.ones(2), annotated)
    assert got[1:] == (True, True) and torch.equal(got[0], torch.full((2,), 2.0))


# -- the compile's own warnings handling, unseen by the program ------------------------------------
def replaced_display(*args, **kwargs):
    pass


def set_display(display):
    import warnings

    warnings.showwarning = display


def display_replaced_and_read(x):
    """idlelib's capture_warnings: replace warnings.showwarning (a call the frame breaks at: the
    store is a side effect on a library module), read it, put it back."""
    import warnings

    kept = warnings.showwarning
    set_display(replaced_display)
    seen = warnings.showwarning is replaced_display
    set_display(kept)
    return x + 1, seen


def test_the_trace_reads_the_programs_warnings_display_not_the_compiles():
    """test_idle: a compile hid its own warnings with ``warnings.catch_warnings``, which swaps
    ``warnings.showwarning`` while open: a frame compiled after the program had replaced it read
    the default instead, and returned False where eager returns True."""
    assert_same_as_eager(display_replaced_and_read, torch.ones(2))
    assert display_replaced_and_read(torch.ones(2))[1] is True


def warns_once_here():
    import warnings

    warnings.warn("shown once by the default action", UserWarning)


def test_a_compile_does_not_show_again_a_warning_the_program_showed():
    """``catch_warnings`` also marked the filters changed, which empties each module's record of
    the warnings shown: after every compile, a warning shown once showed again."""
    import warnings

    minidynamo.optimize("eager")(lambda x: x * 2)(torch.ones(2))   # the tracer's modules imported
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("default")
        warns_once_here()
        warns_once_here()
        assert torch.equal(minidynamo.optimize("eager")(lambda x: x * 3)(torch.ones(2)), torch.full((2,), 3.0))
        warns_once_here()
    assert [str(w.message) for w in shown] == ["shown once by the default action"]


def test_the_first_compile_of_a_process_does_not_show_again_a_warning_the_program_showed():
    """The first compile imports sympy (torch's symbolic shapes), which adds a warnings filter of
    its own; adding one marked the filters changed, and every warning shown once showed again."""
    import os
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    program = (
        "import warnings, torch, minidynamo\n"
        "assert 'sympy' not in __import__('sys').modules\n"
        "def warns():\n"
        "    warnings.warn('once by the default action')\n"
        "with warnings.catch_warnings(record=True) as shown:\n"
        "    warnings.simplefilter('default')\n"
        "    warns()\n"
        "    minidynamo.optimize('eager')(lambda x: x + 1)(torch.ones(2))\n"
        "    warns()\n"
        "print(len(shown))\n")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=300,
                          cwd=root, env={**os.environ, "PYTHONPATH": root})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "1"


def ops_in_a_try_body(x):
    try:
        y = x.sin() * 2          # (ops the handler may catch the errors of, in a graph that writes
        x.add_(1)                # an input: each runs once on stand-ins while it compiles)
    except NotImplementedError:
        y = x
    return y + 1


def test_a_compile_that_probes_kernels_does_not_show_again_a_warning_the_program_showed():
    import warnings

    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("default")
        warns_once_here()
        expected = ops_in_a_try_body(torch.ones(2))
        assert torch.equal(minidynamo.optimize("eager")(ops_in_a_try_body)(torch.ones(2)), expected)
        warns_once_here()
    assert [str(w.message) for w in shown] == ["shown once by the default action"]


def walks_a_huge_range(x):
    it = iter(range(1 << 40))
    first = next(it)
    opaque()                                   # the rest of the iterator is handed over
    return x + first + next(it) + sum(1 for _ in zip(range(3), range(1 << 40)))


def test_a_huge_range_is_never_taken_apart_item_by_item():
    """test_range: ``iter(range(1 << 40))`` was unpacked into 2**40 trackers (the call never
    returned); a range that long is refused where it would be taken apart, and runs eagerly."""
    assert_same_as_eager(walks_a_huge_range, torch.ones(2))


def deletes_a_cell_after_a_break(x):
    a = x + 1

    def reads_a():
        return a

    opaque()                                   # the break: the rest runs as a resume function
    del a
    try:
        return a
    except UnboundLocalError:                  # eager's error for the frame's own cell
        return x - 1


def test_a_cell_deleted_after_a_break_raises_unbound_local_error():
    """test_funcattrs.test_set_cell: in the resume function the frame's cells are free
    variables, whose empty read is a NameError; such a frame does not break there."""
    assert_same_as_eager(deletes_a_cell_after_a_break, torch.ones(2))

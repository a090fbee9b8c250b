"""Graph breaks inside loop bodies: each iteration that breaks runs its graph, the one eager
instruction, and the resume function (the rest of the loop and the frame), which breaks again
at the same offset in the next iteration.  Every case runs eagerly and optimized twice on
equal fresh inputs (no recompile on the second call) and checks ``explain``'s counts."""

import functools

import pytest
import torch

import minidynamo

from ..corpus.helpers import CountingBackend
from .test_graph_breaks import inputs, run_both


@pytest.fixture(autouse=True)
def _fresh():
    minidynamo.reset()
    yield
    minidynamo.reset()


def counts(fn, *args):
    report = minidynamo.explain(fn)(*args)
    return report.graph_count, report.graph_break_count, report.fallback_count


def resume_names(fn, *args):
    """The functions the breaks happened in: the frame, then one resume code for every iteration."""
    report = minidynamo.explain(fn)(*args)
    return {b.function.split(".")[-1] for b in report.breaks}


# -- nn.ModuleList with a print in the body ------------------------------------------------------
class Stack(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.layers = torch.nn.ModuleList([torch.nn.Linear(4, 4) for _ in range(3)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x).relu()
            print("shape", x.shape)
        return x.sum()


def test_module_list_loop_with_a_print(capsys):
    model = Stack()
    backend = run_both(model, inputs(2, 4), capsys)
    assert backend.compile_count == 4                  # one graph per layer, then x.sum()
    assert counts(Stack(), *inputs(2, 4)()) == (4, 3, 0)
    names = resume_names(Stack(), *inputs(2, 4)())
    assert len(names) == 2, names                      # forward and ONE resume code, reused per iteration


# -- for i in range(n) with a data-dependent branch ----------------------------------------------
def range_item(x, n):
    for i in range(n):
        x = x * 1.5 + i
        if x.sum().item() > 4.0:
            x = x - 1
    return x.cos()


@pytest.mark.parametrize("n", [1, 4])
def test_range_loop_with_an_item_based_branch(capsys, n):
    run_both(range_item, lambda: (torch.linspace(0, 1, 3), n), capsys)
    graphs, breaks, fallbacks = counts(range_item, torch.linspace(0, 1, 3), n)
    assert breaks == n and fallbacks == 0


def test_another_trip_count_compiles_more_resume_entries_only(capsys):
    backend = CountingBackend()
    opt = minidynamo.optimize(backend)(range_item)
    torch.testing.assert_close(opt(torch.linspace(0, 1, 3), 3), range_item(torch.linspace(0, 1, 3), 3))
    first = backend.compile_count
    torch.testing.assert_close(opt(torch.linspace(0, 1, 3), 3), range_item(torch.linspace(0, 1, 3), 3))
    assert backend.compile_count == first
    torch.testing.assert_close(opt(torch.linspace(0, 1, 3), 4), range_item(torch.linspace(0, 1, 3), 4))
    assert backend.compile_count > first               # range(4) is another guard: new entries


# -- enumerate / zip over lists and tuples made in the frame ---------------------------------------
def enumerate_zip(x, y):
    scales = [x.sin(), x.cos(), x.tanh()]
    shifts = (y, y * 2, y * 3)
    total = x * 0
    for i, (s, t) in enumerate(zip(scales, shifts), start=1):
        total = total + i * s * t
        print("step", i, f"{total.sum().item():.4f}")
    return total


def test_enumerate_zip_over_lists(capsys):
    run_both(enumerate_zip, lambda: (torch.linspace(-1, 1, 4), torch.linspace(0, 2, 4)), capsys)
    assert counts(enumerate_zip, torch.linspace(-1, 1, 4), torch.linspace(0, 2, 4))[1:] == (6, 0)


def nested_loop_iterators(xs, ys):
    """The caller's lists walked by enumerate(zip(...)), zip(range, enumerate(zip(...))) and
    enumerate(reversed(...)): each break hands the loop's iterator, nested as it is, to the next
    resume function."""
    out = []
    for level, (a, b) in enumerate(zip(xs, ys)):
        print("level", level)
        out.append(a * level + b)
    for k, (i, (a, b)) in zip(range(5), enumerate(zip(xs, ys))):
        print("k", k, i)
        out.append(a - b * k)
    for i, a in enumerate(reversed(xs)):       # reads the caller's list live, backwards
        print("r", i)
        out.append(a * i)
        if i == 0:
            xs[0] = xs[0] + 100                # seen by the iteration that reaches it, as in eager
    return out


def test_nested_and_reversed_loop_iterators_are_handed_over(capsys):
    def make():
        return [torch.full((2,), float(i)) for i in range(3)], [torch.ones(2) * i for i in range(3)]
    run_both(nested_loop_iterators, make, capsys)
    graphs, breaks, fallbacks = counts(nested_loop_iterators, *make())
    assert (breaks, fallbacks) == (9, 0)


def dict_items(x):
    d = {"a": x, "b": x * 2, "c": x + 3}
    for k, v in d.items():
        x = x + v
        print(k)
    return x


def reversed_list(x):
    ws = [x, x + 1, x * 2]
    for w in reversed(ws):
        x = x * w
        print("w")
    return x


@pytest.mark.parametrize("fn", [dict_items, reversed_list])
def test_dict_items_and_reversed_list(capsys, fn):
    run_both(fn, inputs(3), capsys)
    assert counts(fn, *inputs(3)())[1:] == (3, 0)


# -- while loops ---------------------------------------------------------------------------------
def while_counter(x):
    i = 0
    while i < 5:
        x = x + 1
        print("i", i)
        i += 1
        if x.sum() > 12:
            break
    return x * i


def test_while_loop_with_a_counter_and_a_break(capsys):
    run_both(while_counter, inputs(2), capsys)
    run_both(while_counter, lambda: (torch.full((2,), 3.0),), capsys)
    assert counts(while_counter, *inputs(2)())[2] == 0


# -- nested loops, break / continue / else --------------------------------------------------------
def nested(x):
    for i in range(3):
        for j in range(2):
            x = x + i * j
            print(i, j)
        x = x * 0.5
    return x


def test_a_break_in_a_nested_loop(capsys):
    run_both(nested, inputs(3), capsys)
    assert counts(nested, *inputs(3)()) [1:] == (6, 0)


def clauses(x):
    for i in range(6):
        if i == 1:
            continue
        x = x + i
        print("at", i)
        if i == 4:
            break
    else:
        x = x * 100
    for i in range(2):
        x = x - i
        print("second", i)
    else:
        x = x * 3
    return x


def test_break_continue_and_else_around_the_break(capsys):
    run_both(clauses, inputs(3), capsys)
    assert counts(clauses, *inputs(3)())[2] == 0


# -- side effects across iterations ---------------------------------------------------------------
def appends(x, out):
    for i in range(3):
        y = x * (i + 1)
        out.append(y)
        print("len", len(out))
        out.append(i)
    return x


def test_side_effects_on_a_list_happen_once_per_iteration_in_order(capsys):
    for _ in range(2):
        eager, mine = [], []
        appends(torch.ones(2), eager)
        eager_out = capsys.readouterr().out
        minidynamo.optimize("eager")(appends)(torch.ones(2), mine)
        assert capsys.readouterr().out == eager_out
        assert len(mine) == len(eager) == 6
        for got, want in zip(mine, eager):
            if isinstance(want, torch.Tensor):
                torch.testing.assert_close(got, want)
            else:
                assert got == want


# -- refused: what the break cannot rebuild -------------------------------------------------------
def over_callers_list(x, xs):
    for t in xs:
        x = x + t
        print("t")
    return x


def over_generator(x):
    for t in (x * k for k in range(3)):
        x = x + t
        print("t")
    return x


def over_list_still_used(x):
    ws = [x, x + 1]
    for w in ws:
        x = x * w
        print("w")
        ws.append
    return x


def over_list_grown_in_the_loop(x):
    ws = [x, x + 1]
    for w in ws:
        x = x * w
        print("w", len(ws))
        if len(ws) < 4:
            ws.append(w * 2)                  # the loop's iterator sees the appended items
    return x, len(ws)


def over_reversed_list_changed_after_the_break(x):
    ws = [1.0, 2.0, 3.0]
    out = []
    for i, w in enumerate(reversed(ws)):
        out.append(x * w * i)
        print("w", w)
        ws[0] = 100.0                         # read by the reversed iterator's last step
    return sum(out), ws


@pytest.mark.parametrize("fn", [over_list_still_used, over_list_grown_in_the_loop,
                                over_reversed_list_changed_after_the_break])
def test_a_loop_over_a_list_the_frame_still_changes_hands_its_real_iterator_over(capsys, fn):
    """A list made in the frame that the rest of the frame can still change (was: the whole frame
    ran eagerly): the break rebuilds the list once, and the loop's iterator is a real one over
    that very list (``list_iterator_at``), which the frame's local holds too."""
    run_both(fn, lambda: (torch.ones(2),), capsys)
    report = minidynamo.explain(fn)(torch.ones(2))
    assert report.fallback_count == 0 and report.graph_break_count >= 2, report.reasons


def test_a_loop_over_a_generator_matches_eager(capsys):
    run_both(over_generator, inputs(2), capsys)


# -- many iterations: no nesting, never a RecursionError ------------------------------------------
def many(x, n):
    for i in range(n):
        x = x + 1
        print(end="")
    return x


def test_iterations_that_break_do_not_nest_frames(capsys, monkeypatch):
    """The frame hook calls each resume function after its entry has returned (the trampoline
    in ``run_entry``), so a loop that breaks on every iteration keeps one frame's depth: 300
    iterations run compiled under a recursion limit of 250 (nested, they would need 600 frames)."""
    import sys

    monkeypatch.setattr(minidynamo.config, "cache_size_limit", 1000)
    opt = minidynamo.optimize("eager")(many)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(250)
    try:
        for _ in range(2):
            torch.testing.assert_close(opt(torch.zeros(2), 300), many(torch.zeros(2), 300))
    finally:
        sys.setrecursionlimit(limit)
    assert not minidynamo.counters["fallback_reasons"]
    assert minidynamo.counters["graph_breaks"] >= 300


def test_the_default_cache_size_limit_ends_the_nesting(capsys):
    opt = minidynamo.optimize("eager")(many)
    for _ in range(2):
        torch.testing.assert_close(opt(torch.zeros(2), 40), many(torch.zeros(2), 40))
    assert minidynamo.counters["graph_breaks"] <= minidynamo.config.cache_size_limit + 1


def test_the_rest_of_a_range_is_handed_over_as_a_range():
    """Not a tuple of its ints: test_json's loop over range(0xd7ff) made each resume entry guard
    a 55,000-int tuple (27 s for a test eager runs in 0.1 s)."""
    from minidynamo import _eval_frame
    from minidynamo.breaks.resume_code import _made

    @minidynamo.disable
    def note(i):
        pass

    def f(x, n):
        for i in range(n):
            note(i)                            # a break in every iteration
            x = x + i
        return x

    opt = minidynamo.optimize("eager")(f)     # (its entries live while it does)
    assert torch.equal(opt(torch.zeros(2), 6), f(torch.zeros(2), 6))   # fewer iterations than the cache limit
    guards = [text for code in _made[f.__code__].values()
              for entry in _eval_frame.get_cache(code) if entry.guard_fn is not None
              for text in entry.guard_fn.guard_strings]
    assert any("L['___iter0'].stop == 6" in text for text in guards), guards
    assert not any("(1, 2, 3" in text for text in guards)


# -- a break inside a try or with block inside a loop body ---------------------------------------
# The resume code keeps the loop from its head and jumps in at the break: the jump lands inside
# the block's exception-table region, which restarts there (resume_code._build), so the block's
# handler (an ``except``, a ``finally``, a with block's ``__exit__``) sees what eager's sees.
EVENTS = []


class Logged:
    """A user's context manager that logs enter and exit to ``EVENTS``, swallowing KeyError."""
    def __enter__(self):
        EVENTS.append("enter")
        return self

    def __exit__(self, kind, value, tb):
        EVENTS.append(("exit", kind.__name__ if kind else None))
        return kind is KeyError


def no_grad_in_loop(x):
    for i in range(3):
        with torch.no_grad():
            x = x * 2
            print("in", i, torch.is_grad_enabled())
            x = x + i
    return x, torch.is_grad_enabled()


def try_in_loop(x):
    for i in range(4):
        try:
            x = x * 2
            print("in", i)
            if i == 1:
                raise KeyError(i)
            if i == 2:
                continue
        except KeyError:
            x = x - 5
            continue
        finally:
            x = x + 0.5
        x = x + 1
    return x


def user_block_in_loop(x):
    for i in range(3):
        with Logged():
            x = x + i
            print("in", i)
            if i == 1:
                {}[i]                    # swallowed by the block
            x = x * 2
    return x


def loop_in_try(x):
    try:
        for i in range(3):
            x = x + i
            print("in", i)
            if i == 2:
                raise ValueError("out")
    except ValueError:
        x = x * 10
    return x


def break_inside_nested_loops(x):
    for i in range(2):
        with torch.no_grad():
            for j in range(2):
                try:
                    x = x + j
                    print("in", i, j)
                    if j == 1:
                        break
                except KeyError:
                    pass
    return x


@pytest.mark.parametrize("fn", [no_grad_in_loop, try_in_loop, loop_in_try, break_inside_nested_loops])
def test_a_break_inside_a_try_or_with_block_inside_a_loop_matches_eager(capsys, fn):
    make = lambda: (torch.arange(3.0).requires_grad_(),)       # noqa: E731
    run_both(fn, make, capsys)
    report = minidynamo.explain(fn)(*make())
    assert report.fallback_count == 0 and report.graph_break_count >= 2, report.reasons


def an_uncaught_raise_inside_a_with_block_in_a_loop(x):
    for i in range(3):
        with Logged():
            x = x + 1
            print("in", i)
            if i == 1:
                raise ValueError(i)
    return x


@pytest.mark.parametrize("fn, raises", [(user_block_in_loop, None),
                                        (an_uncaught_raise_inside_a_with_block_in_a_loop, ValueError)])
def test_a_user_block_inside_a_loop_enters_and_exits_as_in_eager(capsys, fn, raises):
    opt = minidynamo.optimize("eager")(fn)
    seen = []
    for run in (fn, opt, opt):
        EVENTS.clear()
        try:
            result = ("returned", run(torch.arange(3.0)).tolist())
        except Exception as error:               # noqa: BLE001 (compared with eager's)
            result = ("raised", type(error), error.args)
        seen.append((result, list(EVENTS), capsys.readouterr().out))
    assert seen[0] == seen[1] == seen[2]
    assert (seen[0][0][0] == "raised") == (raises is not None)
    if raises is None:      # (the swallowed KeyError's iteration runs eagerly: a raise the trace
        report = minidynamo.explain(fn)(torch.arange(3.0))         # makes reaching an __exit__)
        assert report.graph_break_count >= 2, report.reasons
        assert not any("loop body" in reason for reason in report.reasons), report.reasons


# -- a loop over the caller's list: its real iterator is handed over ------------------------------
@minidynamo.disable
def grow(xs, v):
    """The eager instruction appends to the list being iterated: eager's iterator sees it."""
    if len(xs) < 5:
        xs.append(v + 1.0)


def over_callers_list_growing(x, xs):
    for v in xs:
        x = x * v
        grow(xs, v)
    return x, len(xs)


def enumerate_callers_list(x, xs):
    for i, v in enumerate(xs, 1):
        x = x + v * i
        print("at", i)
    return x


def zip_callers_list_with_a_tuple(x, xs):
    for a, b in zip(xs, (10.0, 20.0, 30.0), strict=True):
        x = x + a * b
        print("pair", a, b)
    return x


def zip_two_callers_lists(x, xs):
    for a, b in zip(xs, xs):
        x = x + a * b
        print("pair", a, b)
    return x


@pytest.mark.parametrize("fn, xs", [(over_callers_list, [torch.ones(2), torch.full((2,), 2.0)]),
                                    (over_callers_list_growing, [1.0, 2.0]),
                                    (enumerate_callers_list, [1.0, 2.0, 3.0]),
                                    (zip_callers_list_with_a_tuple, [1.0, 2.0, 3.0]),
                                    (zip_two_callers_lists, [1.0, 2.0, 3.0])])
def test_a_loop_over_the_callers_list_breaks_with_its_real_iterator(capsys, fn, xs):
    """The iterator reads the caller's list live (an append by the eager instruction is seen):
    the resume function gets a real list iterator over that very list at the same index
    (``iterators.list_iterator_at``), and reads list and index through its ``__reduce__()``."""
    eager_xs, ours_xs = list(xs), list(xs)
    expected = fn(torch.ones(2), eager_xs)
    eager_out = capsys.readouterr().out
    actual = minidynamo.optimize("eager")(fn)(torch.ones(2), ours_xs)
    assert capsys.readouterr().out == eager_out
    torch.testing.assert_close(actual, expected)
    assert len(ours_xs) == len(eager_xs)
    report = minidynamo.explain(fn)(torch.ones(2), list(xs))
    assert report.fallback_count == 0 and report.graph_break_count >= 2, report.reasons


def walks_the_callers_iterator(x, it):
    for v in it:
        x = x + v
        print("v", v)
        if v > 1:
            break
    return x


def test_an_iterator_the_caller_holds_is_advanced_as_in_eager(capsys):
    """Only the loop's own iterator is handed over as a list iterator the trace walks: one the
    caller passed in is its own object, which eager's loop advances (the caller sees it)."""
    eager_it, ours_it = iter([1.0, 2.0, 3.0, 4.0]), iter([1.0, 2.0, 3.0, 4.0])
    expected = walks_the_callers_iterator(torch.zeros(1), eager_it)
    eager_out = capsys.readouterr().out
    actual = minidynamo.optimize("eager")(walks_the_callers_iterator)(torch.zeros(1), ours_it)
    assert capsys.readouterr().out == eager_out
    torch.testing.assert_close(actual, expected)
    assert list(ours_it) == list(eager_it) == [3.0, 4.0]



# -- a loop over the caller's dict ----------------------------------------------------------------
def over_callers_dict_items(x, d):
    for k, v in d.items():
        x = x + v
        print("key", k)
    return x


def over_callers_dict_reversed_keys(x, d):
    for k in reversed(d):
        x = x * d[k]
        print("key", k)
    return x


def over_callers_dict_values(x, d):
    for v in d.values():
        x = x - v
        print("value")
    return x


def change_then_print(d, k, change):
    """Changes the dict the caller's loop walks (traced: the change is the trace's), then breaks."""
    if k == "a":
        change(d)
    print("changed", k)


def walks_and_changes(x, d, change):
    for k, v in d.items():
        x = x + v
        change_then_print(d, k, change)
    return x


def _renew(d):
    d.pop("b")
    d["z"] = 5.0


CHANGES = {"a later value": lambda d: d.update(c=d["c"] * 10),      # the loop reads it live
           "grown": lambda d: d.update(new=1.0),                      # eager's next step raises
           "other keys, same size": _renew}                           # eager walks on by position


def outcome(fn, x, d):
    try:
        return fn(x, d), None
    except RuntimeError as error:
        return None, str(error)


@pytest.mark.parametrize("fn", [over_callers_dict_items, over_callers_dict_reversed_keys, over_callers_dict_values,
                                *(functools.partial(walks_and_changes, change=c) for c in CHANGES.values())],
                         ids=["items", "reversed keys", "values", *CHANGES])
def test_a_loop_over_the_callers_dict_breaks_with_its_real_iterator(capsys, fn):
    """The loop's iterator over the caller's dict is handed over as a DictWalk: the real iterator,
    made before the breaking instruction (which may change the dict: eager's next step sees that,
    or raises), and the dict with the keys left, so the resume function's trace walks that very
    dict (values read live).  The frame is captured, not run eagerly, and every call matches."""
    def fresh():
        return {"a": torch.tensor(1.0), "b": torch.tensor(2.0), "c": torch.tensor(3.0)}

    compiled = minidynamo.optimize("eager")(fn)
    for call in range(3):
        eager_d, ours_d = fresh(), fresh()
        expected, eager_error = outcome(fn, torch.ones(2), eager_d)
        eager_out = capsys.readouterr().out
        actual, error = outcome(compiled, torch.ones(2), ours_d)
        assert capsys.readouterr().out == eager_out
        assert error == eager_error
        if expected is not None:
            torch.testing.assert_close(actual, expected)
        assert list(ours_d) == list(eager_d)
        for key in eager_d:
            torch.testing.assert_close(torch.as_tensor(ours_d[key]), torch.as_tensor(eager_d[key]))
    report = minidynamo.explain(lambda x, d: outcome(fn, x, d))(torch.ones(2), fresh())
    assert report.graph_break_count >= 2
    if fn is over_callers_dict_items:
        assert report.fallback_count == 0, report.reasons


def test_another_dict_on_a_later_call_is_walked_as_it_is():
    """The resume function's guard compares the keys left: a dict with other keys (or order)
    recompiles, and each call still walks its own dict."""
    compiled = minidynamo.optimize("eager")(over_callers_dict_items)
    for d in ({"a": 1.0, "b": 2.0}, {"b": 2.0, "a": 1.0}, {"a": 1.0, "b": 2.0, "c": 4.0}, {"a": 1.0, "b": 2.0}):
        x = torch.zeros(1)
        torch.testing.assert_close(compiled(x, dict(d)), over_callers_dict_items(x, dict(d)))


class ChangesTheDict:
    """A file for print whose first write changes the dict the loop walks: the breaking
    instruction itself (print, run eagerly) changes it, between the graph and the resume."""

    def __init__(self, d, change):
        self.d, self.change, self.writes = d, change, 0

    def write(self, text):
        self.writes += 1
        if self.writes == 1:
            self.change(self.d)


def walks_and_prints_to(x, d, file):
    for k, v in d.items():
        x = x + v
        print(k, file=file)
    return x


def _delete_and_add_back(d):
    first, second = d.pop("a"), d.pop("b")
    d["a"], d["b"] = first, second


@pytest.mark.parametrize("change", [lambda d: d.update(z=7.0),                     # size: eager raises
                                    lambda d: d.update(c=100.0),                   # a later value
                                    lambda d: (d.pop("b"), d.update(z=5.0)),       # same size, other keys
                                    _delete_and_add_back])                         # "keys changed" error
def test_a_break_that_changes_the_callers_dict_under_the_loop(change):
    compiled = minidynamo.optimize("eager")(walks_and_prints_to)
    for call in range(2):
        results = []
        for fn in (walks_and_prints_to, compiled):
            d = {"a": 1.0, "b": 2.0, "c": 3.0}
            try:
                results.append((fn(torch.zeros(1), d, ChangesTheDict(d, change)).item(), list(d.items())))
            except RuntimeError as error:
                results.append((str(error), list(d.items())))
        assert results[0] == results[1]

"""Python patterns real models use: generator expressions consumed by builtins, try/except
around traced code, slices of nn.Sequential/ModuleList, attribute stores on plain objects.
Each is compared with eager; each has its sound limit tested next to it."""

import collections
import enum
import operator

import pytest
import torch
from torch import nn

import minidynamo
from minidynamo.exc import Unsupported

from .helpers import assert_same, check, run_traced

x = torch.randn(2, 4)


# ---------------------------------------------------------------- generator expressions

def test_generator_expressions_consumed_by_builtins():
    def f(a, ts):
        big = any(d > 3 for d in a.shape)
        small = all(t.dim() == 2 for t in ts)
        doubled = tuple(t * 2 for t in ts)
        names = sorted(str(i) for i in range(3))
        table = dict((str(i), t) for i, t in enumerate(ts))
        return a + int(big) + int(small), doubled, names, table, max(t.shape[0] for t in ts), list(t.sum() for t in ts)
    check(f, x, [x, x + 1])


def test_any_all_stop_where_cpython_stops():
    def f(a, xs):
        # CPython stops at the first true item, so the None is never compared
        return a * any(v > 1 for v in xs), a + all(v > 5 for v in xs)
    check(f, x, [1, 2, None])


def test_generator_expression_reads_its_closure_when_consumed():
    def f(a):
        n = 1
        gen = (a * n for _ in range(2))
        n = 3
        return tuple(gen)
    check(f, x)


def test_generator_expression_unpacked_is_consumed_whole_first():
    """``f(*gen)`` (torch's parametrizations), ``[*gen]`` and ``a, b = gen``: CPython makes the
    whole tuple before the call, so the body runs first, in order."""
    def f(a, log):
        def g(*ts):
            log.append(len(ts))
            return sum(ts)
        out = g(*(a * i for i in range(3)))
        first, second = (a + i for i in range(2))
        return out, [*(t.cos() for t in (first, second))], log
    check(f, x, [])


def test_generator_expression_iterated_by_the_program():
    """A for loop pulls a generator expression one item at a time, like any generator
    (tests/tracer/test_generator_functions.py)."""
    def iterated(a):
        total = a
        for t in (a * i for i in range(3)):
            total = total + t
        return total
    check(iterated, x)


def test_generator_expression_the_program_returns_is_refused():
    def returned(a):
        return (a * i for i in range(3))

    with pytest.raises(Unsupported, match="returning GeneratorExpressionVariable"):
        run_traced(returned, x)


# ---------------------------------------------------------------- try / except

def test_try_body_that_raises_nothing_is_traced():
    def f(a, d):
        try:
            n = d["k"]
        except KeyError:
            n = 2
        try:
            b = a.relu() * n           # tensor ops: the handler cannot catch kernel errors
        except (AttributeError, KeyError):
            b = a
        return b
    check(f, x, {"k": 4})


def _index_or_sum(handler):
    def by_exception(a, idx):
        try:
            return a[idx] * 2
        except Exception:
            return a.sum()

    def by_index_error(a, idx):
        try:
            return a[idx] * 2
        except (IndexError, RuntimeError):
            return a.sum()

    def by_inlined_call(a, idx):       # the handler is the caller's; the kernel runs in the callee
        def pick(t, i):
            return t[i] * 2
        try:
            return pick(a, idx)
        except IndexError:
            return a.sum()
    def by_bare_except(a, idx):
        try:
            return a[idx] * 2
        except:  # noqa: E722
            return a.sum()

    def by_base_exception(a, idx):
        try:
            return a[idx] * 2
        except BaseException:
            return a.sum()

    def by_outer_handler(a, idx):      # the inner handler cannot see the kernel's error, the outer can
        try:
            try:
                return a[idx] * 2
            except KeyError:
                return a
        except:  # noqa: E722
            return a.sum()
    return {"Exception": by_exception, "IndexError": by_index_error, "inlined": by_inlined_call,
            "bare": by_bare_except, "BaseException": by_base_exception, "outer": by_outer_handler}[handler]


@pytest.mark.parametrize("handler", ["Exception", "IndexError", "inlined", "bare", "BaseException", "outer"])
def test_try_around_tensor_ops_is_traced_when_a_rerun_reproduces_the_handler(handler):
    # the graph changes nothing in place: if a kernel raises at run time the compiled code
    # re-runs the frame eagerly, and Python runs the handler itself (a KeyboardInterrupt is not
    # re-run: it leaves the state of an interrupt that came before the frame, see try_blocks.py)
    fn = _index_or_sum(handler)
    compiled = minidynamo.optimize("eager")(fn)
    minidynamo.counters.reset()
    a = torch.randn(5)
    for idx in (torch.tensor([1, 3]), torch.tensor([7, 0]), torch.tensor([0, 2])):   # 7: out of range
        assert_same(compiled(a, idx), fn(a, idx))
    assert minidynamo.counters["fallbacks"] == 0
    assert minidynamo.counters["compiles"] == 1
    assert minidynamo.counters["graph_errors_rerun"] == 1


def test_finally_around_tensor_ops_runs_on_the_graph_and_again_when_a_kernel_raises():
    log = []

    def f(a, idx):
        try:
            out = a[idx] * 2
        finally:
            log.append("finally")
        return out

    compiled = minidynamo.optimize("eager")(f)
    minidynamo.counters.reset()
    a = torch.randn(5)
    assert_same(compiled(a, torch.tensor([1, 3])), f(a, torch.tensor([1, 3])))
    for call in (compiled, f):         # eager's IndexError, after its finally ran once
        with pytest.raises(IndexError):
            call(a, torch.tensor([7, 0]))
    assert log == ["finally"] * 4
    assert minidynamo.counters["fallbacks"] == 0 and minidynamo.counters["compiles"] == 1
    assert minidynamo.counters["graph_errors_rerun"] == 1


def test_try_around_tensor_ops_is_refused_when_the_graph_cannot_be_rerun():
    def f(a, idx):
        a.add_(1)                      # a re-run would add twice
        try:
            return a[idx]
        except IndexError:
            return a.sum()
    with pytest.raises(Unsupported, match="cannot be re-run"):
        run_traced(f, torch.randn(5), torch.tensor([1]))

    def random(a):
        try:
            return a + torch.rand(3)   # a re-run draws again: the generator is rewound first
        except RuntimeError:
            return a
    capture, _ = run_traced(random, torch.randn(3))
    assert capture.graph_effects is None and capture.rewind_devices == {torch.device("cpu")}

    def finally_(a):
        try:
            a.mul_(2)                  # the finally would run after a partial graph
        finally:
            a.add_(1)
        return a
    with pytest.raises(Unsupported, match="cannot be re-run"):
        run_traced(finally_, torch.randn(3))


# ---------------------------------------------------------------- module containers

def test_slices_of_sequential_and_module_list():
    torch.manual_seed(0)
    seq = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 3))
    blocks = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])

    def f(a):
        for block in blocks[1:]:
            a = block(a)
        return seq[:2](a), seq[::2](a), seq[-1:](a)
    capture = check(f, x)
    assert len([n for n in capture.graph_module.graph.nodes if n.op == "placeholder"]) == 1 + 2 * 2 + 2 * 2


def test_sequential_from_an_ordered_dict():
    torch.manual_seed(0)
    body = nn.Sequential(collections.OrderedDict(first=nn.Linear(4, 4), act=nn.ReLU(), last=nn.Linear(4, 2)))

    def f(a):
        return body(a), body[0](a), body.last(a), body[1:](a)
    check(f, x)


# ---------------------------------------------------------------- plain objects

class Counter:
    def __init__(self):
        self.steps = 0


def test_attribute_store_on_a_plain_object_is_replayed():
    def f(a, c):
        c.steps = c.steps + 1
        c.last = a * 2
        return a * c.steps
    check(f, x, Counter())


def test_attribute_store_next_to_another_object_of_its_type_sees_their_identity():
    def f(a, c, d):
        c.steps = c.steps + 1
        return a * d.steps
    check(f, x, Counter(), Counter())       # two objects: d.steps is d's own
    shared = Counter()
    check(f, x, shared, shared)             # one object: d.steps is the value just stored


def test_attribute_store_through_a_descriptor_or_a_property_setter_is_traced():
    class Descriptor:
        def __get__(self, obj, owner=None):
            return 1

        def __set__(self, obj, value):
            obj.__dict__["seen"] = value

    class WithDescriptor:
        steps = Descriptor()

    class WithProperty:
        @property
        def steps(self):
            return 1

        @steps.setter
        def steps(self, value):
            self.seen = value

    def f(a, c):
        c.steps = 3
        return a
    for kind in (WithDescriptor, WithProperty):     # the setter's store, replayed on the object
        capture, _ = run_traced(f, x, c := kind())
        capture.build_output(capture.graph_module(*capture.example_inputs), f, x, c)
        assert c.seen == 3


class Slotted:
    __slots__ = ("steps", "last")

    def __init__(self):
        self.steps = 0


def test_slot_stores_and_deletions_are_replayed():
    def f(a, c):
        c.steps += 1
        c.last = a * c.steps
        del c.steps
        gone = not hasattr(c, "steps")
        c.steps = 10
        return c.last + gone
    eager, traced = Slotted(), Slotted()
    expected = f(x, eager)
    _, got = run_traced(f, x, traced)     # (runs the graph and replays its stores on ``traced``)
    assert torch.equal(got, expected)
    assert traced.steps == eager.steps == 10 and torch.equal(traced.last, eager.last)


# ---------------------------------------------------------------- ops without a meta kernel

def test_multihead_attention_fast_path_runs_on_dummy_values():
    torch.manual_seed(0)
    attention = nn.MultiheadAttention(8, 2, batch_first=True).eval()
    q = torch.randn(2, 5, 8)

    def f(a):
        return attention(a, a, a, need_weights=False)
    with torch.no_grad():
        capture = check(f, q)
    targets = [n.target for n in capture.graph_module.graph.nodes if n.op == "call_function"]
    assert torch._native_multi_head_attention in targets        # the fast path, as in eager


def test_ops_with_data_dependent_outputs_never_run_on_dummies():
    from minidynamo.tracer.meta import _shape_only_aten_op

    assert _shape_only_aten_op(torch.nonzero) is None            # tagged dynamic_output_shape
    assert _shape_only_aten_op(torch._native_multi_head_attention) is not None


# ---------------------------------------------------------------- small Python rules

def test_three_argument_pow_and_complex_fold_on_numbers():
    def f(a, n):
        return a * pow(n, 4, 5) + complex(n, 2).imag, pow(a, 2), complex("1+2j"), pow(2, -1, 7)
    capture = check(f, x, 3)
    assert not [n for n in capture.graph_module.graph.nodes if n.op == "call_function" and n.target is pow]


def test_number_plus_equals_tensor_is_an_addition():
    def f(a):
        total = 0
        total += a                   # int has no __iadd__: Python computes 0 + a
        total += a
        return total
    check(f, x)


def test_typing_subscripts_are_built_at_trace_time():
    from typing import List

    def f(a):
        parts = torch.jit.annotate(List[torch.Tensor], [])
        parts.append(a)
        return torch.cat(parts)
    check(f, x)


def test_autocast_switched_off_inside_the_trace():
    def f(a):
        with torch.autocast("cpu", enabled=False):
            b = a @ a.T
        return b + 1
    capture = check(f, x)
    with torch.autocast("cpu", dtype=torch.bfloat16):   # the graph switches a caller's autocast off too
        expected = f(x)
        (got,) = capture.graph_module(*capture.example_inputs)
    assert got.dtype == expected.dtype == torch.float32 and torch.equal(got, expected)
    _, got = run_traced(lambda a: _autocast_on(a), x)       # a region turned on: its dtypes
    assert got.dtype == torch.bfloat16 and torch.equal(got, _autocast_on(x))
    with pytest.raises(Unsupported, match="only CPU regions"):
        run_traced(lambda a: _cuda_region(a), x)


def _autocast_on(a):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        return a @ a.T


def _cuda_region(a):
    with torch.autocast("cuda", dtype=torch.float16):
        return a @ a.T


def test_tracing_under_autocast_gives_its_dtypes():
    with torch.autocast("cpu", dtype=torch.bfloat16):
        _, got = run_traced(lambda a: a @ a.T, x)
        assert got.dtype == torch.bfloat16 and torch.equal(got, x @ x.T)


# ---------------------------------------------------------------- lists made by the trace

class KeepsPyramid(nn.Module):
    def forward(self, a):
        self.levels = [a]
        self.levels.append(a * 2)      # mutated after the store: the module sees the final list
        return self.levels


def test_a_list_stored_on_a_module_is_the_list_returned():
    module = KeepsPyramid()
    got = run_traced(module, x)[1]
    assert got is module.levels and len(got) == 2
    torch.testing.assert_close(got[1], x * 2)


def test_one_list_returned_twice_is_one_object():
    def f(a):
        parts = [a + 1]
        return parts, {"parts": parts}
    _, (first, table) = run_traced(f, x)
    assert first is table["parts"]


# ---------------------------------------------------------------- partial, sorted, sets, str.join

SCALED_GELU = __import__("functools").partial(torch.nn.functional.gelu, approximate="tanh")


def test_functools_partial_made_in_the_trace_or_read_from_a_global():
    import functools

    def f(a):
        act = functools.partial(torch.nn.functional.leaky_relu, negative_slope=0.2)
        first = act(a)
        act.keywords["negative_slope"] = 0.5       # the partial sees its own dict change
        return first, act(a), SCALED_GELU(a), act.keywords["negative_slope"]
    check(f, x)


def test_sorted_with_a_key_over_tensors_set_operators_and_join():
    def f(a, b):
        ordered = sorted([a, b], key=lambda t: t.shape[0], reverse=True)
        kinds = {1, 2} | {3}
        label = ",".join(str(d) for d in a.shape)
        return ordered, len(kinds - {1}), label, sorted({3, 1, 2})
    check(f, torch.randn(2, 3), torch.randn(4, 3))


def test_a_real_partials_keywords_are_guarded():
    import functools

    from guards import build_guard_function

    act = functools.partial(torch.nn.functional.leaky_relu, negative_slope=0.2)

    def f(a, fn):
        return fn(a)
    capture, got = run_traced(f, x, act)
    torch.testing.assert_close(got, f(x, act))
    guard_fn = build_guard_function(capture.guards, capture.frame)
    assert guard_fn(f, x, act)
    act.keywords["inplace"] = False            # same object, new keyword: must not pass
    assert not guard_fn(f, x, act)
    act.keywords.pop("inplace")
    act.keywords["negative_slope"] = 0.3       # same keys, new value: must not pass
    assert not guard_fn(f, x, act)


def scaled(a, scale, shift=0.0):
    return a * scale + shift


def partials_across_a_break(a):
    import functools

    first = functools.partial(scaled, scale=2.0)
    second = functools.partial(scaled, a, shift=1.0)
    print("a break while both live")
    return first(a), second(3.0), functools.partial(scaled, scale=a.shape[0]), first


def test_a_partial_made_in_the_frame_lives_on_past_a_break_and_is_returned(capsys):
    """A partial the frame makes is rebuilt where it leaves the trace (handed to the resume
    function, returned): it was a fallback of the whole frame.  The resume function guards the
    partial it gets by what it holds, not by identity (each call makes a new one): no recompile."""
    minidynamo.reset()
    compiled = minidynamo.optimize("eager")(partials_across_a_break)
    for _ in range(3):
        a = torch.randn(4)
        got, expected = compiled(a), partials_across_a_break(a)
        assert_same(got[:2], expected[:2])
        for made, eager in zip(got[2:], expected[2:]):
            assert type(made) is type(eager) and made.func is eager.func and made.keywords == eager.keywords
    assert not minidynamo.counters["fallback_reasons"] and minidynamo.counters["graph_breaks"] == 1
    assert minidynamo.counters["compiles"] == 2       # the frame and its resume function, once each


def test_partials_passed_in_are_guarded_by_what_they_hold():
    import functools

    def f(a, p, q):
        return p(a) + q(a), p is q
    minidynamo.reset()
    compiled = minidynamo.optimize("eager")(f)
    one, other = functools.partial(scaled, scale=2.0), functools.partial(scaled, scale=2.0)
    for p, q in ((one, other), (other, one), (one, one), (one, functools.partial(scaled, scale=3.0))):
        assert_same(compiled(x, p, q), f(x, p, q))
    assert minidynamo.counters["compiles"] == 3       # (one, other) and (other, one) share a graph


# ---------------------------------------------------------------- enum lookups by value

class Color(enum.Enum):
    RED = 1
    BLUE = 2


class Mode(enum.Enum):
    A = "a"
    B = "b"

    @classmethod
    def _missing_(cls, value):
        return cls.A


def test_an_enum_member_looked_up_by_value_is_a_constant():
    """``Color(v)`` answers the member from the class's value table (was a graph break); a
    value the table lacks (a ``_missing_`` hook, or eager's ValueError) runs as eager does."""
    def f(a, v, m):
        c = Color(v)
        return a * c.value + (Mode(m) is Mode.A), c.name, Color(c) is c

    minidynamo.reset()
    compiled = minidynamo.optimize("eager")(f)
    for v, m in ((1, "a"), (2, "b"), (1, "zz"), (2, "a")):
        assert_same(compiled(x, v, m), f(x, v, m))
    report = minidynamo.explain(f)(x, 2, "b")
    assert (report.graph_count, report.graph_break_count) == (1, 0), report.reasons
    with pytest.raises(ValueError, match="5 is not a valid Color"):
        compiled(x, 5, "a")


# ---------------------------------------------------------------- operator.length_hint of iterators

def test_length_hint_of_iterators_is_what_their_types_answer():
    """An iterator's ``__length_hint__`` (the items left; the live list's length now; 0 once a
    dict grew under it), and the default for types without one (enumerate, generators): was a
    graph break."""
    def f(a, xs):
        it = iter(xs)
        next(it)
        r = reversed(xs)
        next(r)
        d = {"a": 1, "b": 2}
        di = iter(d.items())
        next(di)
        rg = iter(range(5))
        next(rg)
        e, g = enumerate(xs), (v for v in xs)
        hints = [operator.length_hint(o) for o in (it, r, di, iter((1, 2, 3)), rg, e, g)]
        hints += [operator.length_hint(e, 7), operator.length_hint(iter("héllo"))]
        xs.append(5)
        d["c"] = 3
        hints += [operator.length_hint(it), operator.length_hint(di)]
        return a * sum(hints), hints

    minidynamo.reset()
    assert_same(minidynamo.optimize("eager")(f)(x, [1, 2, 3]), f(x, [1, 2, 3]))
    report = minidynamo.explain(f)(x, [1, 2, 3])
    assert (report.graph_count, report.graph_break_count) == (1, 0), report.reasons


def test_str_and_format_of_a_dict_of_constants_fold():
    """``str(d)``, ``repr(d)`` and ``f"{d}"`` of a dict whose values are constants (a caller's
    number read, and guarded, as in ``str(list)``): was a graph break each."""
    def f(a, n):
        d = {"a": n, "b": 2}
        od = collections.OrderedDict(z=1)
        return a + len(str(d)) + len(repr(od)) + len(f"{d}!"), str(d)

    minidynamo.reset()
    compiled = minidynamo.optimize("eager")(f)
    for n in (5, 123, 5):
        assert_same(compiled(x, n), f(x, n))
    report = minidynamo.explain(f)(x, 7)
    assert (report.graph_count, report.graph_break_count) == (1, 0), report.reasons

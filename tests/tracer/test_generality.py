"""Python patterns real models use: generator expressions consumed by builtins, try/except
around traced code, slices of nn.Sequential/ModuleList, attribute stores on plain objects.
Each is compared with eager; each has its sound limit tested next to it."""

import collections

import pytest
import torch
from torch import nn

from minidynamo.exc import Unsupported

from .helpers import check, run_traced

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


def test_generator_expression_the_program_keeps_is_refused():
    def iterated(a):
        total = a
        for t in (a * i for i in range(3)):
            total = total + t
        return total

    def returned(a):
        return (a * i for i in range(3))

    for fn in (iterated, returned):
        with pytest.raises(Unsupported):
            run_traced(fn, x)


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


@pytest.mark.parametrize("handler", ["Exception", "RuntimeError", "bare", "finally", "outer"])
def test_try_around_tensor_ops_whose_handler_could_catch_kernel_errors_is_refused(handler):
    def by_exception(a):
        try:
            return a @ a.T
        except Exception:
            return a

    def by_runtime_error(a):
        try:
            return a @ a.T
        except RuntimeError:
            return a

    def bare(a):
        try:
            return a @ a.T
        except:  # noqa: E722
            return a

    def finally_(a):
        out = []
        try:
            out.append(a @ a.T)
        finally:
            out.append(a)
        return out

    def outer(a):                      # the inner handler is safe, the outer one is not
        try:
            try:
                return a @ a.T
            except KeyError:
                return a
        except RuntimeError:
            return a
    fn = {"Exception": by_exception, "RuntimeError": by_runtime_error, "bare": bare, "finally": finally_,
          "outer": outer}[handler]
    with pytest.raises(Unsupported, match="try"):
        run_traced(fn, x)


def test_try_around_an_inlined_call_checks_the_callers_handler():
    def helper(a):
        return a.exp()

    def f(a):
        try:
            return helper(a)
        except ValueError:
            return a
    with pytest.raises(Unsupported, match="try"):
        run_traced(f, x)


def test_exception_raised_in_a_try_body_still_falls_back():
    def f(a):
        try:
            raise KeyError("k")
        except KeyError:
            return a
    with pytest.raises(Unsupported):
        run_traced(f, x)


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


def test_attribute_store_through_a_property_is_refused():
    class WithProperty:
        @property
        def steps(self):
            return 1

        @steps.setter
        def steps(self, value):
            pass

    def f(a, c):
        c.steps = 3
        return a
    with pytest.raises(Unsupported, match="descriptor"):
        run_traced(f, x, WithProperty())


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
    with pytest.raises(Unsupported, match="autocast"):
        run_traced(lambda a: _autocast_on(a), x)


def _autocast_on(a):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        return a @ a.T


def test_tracing_under_autocast_is_refused():
    with torch.autocast("cpu", dtype=torch.bfloat16):
        with pytest.raises(Unsupported, match="autocast"):
            run_traced(lambda a: a @ a.T, x)


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

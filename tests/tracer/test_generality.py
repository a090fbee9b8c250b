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

    def summed(a):                    # the corpus keeps sum(genexpr) a fallback
        return sum(a * i for i in range(3))
    for fn in (iterated, returned, summed):
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


def test_attribute_store_next_to_another_object_of_its_type_is_refused():
    def f(a, c, d):
        c.steps = c.steps + 1
        return a * d.steps
    with pytest.raises(Unsupported, match="aliasing"):
        run_traced(f, x, Counter(), Counter())


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

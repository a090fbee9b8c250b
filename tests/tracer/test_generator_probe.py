"""Adversarial probes of traced generator functions (variables/generators.py): each program runs
eagerly and compiled (backends "eager" and "torchxla_trace_once") on state of its own, call by
call with state changed between calls, and the results, printed output, the caller-visible
state afterwards (lists, dicts, attributes, module buffers, tensors written in place) and the
exceptions raised must all be the same.  Programs that fall back to eager only need to agree."""

import itertools
import os
import sys

import pytest
import torch
from torch import nn

import minidynamo

from .twins import Globals, compare, run_twins, with_globals

BACKENDS = ["eager", "torchxla_trace_once"]


@pytest.fixture(autouse=True)
def _fresh():
    minidynamo.reset()
    yield
    minidynamo.reset()


# -- the harness (tests/tracer/twins.py) -------------------------------------------------------
REASONS: list = []      # PROBE_DEBUG=1: every fallback/break reason seen, printed at the end


def run(make, calls, backend, label=""):
    """``make()`` -> (program, state); ``calls``: functions of the state giving each call's
    arguments (they may change the state first).  Each twin gets a fresh (program, state);
    modules are compared whole (training flag, state dict)."""
    eager, ours, counts = run_twins(make, calls, backend, modules_whole=True)
    reasons = counts["fallback_reasons"] + counts["break_reasons"]
    REASONS.extend(reasons)
    if os.environ.get("PROBE_DEBUG"):
        print(f"\nPROBE {label} compiles={counts.get('compiles', 0)} fallbacks={counts.get('fallbacks', 0)} "
              f"breaks={counts.get('graph_breaks', 0)} {reasons[:3]}", file=sys.__stderr__)
    compare(eager, ours)
    return counts


def xs(n=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, generator=g)


CASES = {}


def case(fn):
    """Register ``fn() -> (make, calls)`` under its name."""
    CASES[fn.__name__] = fn
    return fn


def simple(program, state_factory, argsets):
    """A case whose state is a dict from ``state_factory()`` and whose calls pass
    ``argset(state)``."""
    def make():
        return program, state_factory()
    return make, argsets


X = [torch.arange(3.0) * (i + 1) - 1 for i in range(4)]


def per_call(*argsets):
    """Calls ``lambda st: argset(st)`` for argsets given as functions of (state, call index)."""
    return [lambda st, i=i, a=a: a(st, i) for i, a in enumerate(argsets)]


def repeat(argset, n=3):
    return [lambda st, i=i: argset(st, i) for i in range(n)]


def logged(program):
    """A case whose call i is ``program(X[i], log)``, one caller's list ``log`` kept across the
    calls."""
    return simple(program, lambda: {"log": []}, repeat(lambda st, i: (X[i], st["log"])))


def counted(program, *counts):
    """A case whose call i is ``program(X[i], counts[i], log)``, one caller's list ``log`` kept
    across the calls."""
    return simple(program, lambda: {"log": []},
                  [lambda st, i=i, n=n: (X[i], n, st["log"]) for i, n in enumerate(counts)])


# == interleaving of body side effects with the consumer's =======================================
@case
def body_print_interleaves_with_consumer():
    def gen(x):
        print("g0")
        yield x
        print("g1")
        yield x + 1
        print("g2")

    def f(x):
        out = []
        for t in gen(x):
            print("c")
            out.append(t * 2)
        return out

    return simple(f, dict, repeat(lambda st, i: (X[i],)))


@case
def body_appends_to_caller_list_between_consumer_appends():
    def gen(x, log):
        for i in range(3):
            log.append(("g", i))
            yield x * i

    def f(x, log):
        g = gen(x, log)
        a = next(g)
        log.append("c1")
        b = next(g)
        log.append(len(log))
        return a + b

    return logged(f)


@case
def body_inplace_tensor_op_seen_by_consumer():
    def gen(x):
        for _ in range(3):
            x.add_(1)
            yield x.clone()

    def f(x):
        outs = []
        for t in gen(x):
            outs.append(t + x)          # x already changed by the body
            x.mul_(2)                   # the next body step sees this
        return outs

    return simple(f, lambda: {"x": torch.ones(3)}, repeat(lambda st, i: (st["x"],)))


@case
def body_yields_view_consumer_writes_through():
    def gen(x):
        yield x[0]
        yield x[1:]

    def f(x):
        g = gen(x)
        v = next(g)
        x.mul_(3)
        w = next(g)
        w.add_(1)
        return v * 1, x.sum()

    return simple(f, lambda: {"x": torch.arange(4.0)}, repeat(lambda st, i: (st["x"],)))


@case
def body_stores_attributes_on_self():
    class Obj:
        def __init__(self):
            self.n = 0
            self.last = None

        def items(self, x):
            for i in range(3):
                self.n += 1
                self.last = i
                yield x * self.n

    def f(o, x):
        g = o.items(x)
        a = next(g)
        o.n = o.n * 10
        b = next(g)
        return a, b, o.last

    return simple(f, lambda: {"o": Obj()}, repeat(lambda st, i: (st["o"], X[i])))


@case
def body_and_consumer_write_one_dict():
    def gen(d):
        for k in ("a", "b", "c"):
            d[k] = d.get(k, 0) + 1
            yield k

    def f(x, d):
        keys = []
        for k in gen(d):
            d[k] = d[k] * 10
            keys.append(k)
            if k == "b":
                break
        return x * len(d), keys

    return simple(f, lambda: {"d": {"a": 1}}, repeat(lambda st, i: (X[i], st["d"])))


# == closures, cells and globals read lazily ======================================================
@case
def closure_reassigned_between_pulls():
    def f(x):
        k = 1

        def gen():
            while True:
                yield x * k

        g = gen()
        a = next(g)
        k = 2
        b = next(g)
        k = k + 5
        return a, b, next(g)

    return simple(f, dict, repeat(lambda st, i: (X[i],)))


@case
def nonlocal_written_by_body_read_by_consumer():
    def f(x):
        count = 0

        def gen():
            nonlocal count
            for i in range(4):
                count += 1
                yield x + count

        seen = []
        for t in gen():
            seen.append(count)
            if count == 2:
                count = 10
        return seen, t, count

    return simple(f, dict, repeat(lambda st, i: (X[i],)))


@case
def genexpr_reads_free_variable_lazily():
    def f(x):
        a = 1
        g = (x * a + i for i in range(3))
        first = next(g)
        a = 100
        return first, list(g)

    return simple(f, dict, repeat(lambda st, i: (X[i],)))


@case
def genexpr_first_iterable_evaluated_at_creation():
    def f(x, n):
        g = (x * i for i in range(n))
        n = n + 5
        return list(g), n

    return simple(f, dict, repeat(lambda st, i: (X[i], i + 1)))


@case
def genexpr_over_list_consumer_rebinds_and_mutates():
    def f(x):
        lst = [1, 2]
        g = (x * v for v in lst)
        a = next(g)
        lst.append(3)         # the genexpr's iterator sees the append
        lst = [100]           # but not the rebinding
        return a, list(g)

    return simple(f, dict, repeat(lambda st, i: (X[i],)))


def _read_scale(x):
    for _ in range(3):
        yield x * SCALE          # noqa: F821 (a global of the twin's namespace)


def _global_rebinder(x):
    global SCALE
    g = _read_scale(x)
    a = next(g)
    SCALE = SCALE + 1
    b = next(g)
    return a, b, SCALE


@case
def global_rebound_between_pulls():
    def make():
        fn, ns = with_globals(_global_rebinder, SCALE=2, _read_scale=_read_scale)
        return fn, {"g": Globals(ns, ["SCALE"]), "ns": ns}

    def call(st, i):
        if i == 2:
            st["ns"]["SCALE"] = -3          # rebound by the caller between calls
        return (X[i],)

    return make, repeat(call, 4)


def _gen_with_default(x, k=2):
    yield x * k
    yield x + k


def _use_default(x):
    return list(_gen_with_default(x))


def changed_between_calls(program, functions, change, at=2, n=4):
    """A case calling ``program`` (on a globals dict of its own holding ``functions``) ``n``
    times, ``change(namespace)`` made by the caller before call ``at``."""
    def make():
        fn, ns = with_globals(program, **functions)
        return fn, {"ns": ns}

    def call(st, i):
        if i == at:
            change(st["ns"])
        return (X[i],)

    return make, repeat(call, n)


@case
def generator_defaults_changed_between_calls():
    return changed_between_calls(_use_default, {"_gen_with_default": _gen_with_default},
                                 lambda ns: setattr(ns["_gen_with_default"], "__defaults__", (7,)))


def _gen_a(x):
    yield x + 1


def _gen_b(x):
    yield x * 100
    yield x


def _use_gen_a(x):
    return list(_gen_a(x))


@case
def generator_code_swapped_between_calls():
    return changed_between_calls(_use_gen_a, {"_gen_a": _gen_a},
                                 lambda ns: setattr(ns["_gen_a"], "__code__", _gen_b.__code__))


@case
def generator_function_rebound_between_calls():
    return changed_between_calls(_use_gen_a, {"_gen_a": _gen_a},
                                 lambda ns: ns.__setitem__("_gen_a", _gen_b), at=1, n=3)


@case
def generator_closure_cell_changed_between_calls():
    def make():
        k = [2]

        def outer():
            scale = k[0]

            def gen(x):
                yield x * scale
            return gen

        state = {"gen": outer()}

        def f(x, gen):
            return list(gen(x))

        return f, state

    def call(st, i):
        if i == 2:
            st["gen"].__closure__[0].cell_contents = 9
        return (X[i], st["gen"])

    return make, repeat(call, 4)


# == one generator, several consumers; partial consumption ========================================
def _count(x, log, n=5):
    for i in range(n):
        log.append(i)
        yield x * i


@case
def zip_of_the_same_generator():
    def f(x, log):
        g = _count(x, log)
        pairs = [a + b for a, b in zip(g, g)]
        return pairs, next(g, "end")

    return logged(f)


@case
def zip_pulls_the_longer_generator_once_more():
    def f(x, log):
        g = _count(x, log)
        pairs = list(zip(g, range(2)))     # g yields a third item that zip drops
        h = _count(x, log)
        pairs2 = list(zip(range(2), h))    # h is not pulled a third time
        return pairs, next(g), pairs2, next(h)

    return logged(f)


@case
def next_in_a_loop_then_list():
    def f(x, log):
        g = _count(x, log)
        firsts = []
        for _ in range(2):
            firsts.append(next(g))
        return firsts, list(g), list(g)

    return logged(f)


@case
def early_break_then_next():
    def f(x, log):
        g = _count(x, log)
        for t in g:
            if len(log) >= 2:
                break
        return t, next(g), [u.sum() for u in g]

    return logged(f)


@case
def any_all_short_circuit_then_next():
    def f(x, log):
        g = _count(x, log)
        hit = any(t > 1 for t in g)          # stops after pulling 2: g is left paused
        after_any = next(g, None)
        h = _count(x, log)
        every = all(i < 12 for i in (t + len(log) for t in h))
        return x * hit, after_any, every, next(h, "end")

    return simple(f, lambda: {"log": []}, repeat(lambda st, i: (i + 1, st["log"])))


@case
def membership_consumes_up_to_the_match():
    def gen(log):
        for i in range(6):
            log.append(i)
            yield i

    def f(x, log, k):
        g = gen(log)
        found = k in g
        return x * found, next(g, -1)

    return simple(f, lambda: {"log": []}, repeat(lambda st, i: (X[i], st["log"], [2, 9, 0][i])))


@case
def two_genexprs_sharing_one_generator():
    def f(x, log):
        g = _count(x, log, 6)
        a = (t * 2 for t in g)
        b = (t * 3 for t in g)
        return list(zip(a, b)), log[-1]

    return logged(f)


@case
def islice_takewhile_and_chain_of_the_same():
    def f(x, log):
        g = _count(x, log, 8)
        head = list(itertools.islice(g, 2))
        tw = list(itertools.takewhile(lambda t: len(log) < 4, g))   # drops the failing item
        rest = list(itertools.chain(g, g))
        return head, tw, rest

    return logged(f)


@case
def unpacking_too_many_and_star():
    def f(x, log, n):
        a, *rest = _count(x, log, n)
        p, q = _count(x, log, n)
        return a, rest, p, q

    return simple(f, lambda: {"log": []}, per_call(lambda st, i: (X[0], st["log"], 2),
                                                   lambda st, i: (X[1], st["log"], 3),
                                                   lambda st, i: (X[2], st["log"], 1),
                                                   lambda st, i: (X[3], st["log"], 2)))


@case
def len_index_and_truth_of_a_generator():
    def f(x, which):
        g = _count(x, [])
        if which == 0:
            return x * bool(g)
        if which == 1:
            return len(g)
        return g[0]

    return simple(f, dict, per_call(lambda st, i: (X[0], 0), lambda st, i: (X[1], 1),
                                    lambda st, i: (X[2], 2), lambda st, i: (X[3], 0)))


@case
def builtins_over_generators_with_defaults():
    def f(x, n, log):
        return (max(_count(3, log, n), default=-1), min((t for t in _count(1, log, n)), default="e"),
                sorted(_count(2, log, n), reverse=True), dict((i, t) for i, t in enumerate(_count(x, log, n))),
                "".join(str(i) for i in _count(1, log, n)), list(enumerate(_count(x, log, n), start=5)))

    return counted(f, 3, 0, 2)


@case
def generator_created_never_started():
    def gen(x, log):
        log.append("started")
        print("body")
        yield x
        log.append("resumed")

    def f(x, log):
        g = gen(x, log)
        h = gen(x, log)
        next(h)
        return x + 1, type(g).__name__

    return logged(f)


@case
def never_started_generator_with_finally():
    def gen(x, log):
        try:
            yield x
        finally:
            log.append("cleanup")

    def f(x, log):
        g = gen(x, log)
        return x * 2

    return logged(f)


@case
def generators_created_in_a_loop():
    def gen(x, k, log):
        log.append(k)
        yield x * k
        log.append(-k)
        yield x + k

    def f(x, log):
        gens = [gen(x, k, log) for k in range(3)]
        firsts = [next(g) for g in gens]
        seconds = [next(g) for g in reversed(gens)]
        more = []
        for k in range(2):
            g = gen(x, k + 10, log)
            more.append(next(g))
        return firsts, seconds, more

    return logged(f)


@case
def zip_star_of_generators():
    def f(x, log):
        return [sum(col) for col in zip(*(_count(x + k, log, 3) for k in range(3)))]

    return logged(f)


# == exceptions ====================================================================================
@case
def body_raises_consumer_catches_then_next():
    def gen(x, log, d):
        for k in ("a", "b", "c"):
            log.append(k)
            yield x * d[k]

    def f(x, log, d):
        g = gen(x, log, d)
        out = []
        try:
            for t in g:
                out.append(t)
        except KeyError:
            out.append("caught")
        return out, next(g, "exhausted")

    return simple(f, lambda: {"log": [], "d": {"a": 1, "b": 2}},
                  per_call(lambda st, i: (X[0], st["log"], st["d"]),
                           lambda st, i: (X[1], st["log"], {"a": 1, "b": 2, "c": 3}),
                           lambda st, i: (X[2], st["log"], {"a": 1})))


@case
def body_raises_uncaught():
    def gen(x, n):
        yield x
        yield x + [1, 2][n]          # IndexError for n > 1
        yield x + 1

    def f(x, n, log):
        for t in gen(x, n):
            log.append(t)
        return x

    return counted(f, 1, 2, 0)


@case
def generator_catches_its_own_errors():
    def gen(x, items):
        for v in items:
            try:
                y = 10 // v
            except ZeroDivisionError:
                yield x * -1
                continue
            yield x * y

    def f(x, items):
        return list(gen(x, items))

    return simple(f, dict, per_call(lambda st, i: (X[0], [1, 0, 2]), lambda st, i: (X[1], [0, 0]),
                                    lambda st, i: (X[2], [5])))


@case
def stop_iteration_inside_body():
    def gen(x, it):
        yield x
        yield next(it)        # an exhausted iterator: RuntimeError (PEP 479)
        yield x + 1

    def f(x, n):
        it = iter(range(n))
        out = []
        try:
            for t in gen(x, it):
                out.append(t)
        except RuntimeError as e:
            out.append(str(e))
        return out

    return simple(f, dict, per_call(lambda st, i: (X[0], 0), lambda st, i: (X[1], 1), lambda st, i: (X[2], 0)))


@case
def next_of_exhausted_generator_in_consumer():
    def f(x, n, log):
        g = _count(x, log, n)
        a = next(g)
        try:
            b = next(g)
        except StopIteration:
            b = x * 0
        return a, b, next(g)      # eager: StopIteration out of f on the third call

    return counted(f, 3, 1, 2)


@case
def exception_in_nested_generator_caught_by_outer():
    def inner(x, n):
        yield x
        yield x * [1][n]             # IndexError for n > 0
        yield x + 1

    def outer(x, n, log):
        try:
            yield from inner(x, n)
        except IndexError:
            log.append("caught")
            yield x * 100
        yield x - 1

    def f(x, n, log):
        return list(outer(x, n, log))

    return counted(f, 0, 1, 0)


@case
def side_effect_before_raise_is_kept():
    def gen(x, log):
        log.append("a")
        x.add_(1)
        yield x.clone()
        log.append("b")
        x.mul_(2)
        yield {}["boom"]

    def f(x, log):
        try:
            return list(gen(x, log))
        except KeyError:
            log.append("caught")
            return x * 1

    return simple(f, lambda: {"log": [], "x": torch.ones(2)}, repeat(lambda st, i: (st["x"], st["log"])))


@case
def try_finally_generator_fully_consumed():
    def gen(x, log):
        try:
            yield x
            yield x * 2
        finally:
            log.append("finally")

    def f(x, log):
        total = 0
        for t in gen(x, log):
            total = total + t
        return total

    return logged(f)


@case
def try_finally_generator_left_paused():
    def gen(x, log):
        try:
            yield x
            yield x * 2
        finally:
            log.append("finally")

    def f(x, log):
        g = gen(x, log)
        return next(g) + 1

    return logged(f)


@case
def unbound_free_variable_in_body():
    def f(x, flag):
        if flag:
            k = 2

        def gen():
            yield x * k

        try:
            return list(gen())
        except NameError:
            return "unbound"

    return simple(f, dict, per_call(lambda st, i: (X[0], True), lambda st, i: (X[1], False),
                                    lambda st, i: (X[2], True)))


# == yield from, nesting, recursion ===============================================================
@case
def yield_from_return_values():
    def leaf(x, n):
        for i in range(n):
            yield x + i
        return n * 10

    def mid(x, n):
        a = yield from leaf(x, n)
        b = yield from leaf(x, a // 10 + 1)
        return a + b

    def f(x, n):
        out = []

        def top():
            r = yield from mid(x, n)
            out.append(r)
            yield x * r

        return list(top()), out

    return simple(f, dict, per_call(lambda st, i: (X[0], 1), lambda st, i: (X[1], 2), lambda st, i: (X[2], 0)))


@case
def recursive_generator_flatten():
    def walk(t, depth):
        if isinstance(t, (list, tuple)):
            for c in t:
                yield from walk(c, depth + 1)
        else:
            yield t * depth

    def f(x, tree):
        return list(walk(tree(x), 0))

    trees = [lambda x: [x, [x, (x, [x])]], lambda x: (x,), lambda x: [[[]], x]]
    return simple(f, dict, [lambda st, i=i: (X[i], trees[i]) for i in range(3)])


@case
def generator_pulls_from_a_generator_the_consumer_also_pulls():
    def f(x, log):
        h = _count(x, log, 6)

        def g():
            for t in h:
                yield t * 2
                next(h, None)

        gg = g()
        a = next(gg)
        b = next(h)
        c = next(gg)
        return a, b, c, list(h), list(gg)

    return logged(f)


@case
def yield_value_is_none_under_next():
    def gen(x):
        v = yield x
        w = yield (v is None)
        yield w

    def f(x):
        return list(gen(x))

    return simple(f, dict, repeat(lambda st, i: (X[i],)))


# == nn.Module generator methods ==================================================================
class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(3, 3) for _ in range(3)])
        self.register_buffer("calls", torch.zeros(()))
        self.visited = 0

    def children_gen(self):
        yield from self.layers

    def active(self):
        for m in self.layers:
            if m.training:
                self.visited += 1
                yield m

    def forward(self, x):
        for m in self.children_gen():
            x = m(x)
        return x, [m(x).sum() for m in self.active()]


def _stack_state():
    torch.manual_seed(0)
    return {"m": Stack()}


@case
def module_generator_method_with_training_flips():
    def f(m, x):
        return m(x)

    def call(st, i):
        m = st["m"]
        if i == 1:
            m.layers[1].eval()
        if i == 2:
            m.eval()
        if i == 3:
            m.train()
        return (m, X[i])

    return simple(f, _stack_state, repeat(call, 4))


@case
def module_generator_method_with_hooks_added():
    def f(m, x):
        return m(x)

    def call(st, i):
        m = st["m"]
        if i == 1:
            st["h"] = m.layers[0].register_forward_hook(lambda mod, a, out: out * 2)
        if i == 2:
            m.layers[2].register_forward_pre_hook(lambda mod, a: (a[0] + 1,))
        if i == 3:
            st.pop("h").remove()
        return (m, X[i])

    def make():
        st = _stack_state()
        return f, st

    def snapless(st):
        return st

    return make, repeat(call, 4)


@case
def module_generator_method_layers_replaced():
    def f(m, x):
        return m(x)

    def call(st, i):
        m = st["m"]
        if i == 2:
            m.layers.append(nn.Linear(3, 3))
        if i == 3:
            m.layers[0] = nn.Identity()
        return (m, X[i])

    return simple(f, _stack_state, repeat(call, 4))


@case
def module_buffer_written_by_generator_body():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("seen", torch.zeros(3))
            self.lin = nn.Linear(3, 3)

        def steps(self, x):
            for k in range(3):
                self.seen.add_(x)
                yield self.lin(x * k) + self.seen

        def forward(self, x):
            g = self.steps(x)
            a = next(g)
            self.seen.mul_(2)
            return a, next(g), self.seen.clone()

    def make():
        torch.manual_seed(0)
        return (lambda m, x: m(x)), {"m": M()}

    def call(st, i):
        if i == 2:
            st["m"].eval()
        return (st["m"], X[i])

    return make, repeat(call, 4)


@case
def named_parameters_generator_with_requires_grad_flip():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(3, 3)
            self.b = nn.Linear(3, 3)

        def trainable(self):
            for name, p in self.named_parameters():
                if p.requires_grad:
                    yield name, p

        def forward(self, x):
            return x.sum() + sum(p.sum() for _, p in self.trainable()), [n for n, _ in self.trainable()]

    def make():
        torch.manual_seed(0)
        return (lambda m, x: m(x)), {"m": M()}

    def call(st, i):
        if i == 1:
            st["m"].a.weight.requires_grad_(False)
        return (st["m"], X[i])

    return make, repeat(call, 3)


# == generators over tensors, dicts and lists the consumer changes ===============================
@case
def rows_of_a_tensor():
    def rows(x):
        for r in x:
            yield r * 2

    def f(x):
        out = []
        for r in rows(x):
            x[0].add_(1)          # rows already yielded are views: the change shows through them
            out.append(r)
        return out, x

    return simple(f, lambda: {}, repeat(lambda st, i: (torch.arange(6.0).reshape(3, 2) + i,)))


@case
def dict_items_mutated_while_paused():
    def items(d):
        for k, v in d.items():
            yield k, v

    def f(x, d, grow):
        g = items(d)
        k, v = next(g)
        if grow:
            d["new"] = 5
        return x * v, list(g)

    return simple(f, lambda: {"d": {"a": 1, "b": 2}},
                  per_call(lambda st, i: (X[0], dict(st["d"]), False),
                           lambda st, i: (X[1], st["d"], True),
                           lambda st, i: (X[2], {"a": 3}, False)))


@case
def dict_value_changed_while_paused():
    def items(d):
        for k in d:
            yield d[k]

    def f(x, d):
        g = items(d)
        a = next(g)
        d["b"] = d["b"] * 10     # no size change: allowed
        return x * a, list(g)

    return simple(f, lambda: {"d": {"a": 1, "b": 2}}, repeat(lambda st, i: (X[i], st["d"])))


@case
def list_appended_by_consumer_while_paused():
    def walk(lst):
        for v in lst:
            yield v

    def f(x, lst):
        out = []
        for v in walk(lst):
            out.append(x * v)
            if len(lst) < 5:
                lst.append(v + 1)
        return out

    return simple(f, lambda: {"lst": [1]}, per_call(lambda st, i: (X[0], [1]), lambda st, i: (X[1], st["lst"]),
                                                    lambda st, i: (X[2], [3, 4])))


@case
def generator_default_arg_evaluated_at_def_vs_genexpr():
    def f(x, n):
        def gen(k=n):
            yield x * k

        n = n + 1
        ge = (x * m for m in [n])
        n = n + 1
        return list(gen()), list(ge), n

    return simple(f, dict, repeat(lambda st, i: (X[i], i)))


# == grad mode =====================================================================================
@case
def no_grad_around_consumer_not_body_creation():
    def gen(x, w):
        yield x * w
        yield x + w

    def f(x, w):
        g = gen(x, w)
        with torch.no_grad():
            a = next(g)
        b = next(g)
        return a.requires_grad, b.requires_grad, a.detach(), b.detach()

    return simple(f, lambda: {"w": torch.ones(3, requires_grad=True)}, repeat(lambda st, i: (X[i], st["w"])))


@case
def grad_mode_toggled_by_body():
    def gen(x, w):
        torch.set_grad_enabled(False)
        yield x * w
        torch.set_grad_enabled(True)
        yield x * w

    def f(x, w):
        g = gen(x, w)
        a = next(g)
        mid = (x * w).requires_grad
        b = next(g)
        return a.requires_grad, mid, b.requires_grad, torch.is_grad_enabled()

    return simple(f, lambda: {"w": torch.ones(3, requires_grad=True)}, repeat(lambda st, i: (X[i], st["w"])))


@case
def generator_decorated_no_grad():
    @torch.no_grad()
    def gen(x, w):
        yield x * w
        yield torch.is_grad_enabled()

    def f(x, w):
        g = gen(x, w)
        a = next(g)
        mid = torch.is_grad_enabled()
        return a.requires_grad, mid, next(g), (x * w).requires_grad

    return simple(f, lambda: {"w": torch.ones(3, requires_grad=True)}, repeat(lambda st, i: (X[i], st["w"])))


@case
def yield_inside_no_grad_block():
    def gen(x, w):
        with torch.no_grad():
            yield x * w
        yield x * w

    def f(x, w):
        g = gen(x, w)
        a = next(g)
        mid = (x * w).requires_grad
        return a.requires_grad, mid, next(g).requires_grad

    return simple(f, lambda: {"w": torch.ones(3, requires_grad=True)}, repeat(lambda st, i: (X[i], st["w"])))


# == graph breaks ==================================================================================
@case
def print_of_tensor_inside_body():
    def gen(x, log):
        for i in range(2):
            log.append(i)
            print("item", x * i)
            yield x + i

    def f(x, log):
        y = x * 2
        out = [t * y for t in gen(x, log)]
        return out

    return logged(f)


@case
def item_inside_body_drives_control_flow():
    def gen(x):
        for r in x:
            if r.sum().item() > 0:
                yield r

    def f(x):
        return sum(gen(x)) * 2

    return simple(f, dict, repeat(lambda st, i: (torch.arange(6.0).reshape(3, 2) - 2 * i,)))


@case
def break_in_consumer_between_pulls():
    def f(x, log):
        g = _count(x, log)
        a = next(g)
        print("between", a)
        b = next(g)
        return a + b

    return logged(f)


@case
def break_after_generator_exhausted():
    def f(x, log):
        g = _count(x, log, 2)
        vals = list(g)
        print("after", len(vals))
        return vals, next(g, None)

    return logged(f)


# == builtins and methods that walk a generator while they work (wrong answers found here) =======
def _bump(x, n=3):
    for _ in range(n):
        x.add_(1)
        yield x                  # the same tensor each time: a later pull changes earlier items


@case
def sum_of_a_generator_mutating_what_it_yielded():
    # CPython adds each item as it is pulled: 0 + x(1) -> a new tensor, then x(2) is added...
    # (summing after pulling them all gave 3 * x(3))
    def f(x):
        return sum(_bump(x)), sum(x.mul_(2) for _ in range(2)), x * 1

    return simple(f, lambda: {"x": torch.zeros(2)}, repeat(lambda st, i: (st["x"],)))


class Logged:
    def __init__(self, v, log):
        self.v, self.log = v, log

    def __add__(self, other):
        self.log.append(("add", self.v))
        return Logged(self.v + (other.v if isinstance(other, Logged) else other), self.log)

    __radd__ = __add__

    def __lt__(self, other):
        self.log.append(("lt", self.v))
        return self.v < other.v


@case
def min_max_sum_interleave_key_and_dunders_with_the_body():
    def f(x, log, n):
        def gen(make):
            for i in range(n):
                log.append(("g", i))
                yield make(i)

        def key(v):
            log.append(("k", v))
            return -v

        best = max(gen(int), key=key)
        low = min(gen(lambda i: Logged(n - i, log)))
        total = sum(gen(lambda i: Logged(i, log)), Logged(0, log))
        return x * best, low.v, total.v

    return simple(f, lambda: {"log": []}, per_call(lambda st, i: (X[0], st["log"], 3),
                                                   lambda st, i: (X[1], st["log"], 3),
                                                   lambda st, i: (X[2], st["log"], 2)))


@case
def dict_update_from_a_generator_reading_the_dict():
    def f(x, n):
        d = {"a": 0}

        def gen():
            for i in range(n):
                yield i, len(d)          # sees the pairs stored so far

        d.update(gen())
        e = {}
        try:
            e.update((k, [10, 20][k]) for k in range(n))     # IndexError at k == 2: 0 and 1 stay
        except IndexError:
            pass
        return x * len(d), d, e

    return simple(f, dict, per_call(lambda st, i: (X[0], 3), lambda st, i: (X[1], 3), lambda st, i: (X[2], 1)))


@case
def set_update_and_walks_over_a_generator():
    def f(x, log, which):
        s = {1, 5, 0, 2, 3}

        def gen():
            for i in range(4):
                log.append((i, len(s)))
                yield i

        if which == 0:
            s.update(i + 10 for i in gen())
            r = len(s)
        elif which == 1:
            r = s.isdisjoint(gen())            # stops at the first common item
        elif which == 2:
            r = {0, 7}.issuperset(gen())       # stops at the first missing item
        else:
            s.difference_update(gen())         # discards as it pulls
            r = sorted(s)
        return x * 1, r

    return simple(f, lambda: {"log": []}, [lambda st, w=w: (X[w], st["log"], w) for w in (0, 1, 2, 3, 1)])


# == generators leaving the frame or crossing breaks: refused, eager's answer ======================
def _two(x, log):
    log.append("a")
    yield x
    log.append("b")
    yield x + 1
    log.append("c")


class Box:
    pass


@case
def generator_escapes_the_frame():
    def f(x, log, which, holder):
        g = _two(x, log)
        first = next(g)
        if which == 0:
            return [g, first]
        if which == 1:
            return lambda: next(g)
        if which == 2:
            b = Box()
            b.g = g
            return b
        if which == 3:
            holder.g = g
            return first
        return first

    def drain(r):
        """what the caller does with the generator it got"""
        if isinstance(r, list):
            return list(r[0])
        if callable(r):
            return r()
        if isinstance(r, Box):
            return list(r.g)
        return r

    def g2(x, log, which, holder):
        return f(x, log, which, holder)

    def make():
        return g2, {"log": [], "h": Box()}

    def call(st, i):
        if hasattr(st["h"], "g"):
            st["drained"] = list(st["h"].__dict__.pop("g"))
        return (X[i % 4], st["log"], i, st["h"])

    return make, [lambda st, i=i: call(st, i) for i in range(5)]


@case
def paused_generator_held_across_a_break():
    def f(x, log, which):
        g = _two(x, log)
        if which == 0:
            holder = [g]
            a = next(holder[0])
            print("break")
            return a, next(holder[0]), log[-1]
        if which == 1:
            def pull():
                return next(g)
            a = pull()
            print("break")
            return a, pull(), log[-1]
        if which == 2:
            z = zip(g, range(5))
            a = next(z)
            print("break")
            return a, next(z), log[-1]
        if which == 3:
            nxt = g.__next__
            a = nxt()
            print("break")
            return a, nxt(), log[-1]
        h = map(lambda t: t + 1, g)
        a = next(h)
        x.sum().item()
        return a, list(h), log[-1]

    return simple(f, lambda: {"log": []}, [lambda st, w=w: (X[w % 4], st["log"], w) for w in range(5)])


@case
def real_generator_passed_in():
    def f(x, g, which):
        if which == 0:
            return x * next(g), list(g)
        if which == 1:
            return [x * t for t in g]
        return x, iter(g) is g, sum(g)

    def call(st, i):
        st["g"] = (k for k in range(i + 3))
        return (X[i % 4], st["g"], i % 3)

    return simple(f, dict, [lambda st, i=i: call(st, i) for i in range(5)])


# == the test ======================================================================================
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_generator_probe(name, backend):
    make, calls = CASES[name]()
    run(make, calls, backend, f"{name}/{backend}")


def test_case_count():
    assert 40 <= len(CASES) <= 70, len(CASES)

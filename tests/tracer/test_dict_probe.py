"""Soundness probe: the caller's dicts, OrderedDicts, defaultdicts, sets and plain objects
mutated around graph breaks, loops, inlined helpers, closures and aliasing.

Each case runs the function eagerly and through ``minidynamo.optimize(backend)`` on fresh state
of its own, over a few calls, and compares results (or exception types), printed output and
the caller's state afterwards."""

import collections
import contextlib
import enum
import io
import os
import re

import pytest
import torch

import minidynamo

from .helpers import assert_same

os.environ.setdefault("PJRT_DEVICE", "CPU")
T = torch.tensor


@pytest.fixture(autouse=True)
def _fresh():
    minidynamo.reset()
    yield
    minidynamo.reset()


def _run(fn, make_state, steps, compiled, backend):
    f = minidynamo.optimize(backend)(fn) if compiled else fn
    st = make_state()
    buf = io.StringIO()
    results = []
    with contextlib.redirect_stdout(buf):
        for step in steps:
            try:
                results.append(("ok", step(f, st)))
            except Exception as e:  # noqa: BLE001
                results.append(("raise", type(e).__name__))
    return results, st, buf.getvalue()


def compare(fn, make_state, steps, backend="eager"):
    eager = _run(fn, make_state, steps, False, backend)
    minidynamo.reset()
    comp = _run(fn, make_state, steps, True, backend)
    assert eager[2] == comp[2], (eager[2], comp[2])
    for (ek, ev), (ck, cv) in zip(eager[0], comp[0]):
        assert ek == ck, (eager[0], comp[0])
        assert_same(ev, cv)
    assert_same(eager[1], comp[1])
    assert _repr(eager[1]) == _repr(comp[1])     # key types: -0.0 vs 0.0, True vs 1


def _repr(value):
    return re.sub(r" at 0x[0-9a-f]+", "", repr(value))


def calls(n, gen):
    return [(lambda i: (lambda f, st: gen(f, st, i)))(i) for i in range(n)]


def each(n, x=lambda i: T([float(i)])):
    """n calls f(x_i, state)."""
    return calls(n, lambda f, st, i: f(x(i), st))


# --- dicts around graph breaks --------------------------------------------------------------
def test_setitem_before_break_read_after():
    def fn(x, d):
        d["a"] = x + 1
        print("b")
        return d["a"] * 2
    compare(fn, dict, each(4))


def test_pop_around_break():
    def fn(x, d):
        v = d.pop("a", None)
        print("mid", len(d))
        d["z"] = x * 3
        return x if v is None else v + x
    compare(fn, lambda: {"a": T([1.0]), "b": 2}, each(4))


def test_popitem_item_break():
    def fn(x, d):
        k, v = d.popitem()
        y = x.sum().item()
        d[k + "_"] = v * y
        return x + v
    compare(fn, lambda: {"a": T([1.0]), "b": T([2.0])}, each(3, lambda i: T([i + 1.0])))


def test_setdefault_update_ior_data_dependent_branch():
    def fn(x, d):
        d.setdefault("n", 0)
        d["n"] += 1
        if x.sum() > 0:
            d.update(pos=x)
        else:
            d |= {"neg": x}
        return x * d["n"]
    compare(fn, dict, each(5, lambda i: T([(-1.0) ** i])))


def test_del_and_reinsert_order_across_break():
    def fn(x, d):
        del d["a"]
        print("x")
        d["a"] = x
        return list(d.keys()), x + 1
    compare(fn, lambda: {"a": 1, "b": 2, "c": 3}, each(3))


def test_loop_breaking_every_iteration_item():
    def fn(x, d):
        for i in range(3):
            d[i] = d.get(i, 0) + x.sum().item()
        return x + len(d)
    compare(fn, dict, each(3, lambda i: T([i + 1.0])))


def test_loop_breaking_every_iteration_print():
    def fn(x, d):
        for i in range(3):
            d["k%d" % i] = x * i
            print(i)
        return d["k2"] + 1
    compare(fn, dict, each(3, lambda i: T([i + 1.0])))


def test_loop_over_copy_of_items_with_deletes():
    def fn(x, d):
        for k, v in list(d.items()):
            if k.startswith("d"):
                del d[k]
                continue
            d[k] = v * x.sum().item()
        d["done"] = x
        return x + len(d)
    compare(fn, lambda: {"a": 1.0, "drop": 2.0, "b": 3.0}, each(3, lambda i: T([i + 1.0])))


def test_data_dependent_branch_clear_and_del():
    def fn(x, d):
        d["calls"] = d.get("calls", 0) + 1
        if x.sum() > 0:
            d["pos"] = d.get("pos", 0) + 1
            del d["calls"]
        else:
            d.clear()
            d["neg"] = x
        return x + len(d)
    compare(fn, lambda: {"keep": 1}, each(5, lambda i: T([(-1.0) ** i])))


def test_print_dict_after_mutation_sees_it():
    def fn(x, d):
        d["a"] = 1
        d.pop("gone", None)
        print(sorted(d.items()))
        return x + d["a"]
    compare(fn, lambda: {"gone": 2, "z": 3}, each(3))


def test_value_type_changes_across_break():
    def fn(x, d):
        v = d["v"]
        d["v"] = x
        print(type(v).__name__)
        return x + 1
    compare(fn, lambda: {"v": 1}, each(4))


def test_keys_none_tuple_enum_int():
    class E(enum.Enum):
        A = 1
        B = 2

    def fn(x, d):
        d[None] = x
        d[(1, 2)] = x + 1
        d[E.A] = x + 2
        print("k")
        d[3] = d[E.A] * 2
        return d[(1, 2)] + d[None]
    compare(fn, lambda: {E.B: 1}, each(3))


def test_keys_view_kept_across_break():
    def fn(x, d):
        ks = d.keys()
        print("v")
        d["new"] = x
        return list(ks), x + 1
    compare(fn, lambda: {"a": 1}, each(3))


def test_items_view_len_across_item_break():
    def fn(x, d):
        it = d.items()
        d["y"] = x.sum().item()
        return len(it), x + 1
    compare(fn, lambda: {"a": 1}, each(3))


def test_dict_holding_list_appended_across_break():
    def fn(x, d):
        d["xs"].append(x)
        y = x.sum().item()
        d["xs"].append(y)
        return x + len(d["xs"])
    compare(fn, lambda: {"xs": []}, each(3))


def test_caller_changes_dict_between_calls():
    def fn(x, d):
        t = x
        for k in d:
            t = t + d[k]
        return t

    def step(i):
        def s(f, st):
            if i == 1:
                st["new"] = 5.0
            if i == 2:
                del st["a"]
            if i == 3:
                st["b"] = T([3.0])
            if i == 4:
                st["b"] = "s"          # TypeError in both
            return f(T([1.0]), st)
        return s
    compare(fn, lambda: {"a": 1.0, "b": 2.0}, [step(i) for i in range(5)])


def test_caller_reorders_keys_between_calls():
    def fn(x, d):
        return x + 1, list(d)

    def s(i, order):
        def g(f, st):
            st.clear()
            for k in order:
                st[k] = 1
            return f(T([float(i)]), st)
        return g
    compare(fn, dict, [s(0, "ab"), s(1, "ba"), s(2, "ab")])


def test_bool_int_float_equal_keys_keep_their_type():
    def fn(x, d):
        d[1] = x
        return x + 1, list(d)

    def s(i, key):
        def g(f, st):
            st.clear()
            st[key] = 0
            r = f(T([float(i)]), st)
            return r, repr(st.keys())
        return g
    compare(fn, dict, [s(0, 1), s(1, True), s(2, 1.0)])


def test_returned_dict_mutated_by_caller():
    def fn(x, d):
        d["r"] = x
        return d

    def step(i):
        def s(f, st):
            r = f(T([float(i)]), st)
            r["after%d" % i] = i
            return dict(r), r is st
        return s
    compare(fn, dict, [step(i) for i in range(3)])


def test_inlined_helper_that_breaks():
    def helper(d, x):
        d["h"] = x
        print("in helper", len(d))
        d["h2"] = x * 2
        return d["h2"]

    def fn(x, d):
        d["pre"] = x
        r = helper(d, x + 1)
        d["post"] = r
        return r + d["pre"]
    compare(fn, dict, each(3))


def test_global_dict_loop_break():
    def fn(x):
        for i in range(3):
            GD[i] = GD.get(i, 0) + 1
            print(i)
        return x + len(GD)

    def mk():
        global GD
        GD = {}

    def s(i):
        def g(f, st):
            return f(T([float(i)])), dict(GD)
        return g
    compare(fn, mk, [s(i) for i in range(3)])


GD: dict = {}


# --- aliasing ---------------------------------------------------------------------------------
def test_nested_inner_mutated_then_outer_slot_replaced():
    def fn(x, outer):
        inner = outer["in"]
        inner["k"] = x
        outer["in"] = {"fresh": 1}
        return x + 1

    def mk():
        inner = {}
        return {"in": inner}, inner
    compare(fn, mk, calls(3, lambda f, st, i: f(T([float(i)]), st[0])))


def test_attribute_dict_mutated_then_attribute_replaced():
    class O:
        pass

    def fn(x, o):
        o.d["k"] = x
        o.d = {"fresh": 1}
        return x + 1

    def mk():
        o = O()
        o.d = inner = {}
        return o, inner
    compare(fn, mk, calls(3, lambda f, st, i: f(T([float(i)]), st[0])))


def test_list_in_dict_appended_then_slot_replaced():
    def fn(x, d):
        d["xs"].append(x)
        d["xs"] = []
        return x + 1

    def mk():
        xs = []
        return {"xs": xs}, xs
    compare(fn, mk, calls(3, lambda f, st, i: f(T([float(i)]), st[0])))


@pytest.mark.parametrize("where", ["nested", "attribute", "list", "twice"])
def test_dict_reachable_under_two_names(where):
    class O:
        pass

    def fn(x, holder, d):
        d["k"] = x
        print("a")
        if where == "nested":
            other = holder["in"]
        elif where == "attribute":
            other = holder.d
        elif where == "list":
            other = holder[0]
        else:
            other = holder
        return other.get("k", x * 0) + 1

    def mk():
        d = {}
        holder = {"in": d} if where == "nested" else [d] if where == "list" else d
        if where == "attribute":
            holder = O()
            holder.d = d
        return holder, d
    compare(fn, mk, calls(3, lambda f, st, i: f(T([float(i)]), st[0], st[1])))


def test_same_dict_passed_twice_after_distinct_calls():
    def fn(x, a, b):
        a["k"] = x
        return b.get("k", x * 0) + 1

    def s(i):
        def g(f, st):
            return f(T([float(i)]), {} if i < 2 else st, st)
        return g
    compare(fn, dict, [s(i) for i in range(4)])


def test_same_object_under_two_names_attribute_across_break():
    class O:
        pass

    def mk():
        o = O()
        o.n = 0
        return o, o

    def fn(x, a, b):
        a.n = a.n + 1
        print("n")
        b.n = b.n + 10
        return x + a.n
    compare(fn, mk, calls(3, lambda f, st, i: f(T([float(i)]), st[0], st[1])))


# --- closures -------------------------------------------------------------------------------
def test_closure_dict_mutated_across_break():
    def mk():
        d = {}

        def inner(x):
            d["a"] = x
            print("c")
            d["b"] = d["a"] + 1
            return d["b"]
        return d, inner
    d_e, inner_e = mk()
    d_c, inner_c = mk()
    compiled = minidynamo.optimize("eager")(inner_c)
    with contextlib.redirect_stdout(io.StringIO()):
        assert_same([inner_e(T([float(i)])) for i in range(3)], [compiled(T([float(i)])) for i in range(3)])
    assert_same(d_e, d_c)


def test_nonlocal_dict_rebound_then_mutated_across_break():
    def mk():
        d = {"n": 0}

        def inner(x):
            nonlocal d
            d = {**d, "n": d["n"] + 1}
            d["y"] = x.sum().item()
            return x * d["n"]
        return inner, lambda: d
    inner_e, get_e = mk()
    inner_c, get_c = mk()
    compiled = minidynamo.optimize("eager")(inner_c)
    assert_same([inner_e(T([float(i)])) for i in range(3)], [compiled(T([float(i)])) for i in range(3)])
    assert_same(get_e(), get_c())


# --- OrderedDict / defaultdict --------------------------------------------------------------
def test_ordereddict_popitem_first_and_reinsert():
    def fn(x, d):
        k, v = d.popitem(last=False)
        d[k] = v
        return list(d), x * 2
    compare(fn, lambda: collections.OrderedDict(a=1, b=2, c=3), each(3))


def test_ordereddict_move_to_end_across_break():
    def fn(x, d):
        d.move_to_end("a")
        print("m")
        d["b"] = x
        return list(d), x * 2
    compare(fn, lambda: collections.OrderedDict(a=1, b=2, c=3), each(3))


def test_dict_or_ordereddict_type():
    def fn(x, d, o):
        r = d | o
        return x + 1, type(r).__name__, list(r)
    compare(fn, lambda: ({"a": 1}, collections.OrderedDict(b=2)), calls(2, lambda f, st, i: f(T([float(i)]), *st)))


def test_ordereddict_vs_dict_equality_ignores_order():
    def fn(x, a, b):
        return x + (1 if a == b else 0)

    def s(i, o1, o2):
        def g(f, st):
            return f(T([float(i)]), collections.OrderedDict((k, 1) for k in o1), {k: 1 for k in o2})
        return g
    compare(fn, lambda: None, [s(0, "ab", "ab"), s(1, "ab", "ba")])


# (found by the dict probe, fixed: see FINDINGS.md, ninth session)
@pytest.mark.parametrize("backend", ["eager", "torchxla_trace_once"])
def test_ordereddict_equality_is_order_sensitive(backend):
    def fn(x):
        a = collections.OrderedDict(a=1, b=2)
        b = collections.OrderedDict(b=2, a=1)
        return x + (1 if a == b else 0)     # eager: x + 0
    compare(fn, lambda: None, calls(2, lambda f, st, i: f(T([float(i)]))), backend)


# (found by the dict probe, fixed: see FINDINGS.md, ninth session)
def test_caller_ordereddicts_equality_is_order_sensitive():
    def fn(x, a, b):
        return x + (1 if a == b else 0)

    def s(i, o1, o2):
        def g(f, st):
            return f(T([float(i)]), collections.OrderedDict((k, 1) for k in o1),
                     collections.OrderedDict((k, 1) for k in o2))
        return g
    compare(fn, lambda: None, [s(0, "ab", "ab"), s(1, "ab", "ba")])


@pytest.mark.parametrize("backend", ["eager", "torchxla_trace_once", "torchxla_trivial"])
def test_defaultdict_list_append_with_branch(backend):
    def fn(x, d, s):
        d[len(d)].append(x * 2)
        if x.sum() > 0:
            d["pos"].append(x)
        print("s" in s)
        return x + len(d)
    compare(fn, lambda: (collections.defaultdict(list), {"s"}),
            calls(4, lambda f, st, i: f(T([(-1.0) ** i]), *st)), backend)


def test_defaultdict_append_across_print():
    def fn(x, d):
        d["a"].append(x)
        print("y")
        d["b"].append(x + 1)
        return len(d["a"]) + x
    compare(fn, lambda: collections.defaultdict(list), each(3))


def test_defaultdict_int_counter_with_item_key():
    def fn(x, d):
        for w in ["a", "b", "a"]:
            d[w] += 1
        d[x.sum().item()] += 1
        return x * d["a"]
    compare(fn, lambda: collections.defaultdict(int), each(3, lambda i: T([float(i % 2)])))


def test_defaultdict_factory_changed_by_caller():
    def fn(x, d):
        v = d["new"]
        return x + 1, repr(v)

    def s(i, fac):
        def g(f, st):
            st.clear()
            st.default_factory = fac
            return f(T([float(i)]), st), repr(st)
        return g
    compare(fn, lambda: collections.defaultdict(list), [s(0, list), s(1, int), s(2, dict)])


# --- sets -------------------------------------------------------------------------------------
def test_set_add_then_in_across_break():
    def fn(x, s):
        s.add("a")
        print("p")
        return x + (1 if "a" in s else 0)
    compare(fn, set, each(3))


def test_set_add_then_printed():
    def fn(x, s):
        s.add("x")
        print(sorted(s))
        return x + 1
    compare(fn, lambda: {"a"}, each(3))


def test_set_inside_dict_add():
    def fn(x, d):
        d["s"].add("z")
        return x + len(d["s"])
    compare(fn, lambda: {"s": {"a"}}, each(3))


@pytest.mark.parametrize("op", ["ior", "isub", "intersection_update", "difference_update",
                                "symmetric_difference_update"])
# (found by the dict probe, fixed: see FINDINGS.md, ninth session)
def test_caller_set_in_place_change_is_replayed(op):
    def fn(x, s):
        if op == "ior":
            s |= {"q"}
        elif op == "isub":
            s -= {"a"}
        elif op == "intersection_update":
            s.intersection_update({"a", "b"})
        elif op == "difference_update":
            s.difference_update(["a"])
        else:
            s.symmetric_difference_update({"a", "z"})
        return x + len(s)
    compare(fn, lambda: {"a", "c"}, each(3))


# (found by the dict probe, fixed: see FINDINGS.md, ninth session)
def test_caller_set_ior_then_print():
    def fn(x, s):
        s |= {"q"}
        print(sorted(s))                   # eager: ['a', 'q']
        return x + len(s)                  # eager: x + 2
    compare(fn, lambda: {"a"}, each(3))


# (found by the dict probe, fixed: see FINDINGS.md, ninth session)
def test_set_inside_dict_ior():
    def fn(x, d):
        d["s"] |= {"b"}
        return x + len(d["s"])
    compare(fn, lambda: {"s": {"a"}}, each(3))


# (found by the dict probe, fixed: see FINDINGS.md, ninth session)
def test_caller_set_ior_torchxla_trivial():
    def fn(x, s):
        s |= {"q"}
        return x + len(s)
    compare(fn, lambda: {"a"}, each(3), "torchxla_trivial")


# --- -0.0 / 0.0 keys --------------------------------------------------------------------------
# (found by the dict probe: the keys guard accepted -0.0 for 0.0 and the replay rebuilt the dict
# from the trace's keys; dicts keyed by a float zero or nan are refused now, builder._ambiguous_key)
def test_negative_zero_key_survives_mutation():
    def fn(x, d):
        d["z"] = x
        return x + 1

    def s(i, key):
        def g(f, st):
            st.clear()
            st[key] = 0
            return f(T([float(i)]), st), repr(st)
        return g
    compare(fn, dict, [s(0, 0.0), s(1, -0.0)])


# --- plain objects -----------------------------------------------------------------------------
def test_object_attributes_across_print():
    class O:
        pass

    def mk():
        o = O()
        o.n, o.t = 0, torch.zeros(1)
        return o

    def fn(x, o):
        o.n += 1
        o.t = o.t + x
        print(o.n)
        o.last = x
        return o.t * o.n
    compare(fn, mk, each(3))


@pytest.mark.parametrize("backend", ["eager", "torchxla_trace_once"])
def test_object_attribute_cache_dict_across_item(backend):
    class O:
        pass

    def mk():
        o = O()
        o.cache, o.n = {}, 0
        return o

    def fn(x, o):
        o.n += 1
        o.cache[o.n] = x + o.n
        y = x.sum().item()
        o.cache.pop(o.n - 2, None)
        return o.cache[o.n] * y
    compare(fn, mk, each(4, lambda i: T([i + 1.0])), backend)


def test_object_dict_written_directly():
    class O:
        pass

    def mk():
        o = O()
        o.a = 1
        return o

    def fn(x, o):
        o.__dict__["b"] = x
        print("d")
        return x + o.b
    compare(fn, mk, each(3))


def test_object_delattr_reinsert_order():
    class O:
        pass

    def mk():
        o = O()
        o.a, o.b = 1, 2
        return o

    def fn(x, o):
        if hasattr(o, "a"):
            del o.a
        print("h")
        o.a = x
        return x + hasattr(o, "b"), list(vars(o))
    compare(fn, mk, each(3))


def test_setattr_in_loop_then_item():
    class O:
        pass

    def fn(x, o, d):
        for k, v in d.items():
            setattr(o, k, x * v)
        o.y = x.sum().item()
        return x + 1
    compare(fn, O, calls(3, lambda f, st, i: f(T([float(i)]), st, {"p": 1, "q": 2})))


def test_the_sign_of_a_zero_key_read_by_iteration():
    import math

    def fn(x, d):
        return [x * math.copysign(1.0, k) for k in d]

    compiled = minidynamo.optimize("eager")(fn)
    x = torch.ones(2)
    for key in (0.0, -0.0, 0.0):
        got, expected = compiled(x, {key: 1}), fn(x, {key: 1})
        torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("factory", [int, list, None], ids=["int", "list", "none"])
def test_a_callers_defaultdict_is_traced(factory):
    def fn(x, d, words):
        for w in words:
            if factory is list:
                d[w].append(x.sum())
            else:
                d[w] += 1
        return x * len(d)

    compiled = minidynamo.optimize("eager")(fn)
    for call in range(3):
        ours, theirs = collections.defaultdict(factory), collections.defaultdict(factory)
        if factory is None:
            ours["a"] = theirs["a"] = ours["b"] = theirs["b"] = 0
        x = torch.randn(2)
        torch.testing.assert_close(compiled(x, ours, ["a", "b", "a"]), fn(x, theirs, ["a", "b", "a"]))
        assert list(ours) == list(theirs) and ours.default_factory is theirs.default_factory
        for key in theirs:
            torch.testing.assert_close(ours[key], theirs[key]) if factory is list else None
            assert factory is list or ours[key] == theirs[key]
    assert not minidynamo.counters["fallback_reasons"]


def test_ordered_dict_move_to_end_around_a_break():
    """``OrderedDict.move_to_end`` (both ends) on the caller's dict and one made in the frame:
    traced (was a fallback of the whole frame), the caller's order replayed as eager left it."""
    def fn(x, od):
        mine = collections.OrderedDict(a=1, b=2, c=3)
        mine.move_to_end("a")
        mine.move_to_end("c", last=False)
        od.move_to_end("p")
        print("mid", list(od))
        od.move_to_end("r", last=False)
        return x + sum(mine.values()) * len(mine), list(mine), list(od)

    compare(fn, lambda: collections.OrderedDict(p=T([1.0]), q=2, r=3), each(3))
    report = minidynamo.explain(fn)(T([1.0]), collections.OrderedDict(p=1, q=2, r=3))
    assert report.fallback_count == 0, report.reasons


def test_ordered_dict_move_to_end_of_a_missing_key_raises_key_error():
    def fn(x, od):
        od.move_to_end("zz")
        return x

    compare(fn, lambda: collections.OrderedDict(a=1), each(2))


class PairsAreNotItems(collections.abc.Mapping):
    """A mapping whose 2-character keys would also unpack as (key, value) pairs."""

    def __init__(self, d):
        self._d = d

    def __getitem__(self, k):
        return self._d[k]

    def __iter__(self):
        return iter(self._d)

    def __len__(self):
        return len(self._d)


@pytest.mark.parametrize("build", [
    lambda m, x: dict(m), lambda m, x: dict(m, z=x), lambda m, x: {**m, "z": x},
    lambda m, x: collections.OrderedDict(m), lambda m, x: _updated({"y": 0}, m),
    lambda m, x: (lambda **kw: kw)(**m),
], ids=["dict", "dict-kwargs", "unpacked", "OrderedDict", "update", "call-kwargs"])
def test_a_mapping_is_read_through_its_keys_not_as_pairs(build):
    """CPython reads an argument with ``keys`` as a mapping; before, ``dict(m)`` walked it as
    pairs: ``{'ab': 1}`` came back as ``{'a': 'b'}`` (test_functions.test_dict_mutable_map)."""
    def fn(m, x):
        return build(m, x * 2)
    m = PairsAreNotItems({"ab": T([1.0]), "cd": T([2.0])})
    compare(lambda m, x: fn(m, x), lambda: None,
            [lambda f, st: f(m, T([1.0])), lambda f, st: f(PairsAreNotItems({"ef": T([3.0])}), T([2.0]))])


def _updated(d, m):
    d.update(m)
    return d

"""The stdlib tables (variables/stdlib.py, the set/deque/defaultdict/namedtuple containers and
tensor metadata): each case one graph with eager's answer, or a fallback where CPython would
raise or where the value cannot be rebuilt. Small representatives of PyTorch's own
test/dynamo/test_functions.py cases (bench/dynamo_cases.py runs those)."""

import collections
import functools
import itertools
import operator

import pytest
import torch

from .helpers import check, fallback, params, single, tensor


def itertools_product_and_chain(a, b):
    v = a
    for x, i in itertools.product([a, b], [1, 2]):
        v = v + x * i
    for x in itertools.chain([a, b], (3,)):
        v = v + x
    for x in itertools.chain.from_iterable([[a], [1, 2]]):
        v = v + x
    return v


def itertools_combinatorics(a):
    sizes = [a.sum(0) + sum(c) for c in itertools.combinations((1, 2, 3, 4), 2)]
    return sizes, list(itertools.permutations("abc", 2)), list(itertools.combinations_with_replacement([1, 2], 2))


def itertools_lazy(a, b):
    t1, t2 = [a + 1, a + 2], [b + 3, b + 4]
    x, y = list(itertools.islice(itertools.chain(t1, t2), 1, 3))
    return (x - y, list(itertools.zip_longest([1, 2, 3], "ab", [True], fillvalue=None)),
            list(itertools.accumulate([a, b, a])), list(itertools.accumulate([1, 2, 3], operator.mul, initial=5)),
            list(itertools.pairwise([1, 2, 3])), list(itertools.takewhile(lambda v: v < 3, [1, 2, 5, 1])),
            list(itertools.dropwhile(lambda v: v < 3, [1, 2, 5, 1])), list(itertools.starmap(operator.add, [(a, 1)])),
            list(itertools.compress("abcd", [1, 0, 1])), list(itertools.islice(itertools.count(2, 3), 4)))


def functools_reduce(a, b):
    return (functools.reduce(operator.add, [a, b, a]), functools.reduce(lambda x, y: x * y, [b], a),
            functools.reduce(lambda p, q: (p, q), [a]))


def reduce_of_nothing(a):
    return functools.reduce(operator.add, [], ) + a       # TypeError, as in CPython


def deque_methods(a, b):
    d = collections.deque([a, b])
    d.append(a + 1)
    d.extend([a, b])
    d.insert(0, "foo")
    tmp = d.pop()
    d.extendleft(collections.deque([tmp, 7]))
    d[2] = "setitem"
    d = d.copy()
    d.append(d.popleft())
    d.rotate(2)
    return list(d), type(d).__name__


def deque_changed_while_iterated(a):
    d = collections.deque([1, 2])
    for v in d:
        if v == 1:
            d.append(3)
    return a + len(d)


def defaultdict_and_fromkeys(x, y):
    d = collections.defaultdict.fromkeys("a", "b")
    d["a"] = 1
    d.setdefault("c", 10)
    e = collections.defaultdict(list)
    e["k"].append(x)
    d1 = dict.fromkeys(["a", "b"], x + 1)
    d3 = collections.OrderedDict.fromkeys(("a", "b"), value=y)
    return (x + d["c"], e, d, d1, d3)


def defaultdict_with_a_lambda_made_here(x):
    e = collections.defaultdict(lambda: 0)
    e["k"] += 1
    return x + e["k"], e          # the factory cannot be rebuilt after the graph


def defaultdict_with_a_lambda_kept_inside(x):
    e = collections.defaultdict(lambda: [x])
    e["k"].append(x + 1)
    e[3] = 1
    return e["k"][1] + e["j"][0] * e[3], len(e)


def dict_of_keywords(x):
    return dict(text_embed=x + 1, other=x + 2), collections.OrderedDict(sample=x)


def set_algebra(a):
    s1, s2 = {"apple", "banana", "cherry"}, {"google", "apple"}
    both, only = s1.intersection(s2), s1.difference(s2)
    s1.difference_update(["cherry"])
    flag = "apple" in both and "banana" in only
    return (a + 1 if flag else a - 1, sorted(s1.symmetric_difference(["x", "apple"])),
            s1.issubset({"apple", "banana", "z"}), s1.isdisjoint(s2))


Pair = collections.namedtuple("Pair", ["first", "second"])


class Summed(Pair):
    def add(self):
        return self.first + self.second

    @staticmethod
    def one():
        return 1

    @classmethod
    def name(cls):
        return cls.__name__


def namedtuple_methods(a, b):
    p = Summed(a, b)
    q = p._replace(first=a * 2)
    return (p.add(), p.one(), p.name(), q, p._asdict(), p._fields,
            hasattr(p, "_asdict"), hasattr(p, "asdict"))


def namedtuple_class_made_in_the_frame(a, b):
    mytuple = collections.namedtuple("mytuple", ["x", "y", "xy"])
    tmp = mytuple(a, b, a + b)
    return mytuple(tmp.x, tmp[1], tmp.xy + b).xy


def tensor_type_and_class(a, b):
    m = a.type(torch.HalfTensor)
    name = f"{a.__class__.__name__} foo"
    return (b.type(m.type()), b.type("torch.DoubleTensor"), a.type(), name,
            a.is_complex(), torch.is_floating_point(input=a))


def tensor_type_to_another_device(a):
    return a.type("torch.cuda.HalfTensor")


def hasattr_of_a_partial(t):
    p = functools.partial(lambda x, y: torch.sin(x) + torch.cos(y), y=t)
    found = [name for name in ("args", "keywords", "func", "__dict__", "__call__", "__name__", "__code__")
             if hasattr(p, name)]
    return p(t), found


def tensors_as_dict_keys(x, y):
    d = {x: 1, "s": 3}
    d[y] = 2                       # one key or two: whether y is x (guarded)
    z = x.add_(1)                  # the same tensor object as x
    return x * d[x] + d[z] + d["s"], len(d), (y + 1) in d, [k is x for k in d]


def callable_of_values(x):
    return x + 1, [callable(v) for v in (x, x.add, len, torch.relu, 3, [x], callable_of_values)]


def torch_private_helpers_and_module_probes(x):
    fan_in = torch.nn.init._calculate_correct_fan(x, "fan_in")     # a Python helper: inlined
    return x + fan_in if torch.distributed.is_available() else x - fan_in


def deque_arithmetic_and_comparisons(x):
    d = collections.deque([x, 1])
    e, f = d + collections.deque([2]), d * 2
    return (list(e), type(e).__name__, list(f), type(f).__name__, len(d), list(reversed(d)),
            collections.deque([1]) == (1,), [1] == collections.deque([1]),
            collections.deque([1, 2]) < collections.deque([1, 3]))


def bounded_deque(x):
    """``deque(maxlen=n)``: each append past the bound drops the other end, one at a time."""
    recent = collections.deque(maxlen=2)
    for v in (1, 2, 3):
        recent.append(v)
    r = collections.deque([1, 2, 3, 4], 3)
    r.appendleft(0)
    r.extend([7, 8])
    r.extendleft([9])
    never = collections.deque(maxlen=0)
    never.append(1)
    joined = collections.deque([1, 2], maxlen=3) + collections.deque([5, 6])
    repeated = collections.deque([1, 2], maxlen=3)
    repeated *= 3
    copied = r.copy()
    copied.append(100)
    return x * sum(recent), recent, r, r.maxlen, never, joined, joined.maxlen, repeated, copied, copied.maxlen


def deque_extended_by_a_generator_reading_it(x):
    """Each item goes in before the next is pulled, as CPython's deque does: the generator reads
    the items added before (test_generator's test_deque_extendleft: [4, 2, 1, 1], not [3, 2, 1, 1])."""
    y = collections.deque([1])
    y.extendleft(y[0] + z for z in range(3))
    bounded = collections.deque([1], maxlen=3)
    bounded.extend(bounded[-1] * 2 + z for z in range(3))
    return x + 1, y, bounded


def defaultdicts_compared(x):
    """Two defaultdicts (one a copy) compared, and popitem of one: the tracker's dict type is a
    factory-holding stand-in, not a class (an internal error in ==, test_dicts' shallow copy case)."""
    d = collections.defaultdict(list, {1: 1, 2: 2})
    c = d.copy()
    same = c == d
    last = c.popitem()
    return x + 1, same, c == d, last, dict(c)


def deque_plus_list(x):
    return collections.deque([x]) + [1]          # TypeError, as in CPython


def dropwhile_stops_calling_the_predicate(x):
    seen = []

    def small(v):
        seen.append(v)
        return v < 3
    return x + 1, list(itertools.dropwhile(small, [1, 5, 1, 7])), seen


X, Y = tensor(3, 4), tensor(3, 4)

CASES = [
    single(itertools_product_and_chain, X, Y),
    single(itertools_combinatorics, X),
    single(itertools_lazy, X, Y),
    single(functools_reduce, X, Y),
    fallback(reduce_of_nothing, X),
    single(deque_methods, X, Y),
    single(deque_extended_by_a_generator_reading_it, X),
    single(defaultdicts_compared, X),
    fallback(deque_changed_while_iterated, X, mentions="deque"),
    single(defaultdict_and_fromkeys, X, Y),
    fallback(defaultdict_with_a_lambda_made_here, X, mentions="factory"),
    single(defaultdict_with_a_lambda_kept_inside, X),
    single(dict_of_keywords, X),
    single(set_algebra, X),
    single(namedtuple_methods, X, Y),
    single(namedtuple_class_made_in_the_frame, X, Y),
    single(tensor_type_and_class, X, Y),
    fallback(tensor_type_to_another_device, X),
    single(hasattr_of_a_partial, X),
    single(tensors_as_dict_keys, X, Y).then(X, X),
    single(callable_of_values, X),
    single(torch_private_helpers_and_module_probes, X),
    single(deque_arithmetic_and_comparisons, X),
    fallback(deque_plus_list, X),
    single(bounded_deque, X),
    single(dropwhile_stops_calling_the_predicate, X),
]


@pytest.mark.parametrize("case", params(CASES))
def test_stdlib_tables(case):
    check(case)


def test_a_dict_keyed_by_tensors_leaves_the_frame_only_eagerly():
    """Such a dict cannot be rebuilt after the graph (its keys are the call's tensors): a frame
    returning one falls back, one storing into the caller's dict breaks at the store (it runs
    eagerly), and the caller gets eager's dict, keyed by the very tensors."""
    import minidynamo

    def returned(x):
        return {x: 1}

    def stored(x, d):
        d[x] = 1
        return x + 1

    x = tensor(3)
    explanation = minidynamo.explain(returned)(x)
    assert explanation.fallback_count == 1 and "keyed by tensors" in explanation.reasons[0]
    assert list(explanation.output)[0] is x
    d = {}
    explanation = minidynamo.explain(stored)(x, d)
    assert explanation.fallback_count == 0 and "caller's dict" in explanation.reasons[0]
    assert "STORE_SUBSCR" in explanation.reasons[0]
    assert list(d)[0] is x and d[x] == 1 and (explanation.output == x + 1).all()


def test_the_callers_deque_is_read_and_changed_as_eager_does():
    """A deque the caller passes (bounded or not) is read item by item (its length and bound
    guarded) and its changes are replayed after the graph (emptied and refilled: the same
    object, its bound kept); passing one deque twice shares one tracker."""
    import minidynamo

    def changes(x, q, r):
        q.append(x.sum())
        q.appendleft(x * 2)
        r.rotate(1)
        v = r.popleft()
        return x + q[0] + len(q) + v, q.maxlen

    minidynamo.reset()
    compiled = minidynamo.optimize("eager")(changes)
    for n, bound in ((1, 3), (2, 3), (2, None), (3, None), (2, 3)):
        for twice in (False, True):
            def make():
                q = collections.deque([torch.full((2,), float(i)) for i in range(n)], maxlen=bound)
                return q, (q if twice else collections.deque([torch.ones(2) * 5, torch.ones(2)]))
            (eq, er), (oq, orr) = make(), make()
            expected, actual = changes(torch.ones(2), eq, er), compiled(torch.ones(2), oq, orr)
            assert repr(actual) == repr(expected)
            assert (repr(oq), repr(orr), oq.maxlen) == (repr(eq), repr(er), eq.maxlen)
    assert not minidynamo.counters["fallback_reasons"]

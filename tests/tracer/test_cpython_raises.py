"""What CPython raises (or answers) and the trace must too, found by CPython's own tests once the
bodies of ``with self.assertRaises(...)`` blocks were traced (the with statement used to make the
whole frame eager), and by the fuzzer.  Each case is differential against eager."""

import pytest
import torch

import minidynamo


@pytest.fixture(autouse=True)
def _fresh():
    minidynamo.reset()
    yield
    minidynamo.reset()


def outcome(fn, *args):
    try:
        result = fn(*args)
    except Exception as error:
        return type(error), str(error)
    return [r.tolist() if isinstance(r, torch.Tensor) else r for r in result]


def key_deleted_and_put_back(x):
    d = {0: 0}
    for _ in d:
        del d[0]              # the same key, order and size again: CPython's iterator still raises
        d[0] = 0
    return x + 1, len(d)


def values_updated(x):
    d = {"a": 1, "b": 2}
    for k in d:
        d[k] = d[k] * 2       # a value changed under an existing key: allowed
    return x + d["a"] + d["b"], len(d)


class Base:
    def m(self):
        return 1


class Derived(Base):
    def m(self):
        return super(Derived, self).m() + 1


def super_calls(x):
    answers = [Derived().m()]
    for args in ((int, int, int), (1, int), (Derived, 3)):
        try:
            super(*args)
        except TypeError as error:
            answers.append(str(error))
    return x + answers[0], answers[1:]


class Holder:
    extra = 11


HOLDER = Holder()


def deleted_instance_attribute_reveals_the_class_one(x):
    HOLDER.extra = 2
    seen = []
    for _ in range(2):
        if hasattr(HOLDER, "extra"):
            seen.append(HOLDER.extra)
            del HOLDER.extra                  # the second time only the class has it: AttributeError
    return x + 1, seen


def read_after_delete(x):
    HOLDER.extra = 2
    del HOLDER.extra
    return x + HOLDER.extra, hasattr(HOLDER, "extra")


@pytest.mark.parametrize("fn", [key_deleted_and_put_back, values_updated, super_calls,
                                deleted_instance_attribute_reveals_the_class_one, read_after_delete])
def test_raises_where_cpython_raises(fn):
    x = torch.zeros(2)
    expected = outcome(fn, x)
    compiled = minidynamo.optimize("eager")(fn)
    assert outcome(compiled, x) == expected
    assert outcome(compiled, x) == expected


class NoProtocols:
    pass


# What the frame catches itself: the error's type and message as CPython gives them
CAUGHT = {
    "len of an int": lambda x: len(x.shape[0]),
    "len of a class": lambda x: len(NoProtocols),
    "in on an int": lambda x: 1 in x.shape[0],
    "subscript of an int": lambda x: x.shape[0][0],
    "subscript of a new object": lambda x: NoProtocols()[0],
    "tuple index": lambda x: x.shape[5],
    "negative tuple index": lambda x: (1, 2)[-3],
    "list index": lambda x: [1, 2][5],
    "tuple.index": lambda x: x.shape.index(9),
    "list.index": lambda x: [1, 2].index(9),
    "item assignment to a str": lambda x: _assign("ab", 0, "c"),
    "item assignment to a new object": lambda x: _assign(NoProtocols(), 0, 1),
    "item deletion from an int": lambda x: _delete(x.shape[0], 0),
    "item deletion from a new object": lambda x: _delete(NoProtocols(), 0),
    "pop from an empty deque": lambda x: __import__("collections").deque().pop(),
    "popleft from an empty deque": lambda x: __import__("collections").deque().popleft(),
    "deque index": lambda x: __import__("collections").deque([1])[5],
    "deque.index": lambda x: __import__("collections").deque([1]).index(9),
    "list.pop out of range": lambda x: [1, 2].pop(5),
    "OrderedDict.popitem": lambda x: __import__("collections").OrderedDict().popitem(),
    "dict.popitem": lambda x: {}.popitem(),
}


def _assign(target, key, value):
    target[key] = value


def _delete(target, key):
    del target[key]


@pytest.mark.parametrize("case", CAUGHT)
def test_a_caught_error_is_the_one_cpython_raises(case):
    """Probe AJ r1-r3: ``len(5)``, ``1 in 5``, ``5[0]``, ``"ab"[0] = "c"`` and ``del 5[0]`` raised
    AttributeError (a lookup of ``__len__`` by name), which the program's ``except TypeError``
    missed; a tuple's index error said "list", and ``list.index`` did not word its message as
    CPython 3.11 does."""
    expression = CAUGHT[case]

    def fn(x):
        y = x * 2
        try:
            expression(x)
        except Exception as error:
            return y, type(error).__name__, str(error)
        return y, None, None

    x = torch.ones(2, 3)
    expected = outcome(fn, x)
    compiled = minidynamo.optimize("eager")(fn)
    assert outcome(compiled, x) == expected
    assert outcome(compiled, x) == expected


def own_cell_read_before_assignment(x):
    try:
        k                                     # noqa: F821 (a cell variable: the lambda reads it)
    except Exception as error:
        caught = type(error).__name__, str(error)
    f = lambda: k                             # noqa: E731
    k = 2
    return x + f(), caught


def free_variable_read_before_assignment(x):
    def inner():
        return k
    try:
        inner()
    except Exception as error:
        caught = type(error).__name__, str(error)
    k = 1
    return x + k, caught


class Parent:
    def m(self, x):
        return x + 1


class Child(Parent):
    def in_a_nested_function(self, x):
        def inner():
            return super().m(x)
        return inner()

    def after_del_self(self, x):
        y = x * 2
        del self
        try:
            return super().m(y)
        except RuntimeError as error:
            return str(error)


CHILD = Child()


def super_in_a_nested_function(x):
    return CHILD.in_a_nested_function(x * 2)


def super_after_del_self(x):
    return CHILD.after_del_self(x)


@pytest.mark.parametrize("fn", [own_cell_read_before_assignment, free_variable_read_before_assignment,
                                super_in_a_nested_function, super_after_del_self])
def test_cells_and_super_raise_as_in_cpython(fn):
    """Probe AJ r9, r10: an empty cell of the frame's own raised NameError (eager:
    UnboundLocalError) and a free variable's message lacked its name; a zero-argument
    ``super()`` the trace refuses ran at a break in the entry function's frame ("__class__ cell
    not found"), and after ``del self`` the trace failed internally."""
    x = torch.zeros(2)
    expected = outcome(fn, x)
    compiled = minidynamo.optimize("eager")(fn)
    assert outcome(compiled, x) == expected
    assert outcome(compiled, x) == expected


def _pulls(consume):
    def fn(x):
        y = x * 2
        try:
            return y, consume()
        except Exception as error:
            return y, type(error).__name__
    return fn


STOPPED_BY_THE_FUNCTION = {
    "list(map(next, its))": lambda: len(list(map(next, [iter([1]), iter([]), iter([3])]))),
    "filter by next": lambda: len(list(filter(lambda it: next(it), [iter([1]), iter([]), iter([3])]))),
    "zip with a map": lambda: len(list(zip([1, 2], map(lambda v: next(iter([])) if v else v, [0, 1, 2])))),
    "sum of a map": lambda: sum(map(lambda v: next(iter([])) if v > 1 else v, [1, 1, 2, 5])),
    "starmap": lambda: len(list(__import__("itertools").starmap(lambda a, b: next(iter([])) if a else b,
                                                                [(0, 1), (1, 2), (0, 3)]))),
    "accumulate": lambda: list(__import__("itertools").accumulate([1, 2, 3], lambda a, b: next(iter([])) if b == 3 else a + b)),
}


@pytest.mark.parametrize("case", STOPPED_BY_THE_FUNCTION)
def test_a_stopiteration_from_the_function_an_iterator_calls_ends_it(case):
    """Probe AJ r12: the StopIteration that ``map``'s (``filter``'s, ``starmap``'s,
    ``accumulate``'s) function raises leaves the iterator's ``__next__``, and its consumer
    takes it for the end: ``list(map(next, its))`` is the items up to the first exhausted one.
    Inside a try block the trace let it reach the program's handler."""
    fn = _pulls(STOPPED_BY_THE_FUNCTION[case])
    x = torch.ones(2)
    expected = outcome(fn, x)
    compiled = minidynamo.optimize("eager")(fn)
    assert outcome(compiled, x) == expected
    assert outcome(compiled, x) == expected

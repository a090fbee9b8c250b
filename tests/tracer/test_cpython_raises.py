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
}


@pytest.mark.parametrize("case", CAUGHT)
def test_a_caught_error_is_the_one_cpython_raises(case):
    """Probe AJ r1-r3: ``len(5)``, ``1 in 5`` and ``5[0]`` raised AttributeError (a lookup of
    ``__len__`` by name), which the program's ``except TypeError`` missed; a tuple's index error
    said "list", and ``list.index`` did not word its message as CPython 3.11 does."""
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

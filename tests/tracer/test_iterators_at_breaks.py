"""An iterator the program can still see after a graph break is handed over as itself: its own
type, its own position, one object however many places hold it (found by CPython's
``test_enumerate``: ``self.assertEqual(iter(e), e)`` broke the frame there, and the two operands
came back as two tuple iterators).  A ``for`` loop's own iterator, which only its ``FOR_ITER``
sees, may still come as the rest of its items (test_loop_breaks.py)."""

import random

import pytest

import minidynamo


def opaque(*args):
    """A call the tracer does not model: a graph break."""
    return random.Random(0).random() >= 0 and args


def run_both(fn, *args):
    minidynamo.reset()
    expected = fn(*args)
    assert minidynamo.optimize("eager")(fn)(*args) == expected
    return expected


MAKERS = {
    "enumerate": lambda: enumerate((5, 6, 7), 3),
    "tuple": lambda: iter((5, 6, 7)),
    "str": lambda: iter("abc"),
    "range": lambda: iter(range(4)),
    "list": lambda: iter([5, 6, 7]),
    "reversed list": lambda: reversed([5, 6, 7]),
    "dict items": lambda: iter({"a": 1, "b": 2}.items()),
    "zip": lambda: zip([1, 2], "ab"),
    "map": lambda: map(abs, (-1, -2, -3)),
}


@pytest.mark.parametrize("make", MAKERS.values(), ids=MAKERS.keys())
def test_an_iterator_handed_to_a_break_is_itself(make):
    def f():
        it = make()
        first = next(it)
        same = opaque(iter(it), it)         # the break: both operands are the one iterator
        return first, same[0] is same[1], type(same[1]).__name__, list(same[1])

    run_both(f)


def test_a_list_iterator_still_reads_its_list_after_the_break():
    def f():
        items = [1, 2]
        it = iter(items)
        next(it)
        (it,) = opaque(it)
        items.append(3)                      # seen by the iterator, as in eager
        return list(it)

    assert run_both(f) == [2, 3]


def test_an_iterator_in_a_local_and_on_the_stack_is_one_object():
    def f(xs):
        it = enumerate(xs)
        out = []
        for i, x in it:                     # the loop's iterator is also the local it
            opaque(x)
            out.append((i, x, type(it).__name__))
        return out

    assert run_both(f, (4, 5)) == [(0, 4, "enumerate"), (1, 5, "enumerate")]

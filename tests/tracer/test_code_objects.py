"""What a traced frame sees of code objects: the very tuples a code object keeps, and compile()'s
flags.  Found by CPython's own test suite (``bench/cpython_cases.py``, sixth batch):

- ``f.__code__.co_consts`` was rebuilt as a new tuple on each read (``is`` between two reads, or
  between two functions whose constants the compiler merged, was False; the tuple returned was a
  copy).  A tuple a code object keeps is now held as itself; so is each tuple inside a constant
  tuple read from the frame (``C.attr[2] is C.attr[2]``).
- compile() run at a graph break inherited the ``__future__`` flags of minidynamo's own module
  (``annotations``): the code it made differed from eager's.  The break's entry now carries the
  program's flags.
"""

import pytest
import torch

import minidynamo


def opaque(*args):
    """A call the tracer does not model: the frame breaks here."""
    return len(args)


def lam():
    return ...


class Holder:
    attr = (1, 2, (3, 4), "five")


PROBES = {
    "one code's co_consts, read twice": lambda: lam.__code__.co_consts is lam.__code__.co_consts,
    "constants the compiler merged": lambda: (lambda: ...).__code__.co_consts is (lambda: ...).__code__.co_consts,
    "a tuple inside a class's tuple": lambda: Holder.attr[2] is Holder.attr[2],
    "co_varnames, made per read": lambda: lam.__code__.co_varnames is lam.__code__.co_varnames,
}


@pytest.mark.parametrize("probe", PROBES, ids=list(PROBES))
def test_identity_of_what_code_objects_and_constants_keep(probe):
    def f(x):
        return PROBES[probe](), x + 1

    minidynamo.reset()
    expected = f(torch.ones(1))[0]
    optimized = minidynamo.optimize("eager")(f)
    assert optimized(torch.ones(1))[0] is expected
    assert optimized(torch.ones(1))[0] is expected


def test_a_returned_tuple_a_code_object_keeps_is_that_tuple():
    def f(x):
        return lam.__code__.co_consts, Holder.attr[2], x + 1

    minidynamo.reset()
    optimized = minidynamo.optimize("eager")(f)
    for _ in range(2):
        consts, inner, _ = optimized(torch.ones(1))
        assert consts is lam.__code__.co_consts
        assert inner is Holder.attr[2]


PROGRAM = '''
import torch
def made_at_a_break(x):
    y = x + 1
    opaque()
    return compile("a = 1", "<input>", "exec"), y
def made_after_a_break(x):
    opaque()
    y = x + 1
    opaque()
    return compile("a = 1", "<input>", "exec"), y
'''


@pytest.mark.parametrize("future", ["", "from __future__ import annotations\n"], ids=["no future import", "annotations"])
@pytest.mark.parametrize("name", ["made_at_a_break", "made_after_a_break"])
def test_compile_at_a_break_inherits_the_programs_future_flags(future, name):
    namespace = {"opaque": opaque}
    exec(compile(future + PROGRAM, "<program>", "exec", dont_inherit=True), namespace)
    fn = namespace[name]
    minidynamo.reset()
    expected, _ = fn(torch.ones(1))
    got, _ = minidynamo.optimize("eager")(fn)(torch.ones(1))
    assert got == expected
    assert got.co_flags == expected.co_flags

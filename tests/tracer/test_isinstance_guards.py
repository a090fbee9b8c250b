"""isinstance / issubclass / callable stay right when the classes change between calls.

A trace answers them from classes, so the entry is guarded by what the answer depends on: the
MRO of the class asked about (``C.__bases__ = ...`` makes a new one), the ABC registry
(``Base.register(X)``), the metaclass's ``__instancecheck__`` and where ``__call__`` lives.
A check that runs code on every call (a runtime-checkable Protocol, a ``__class__`` property)
is refused: the frame runs eagerly.  Eager is the oracle on every call.
"""

import abc
import collections.abc
import typing

import pytest
import torch

import minidynamo


@pytest.fixture(autouse=True)
def _fresh():
    minidynamo.reset()
    yield
    minidynamo.reset()


class Compared:
    """``fn`` optimized once; each call runs it compiled, then eagerly, and compares."""

    def __init__(self, fn, backend="eager"):
        self.fn, self.optimized = fn, minidynamo.optimize(backend)(fn)

    def __call__(self, *args):
        got = self.optimized(*args)
        torch.testing.assert_close(got.cpu(), self.fn(*args))


def plus_if(test):
    """``x + 1`` when ``test(o)`` holds, else ``x - 1``: the answer shows in the tensor."""
    def fn(x, o):
        return x + 1 if test(o) else x - 1
    return fn


X = torch.ones(2)


# ----------------------------------------------------------------------------- the ABC registry


def test_registering_a_virtual_subclass_is_seen():
    class Base(abc.ABC):
        pass

    class Thing:
        pass

    check, thing = Compared(plus_if(lambda o: isinstance(o, Base))), Thing()
    check(X, thing)
    Base.register(Thing)
    check(X, thing)


def test_issubclass_after_register():
    class Base(abc.ABC):
        pass

    class Thing:
        pass

    check = Compared(plus_if(lambda cls: issubclass(cls, Base)))
    check(X, Thing)
    Base.register(Thing)
    check(X, Thing)


def test_a_library_abc_registering_a_user_class():
    class Rows:
        pass

    check, rows = Compared(plus_if(lambda o: isinstance(o, collections.abc.Sequence))), Rows()
    check(X, rows)
    collections.abc.Sequence.register(Rows)
    check(X, rows)


def test_registering_a_builtin_type_seen_for_a_constant():
    class Base(abc.ABC):
        pass

    check = Compared(plus_if(lambda o: isinstance(o, Base)))
    check(X, 3)
    Base.register(int)
    check(X, 3)


def test_registering_the_tensor_class_seen_for_a_tensor():
    class Base(abc.ABC):
        pass

    check = Compared(plus_if(lambda o: isinstance(o, Base)))
    check(X, torch.zeros(1))
    Base.register(torch.Tensor)
    check(X, torch.zeros(1))


def test_a_tuple_of_classes():
    class Base(abc.ABC):
        pass

    class Thing:
        pass

    check, thing = Compared(plus_if(lambda o: isinstance(o, (int, Base)))), Thing()
    check(X, thing)
    Base.register(Thing)
    check(X, thing)


# ----------------------------------------------------------------------------- the MRO


def test_assigning_bases_is_seen():
    class A:
        pass

    class B:
        pass

    class C(A):
        pass

    check, o = Compared(plus_if(lambda o: isinstance(o, B))), C()
    check(X, o)
    C.__bases__ = (B,)
    check(X, o)
    C.__bases__ = (A,)
    check(X, o)


def test_assigning_bases_of_a_base_is_seen_by_issubclass():
    class A:
        pass

    class B:
        pass

    class Middle(A):
        pass

    class C(Middle):
        pass

    check = Compared(plus_if(lambda cls: issubclass(cls, B)))
    check(X, C)
    Middle.__bases__ = (B,)
    check(X, C)


# ----------------------------------------------------------------------------- metaclass checks


def test_an_instancecheck_added_to_the_metaclass_later():
    class Meta(type):
        pass

    class Kind(metaclass=Meta):
        pass

    class Thing:
        pass

    check, thing = Compared(plus_if(lambda o: isinstance(o, Kind))), Thing()
    check(X, thing)
    Meta.__instancecheck__ = lambda cls, instance: True
    check(X, thing)


def test_a_runtime_checkable_protocol_depends_on_the_instance():
    @typing.runtime_checkable
    class Runner(typing.Protocol):
        def run(self): ...

    class Job:
        pass

    plain, running = Job(), Job()
    running.run = lambda: None
    check = Compared(plus_if(lambda o: isinstance(o, Runner)))
    check(X, plain)
    check(X, running)


def test_a_class_property_answers_isinstance_on_the_first_call():
    class Kind:
        pass

    class Disguised:
        @property
        def __class__(self):
            return Kind

    check = Compared(plus_if(lambda o: isinstance(o, Kind)))
    check(X, Disguised())


def test_a_subclasshook_of_the_program_runs_eagerly():
    class Walker(abc.ABC):
        @classmethod
        def __subclasshook__(cls, other):
            return hasattr(other, "walk") or NotImplemented

    class Dog:
        def walk(self):
            pass

    check = Compared(plus_if(lambda o: isinstance(o, Walker)))
    check(X, Dog())
    check(X, 3)


def test_a_union_of_classes():
    check = Compared(plus_if(lambda o: isinstance(o, int | None)))
    check(X, 3)
    check(X, None)
    check(X, "three")


# ----------------------------------------------------------------------------- callable


def test_callable_after_the_class_gains_call():
    class Thing:
        pass

    check, thing = Compared(plus_if(callable)), Thing()
    check(X, thing)
    Thing.__call__ = lambda self: 0
    check(X, thing)
    del Thing.__call__
    check(X, thing)


def test_callable_after_a_base_gains_call():
    class Base:
        pass

    class Thing(Base):
        pass

    check, thing = Compared(plus_if(callable)), Thing()
    check(X, thing)
    Base.__call__ = lambda self: 0
    check(X, thing)


# ----------------------------------------------------------------------------- the guard stays cheap


def test_a_hit_does_not_recompile_and_the_guards_name_what_they_read():
    class Base(abc.ABC):
        pass

    class Thing:
        pass

    fn, thing = plus_if(lambda o: isinstance(o, Base)), Thing()
    optimized = minidynamo.optimize("eager")(fn)
    minidynamo.counters.reset()
    for _ in range(3):
        optimized(X, thing)
    assert minidynamo.counters["compiles"] == 1, minidynamo.counters
    guards = "\n".join(minidynamo.explain(fn)(X, thing).guards)
    assert "Thing" in guards and "abc.get_cache_token()" in guards, guards


# ----------------------------------------------------------------------------- through XLA


def test_registering_a_virtual_subclass_is_seen_through_xla():
    from xla_bridge import device as dev

    dev.torch_xla()
    dev.xla_device()

    class Base(abc.ABC):
        pass

    class Thing:
        pass

    check, thing = Compared(plus_if(lambda o: isinstance(o, Base)), "torchxla_trace_once"), Thing()
    check(X, thing)
    Base.register(Thing)
    check(X, thing)


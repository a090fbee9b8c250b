"""``class_match``: the facts an isinstance / issubclass / callable answer read from a class (its
MRO, what its lookups find, the ABC registries) pass while unchanged and fail on each change,
with a reason; the native guard, its slow path and the plain reference layer agree; and neither
building nor checking the guard runs code of the program's metaclass."""

import abc

from guards import class_match, native, reference
from tests.guards.helpers import frame_of, guard_fn_for, some_function as f


def decide(guards):
    """The compiled guard's answer, checked against its slow path and the plain layer."""
    guard_fn = guard_fn_for(guards, "x")
    ok = guard_fn(f, 0)
    assert ok == (guard_fn.failure_reason(f, 0) is None)
    assert ok == (reference.first_failure(guards, f, (0,), frame_of("x")) is None)
    return ok, guard_fn


def test_the_mro_is_the_tuple_seen():
    class A:
        pass

    class B:
        pass

    class C(A):
        pass

    guards = [class_match(C, mro=True)]
    ok, guard_fn = decide(guards)
    assert ok and (type(guard_fn).__name__ == "FastGuard") == native.compiled()
    C.__bases__ = (B,)
    ok, guard_fn = decide(guards)
    assert not ok and "C.__mro__: expected the MRO seen at trace time" in guard_fn.failure_reason(f, 0)


def test_lookups_find_what_they_found_and_nothing_new():
    class Base:
        pass

    class Thing(Base):
        pass

    guards = [class_match(Thing, lookups=("__call__",))]
    assert decide(guards)[0]
    Base.__call__ = lambda self: 0
    ok, guard_fn = decide(guards)
    assert not ok and "__call__ -> not found" in guard_fn.failure_reason(f, 0)
    del Base.__call__
    assert decide(guards)[0]


def test_the_abc_registries_are_as_they_were():
    class Base(abc.ABC):
        pass

    guards = [class_match(Base, registry=True)]
    assert decide(guards)[0]
    Base.register(int)
    ok, guard_fn = decide(guards)
    assert not ok and "abc.get_cache_token()" in guard_fn.failure_reason(f, 0)


def test_a_metaclass_is_never_asked():
    calls = []

    class Loud(type):
        def __getattribute__(cls, name):
            calls.append(name)
            return super().__getattribute__(name)

        def __eq__(cls, other):
            calls.append("__eq__")
            return super().__eq__(other)

        __hash__ = type.__hash__

        def __repr__(cls):
            calls.append("__repr__")
            return "Loud"

    class Thing(metaclass=Loud):
        pass

    calls.clear()
    guards = [class_match(Thing, mro=True, lookups=("__call__", "__class__"))]
    assert str(guards[0]).startswith("class ") and decide(guards)[0]
    assert calls == []


def test_the_checks_of_one_class_are_one_check_of_all_they_relied_on():
    """Each tensor method or operator a frame uses adds a check of its class: they are folded
    into one (one version tag), which still fails on a change to any name any of them read."""
    class Thing:
        def a(self):
            return 1

        def b(self):
            return 2

    guards = [class_match(Thing, lookups=("a",)), class_match(Thing, lookups=("b",)), class_match(Thing, mro=True)]
    ok, guard_fn = decide(guards)
    assert ok and len(guard_fn.guards) == 1
    assert "MRO seen" in guard_fn.guard_strings[0] and all(f"{n} -> " in guard_fn.guard_strings[0] for n in "ab")
    Thing.b = lambda self: 3
    ok, guard_fn = decide(guards)
    assert not ok and "b" in guard_fn.failure_reason(f, 0)

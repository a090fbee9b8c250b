"""The guard kinds for global torch state, attribute absence, and identity between sources:
each passes on what it saw, fails on each change, and says why; in every tensor-check mode
(conftest), the compiled whole-frame guard and the generated Python agree."""

import warnings

import pytest
import torch

from guards import (AttrSource, CallSource, ItemSource, LocalSource, absent_match, alias_match,
                    default_dtype_match, distinct_match, equals_match, tensor_match, torch_state_match,
                    type_match)
from guards import native
from tests.guards.helpers import guard_fn_for, some_function as f

X, Y, Z = LocalSource("x"), LocalSource("y"), LocalSource("z")


class K:
    pass


def both_agree(guard_fn, *args):
    """The guard's answer, checked against its slow path (None exactly when it passes)."""
    ok = guard_fn(f, *args)
    assert ok == (guard_fn.failure_reason(f, *args) is None)
    return ok


def test_default_dtype_match_compiled_and_python_agree():
    x = torch.ones(2)
    guard_fn = guard_fn_for([tensor_match(X, x), default_dtype_match()], "x")
    assert (type(guard_fn).__name__ == "FastGuard") == native.compiled()   # the whole guard, native
    assert both_agree(guard_fn, x)
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        assert not both_agree(guard_fn, x)
        assert "torch.get_default_dtype(): expected torch.float32, got torch.float64" in guard_fn.failure_reason(f, x)
    finally:
        torch.set_default_dtype(old)
    assert both_agree(guard_fn, x)


def test_torch_state_match_device_and_inference_mode():
    guard_fn = guard_fn_for([torch_state_match("get_default_device"),
                             torch_state_match("is_inference_mode_enabled")], "x")
    assert both_agree(guard_fn, None)
    with torch.inference_mode():
        assert not both_agree(guard_fn, None)
    with pytest.raises(ValueError):
        torch_state_match("manual_seed")


def test_torch_state_below_torch_and_a_string_answer():
    """State readers below ``torch`` (``torch._C._get_cublas_allow_tf32``, what
    ``torch.backends.cuda.matmul.allow_tf32`` reads) and one answering a str."""
    guard_fn = guard_fn_for([torch_state_match("_C._get_cublas_allow_tf32"),
                             torch_state_match("_C._get_privateuse1_backend_name")], "x")
    assert both_agree(guard_fn, None)
    before = torch._C._get_cublas_allow_tf32()
    torch._C._set_cublas_allow_tf32(not before)
    try:
        assert not both_agree(guard_fn, None)
    finally:
        torch._C._set_cublas_allow_tf32(before)
    assert both_agree(guard_fn, None)


def test_a_frame_reading_allow_tf32_recompiles_when_it_changes():
    import minidynamo

    def f(x):
        if torch.backends.cuda.matmul.allow_tf32:
            return x.sin() + 1
        return x.cos() - 1

    compiled = minidynamo.optimize("eager", nopython=True)(f)
    x = torch.randn(3)
    before = torch._C._get_cublas_allow_tf32()
    try:
        for flag in (before, not before, before):
            torch._C._set_cublas_allow_tf32(flag)
            torch.testing.assert_close(compiled(x), f(x))
    finally:
        torch._C._set_cublas_allow_tf32(before)
        minidynamo.reset()


def test_absent_match_instance_and_class_mro():
    class Base:
        pass

    class Child(Base):
        pass

    o = Child()
    guard_fn = guard_fn_for([type_match(X, o), absent_match(X, o, "scale")], "x")
    assert both_agree(guard_fn, o)
    o.scale = 1
    assert not both_agree(guard_fn, o)
    del o.scale
    Base.scale = 2                       # found through the MRO now
    try:
        assert not both_agree(guard_fn, o)
        assert "scale" in guard_fn.failure_reason(f, o)
    finally:
        del Base.scale
    assert both_agree(guard_fn, o)


def test_absent_match_on_a_class_and_on_slots():
    class Slotted:
        __slots__ = ("a",)

    guard_fn = guard_fn_for([absent_match(X, K, "thing")], "x")
    assert both_agree(guard_fn, K)
    K.thing = 1
    try:
        assert not both_agree(guard_fn, K)
    finally:
        del K.thing
    s = Slotted()
    guard_fn = guard_fn_for([type_match(X, s), absent_match(X, s, "a")], "x")
    assert both_agree(guard_fn, s)
    s.a = 1                               # a slot that is set is found
    assert not both_agree(guard_fn, s)


def test_alias_match_same_and_distinct():
    a, b = K(), K()
    same = guard_fn_for([type_match(X, a), type_match(Y, a), alias_match(Y, ((X, True),))], "x", "y")
    assert both_agree(same, a, a)
    assert not both_agree(same, a, b)
    assert "L['y'] is L['x']" in same.failure_reason(f, a, b)
    differ = guard_fn_for([alias_match(Y, ((X, False),))], "x", "y")
    assert both_agree(differ, a, b)
    assert not both_agree(differ, b, b)


def test_alias_match_on_tensors_keeps_the_compiled_tensor_checks():
    t, u = torch.ones(2), torch.ones(2)
    guard_fn = guard_fn_for([tensor_match(X, t), tensor_match(Y, u), alias_match(Y, ((X, False),))], "x", "y")
    assert both_agree(guard_fn, t, u)
    assert not both_agree(guard_fn, t, t)
    assert not both_agree(guard_fn, t, torch.ones(3))


def test_distinct_match_over_items():
    items = [K(), K(), K()]
    sources = tuple(ItemSource(X, i) for i in range(3))
    guard_fn = guard_fn_for([distinct_match(sources)], "x")
    assert both_agree(guard_fn, items)
    assert not both_agree(guard_fn, [items[0], items[1], items[0]])
    assert both_agree(guard_fn, [K(), K(), K()])


def test_storage_offset_through_call_source():
    base = torch.arange(6.0)
    guard_fn = guard_fn_for([tensor_match(X, base[2:4]), equals_match(CallSource(X, "storage_offset"), 2)], "x")
    assert both_agree(guard_fn, base[2:4])
    assert not both_agree(guard_fn, base[1:3])
    assert "L['x'].storage_offset()" in guard_fn.failure_reason(f, base[1:3])


def test_attribute_of_tensor_is_leaf():
    leaf = torch.ones(2, requires_grad=True)
    guard_fn = guard_fn_for([tensor_match(X, leaf), equals_match(AttrSource(X, "is_leaf"), True)], "x")
    assert both_agree(guard_fn, leaf)
    assert not both_agree(guard_fn, leaf * 1)


def test_class_lacks_in_every_mode_follows_the_mro():
    class Base:
        pass

    class Child(Base):
        pass

    check = native.class_lacks([(Child, ["weight", "lin"], {"__repr__": object.__repr__}), (K, ["x"], {})])
    assert check() and check()
    Base.weight = 1
    assert not check()
    del Base.weight
    assert check()
    Child.lin = property(lambda self: 1)
    assert not check()
    del Child.lin
    assert check()
    Child.__bases__ = (type("Other", (), {"lin": 3}),)
    assert not check()



def test_class_lacks_sees_a_replaced_class_attribute_through_the_mro():
    class Base:
        def get(self):
            return 1

    class Child(Base):
        pass

    check = native.class_lacks([(Child, [], {"get": Base.get})])
    assert check() and check()
    Child.get = lambda self: 2              # found first now
    assert not check()
    del Child.get
    assert check()
    original = Base.get
    Base.get = lambda self: 3
    assert not check()
    Base.get = original
    assert check()


def test_tensor_match_rejects_other_layouts_that_claim_contiguity():
    x = torch.ones(2, 3)                    # contiguous: checked by is_contiguous() and the layout
    guard_fn = guard_fn_for([tensor_match(X, x), default_dtype_match()], "x")
    assert both_agree(guard_fn, x)
    assert not both_agree(guard_fn, x.to_mkldnn())
    assert not both_agree(guard_fn, x.to_sparse())


def test_default_dtype_set_through_the_default_tensor_type_fails_the_guard():
    """``set_default_tensor_type`` is a second way to move the default dtype: the compiled check
    reads the same state Python's getter does."""
    x = torch.ones(2)
    guard_fn = guard_fn_for([tensor_match(X, x), default_dtype_match()], "x")
    assert both_agree(guard_fn, x)
    old = torch.get_default_dtype()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")   # (it is deprecated)
            torch.set_default_tensor_type(torch.DoubleTensor)
        assert not both_agree(guard_fn, x)
    finally:
        torch.set_default_dtype(old)
    assert both_agree(guard_fn, x)


def test_autocast_state_is_asked_again_whenever_the_thread_state_moves():
    """The compiled check keeps the autocast getter's answer with the dispatch-key state it was
    given for: every way autocast goes on or off, on any device, nested, in another thread,
    must still be seen (the answer kept from the call before would pass a stale state)."""
    import threading

    from guards import autocast_match

    guard_fn = guard_fn_for([autocast_match()], "x")
    for _ in range(2):   # the second round starts with a kept answer
        assert both_agree(guard_fn, None)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            assert not both_agree(guard_fn, None)
            with torch.autocast("cpu", enabled=False):
                assert both_agree(guard_fn, None)
            assert not both_agree(guard_fn, None)
        assert both_agree(guard_fn, None)
        with torch.autocast("cuda", enabled=True):   # (a warning where CUDA is absent: state moves all the same)
            assert both_agree(guard_fn, None) == (not torch._C._is_any_autocast_enabled())
        torch.set_autocast_enabled("cpu", True)
        try:
            assert not both_agree(guard_fn, None)
        finally:
            torch.set_autocast_enabled("cpu", False)
        assert both_agree(guard_fn, None)
    answers = []
    with torch.autocast("cpu", dtype=torch.bfloat16):   # autocast is per thread: off in a new one
        thread = threading.Thread(target=lambda: answers.append(both_agree(guard_fn, None)))
        thread.start()
        thread.join()
        assert not both_agree(guard_fn, None)
    assert answers == [True]

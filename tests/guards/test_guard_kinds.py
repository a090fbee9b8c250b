"""Each guard kind accepts the value it was built from and rejects each change it must see.

The guard function is generated once; every call gets the frame's function and arguments.
"""

import math

import pytest
import torch

from guards import (
    LocalSource, UnguardableValue, dict_keys_match, equals_match, grad_mode_match, id_match,
    length_match, module_state_match, tensor_match, type_match,
)
from tests.guards.helpers import guard_fn_for, some_function as f

X = LocalSource("x")


def passes(guard_fn, *args):
    return guard_fn(f, *args)


# ------------------------------------------------------------------ tensor_match


@pytest.mark.parametrize("changed, reason", [
    (lambda t: t.half(), "L['x'].dtype: expected torch.float32, got torch.float16"),
    (lambda t: torch.ones(3, 3), "L['x'].shape: expected [2, 3], got [3, 3]"),
    (lambda t: t.t().contiguous().t(), "L['x'].stride(): expected [3, 1], got [1, 2]"),
    (lambda t: t.clone().requires_grad_(), "L['x'].requires_grad: expected False, got True"),
    (lambda t: torch.nn.Parameter(t.clone(), requires_grad=False),
     "type(L['x']): expected torch.Tensor, got torch.nn.Parameter"),
    (lambda t: None, "type(L['x']): expected torch.Tensor, got NoneType"),
    (lambda t: t.to("meta"), "L['x'].device: expected cpu, got meta"),
])
def test_tensor_match_sees_every_change(changed, reason):
    x = torch.ones(2, 3)
    guard_fn = guard_fn_for([tensor_match(X, x)], "x")
    assert passes(guard_fn, x)
    assert passes(guard_fn, torch.zeros(2, 3))          # new data, same metadata: a hit
    assert guard_fn.failure_reason(f, torch.zeros(2, 3)) is None
    other = changed(x)
    assert not passes(guard_fn, other)
    assert guard_fn.failure_reason(f, other) == reason


def test_tensor_match_parameter_is_not_a_tensor():
    p = torch.nn.Parameter(torch.ones(2))
    guard_fn = guard_fn_for([tensor_match(X, p)], "x")
    assert passes(guard_fn, torch.nn.Parameter(torch.zeros(2)))
    assert not passes(guard_fn, torch.zeros(2, requires_grad=True))


def test_tensor_match_refuses_what_it_cannot_describe():
    with pytest.raises(UnguardableValue):
        tensor_match(X, 3)
    with pytest.raises(UnguardableValue):
        tensor_match(X, torch.eye(2).to_sparse())


# ------------------------------------------------------------------ constants


@pytest.mark.parametrize("traced, same, different", [
    (3, [3], [4, 3.0, True, "3", None]),
    (True, [True], [False, 1, 1.0]),
    (0.5, [0.5], [0.25, "0.5"]),
    (float("nan"), [float("nan"), math.nan], [0.0, 1.0]),
    (0.0, [0.0], [-0.0, 0, False]),
    (None, [None], [0, False, torch.zeros(1)]),
    ("mean", ["mean"], ["sum", b"mean"]),
    ((1, 2), [(1, 2)], [(1, 2.0), (1, 2, 3), [1, 2], (1,)]),
    ((1, ("a", None)), [(1, ("a", None))], [(1, ("a", 0)), (1, ["a", None])]),
    (torch.float32, [torch.float32], [torch.float64, "torch.float32"]),
    (torch.device("cpu"), [torch.device("cpu")], [torch.device("meta"), "cpu"]),
    (torch.Size([2, 3]), [torch.Size([2, 3])], [torch.Size([3, 2]), (2, 3)]),
])
def test_equals_match_tells_equal_looking_constants_apart(traced, same, different):
    guard_fn = guard_fn_for([equals_match(X, traced)], "x")
    assert passes(guard_fn, traced)
    for value in same:
        assert passes(guard_fn, value), value
    for value in different:
        assert not passes(guard_fn, value), value
        assert guard_fn.failure_reason(f, value) is not None


def test_equals_match_reason_names_the_value():
    guard_fn = guard_fn_for([equals_match(X, 3)], "x")
    assert guard_fn.failure_reason(f, 4) == "L['x']: expected 3, got 4"
    assert guard_fn.failure_reason(f, 3.0) == "type(L['x']): expected int, got float"


@pytest.mark.parametrize("long", ["x" * 10**6, b"y" * 10**6, 7 ** 1000])
def test_a_long_constant_is_compared_by_name_not_written_into_the_guard(long):
    """CPython's test_re: a 10**7-character string in the guard's source took seconds to build."""
    guard_fn = guard_fn_for([equals_match(X, long)], "x")
    assert passes(guard_fn, long) and passes(guard_fn, long[:] if not isinstance(long, int) else long + 0)
    changed = long + 1 if isinstance(long, int) else long[:-1] + ("z" if isinstance(long, str) else b"z")
    assert not passes(guard_fn, changed)
    assert len(guard_fn.source) < 5000 and max(map(len, guard_fn.guard_strings)) < 200
    assert len(guard_fn.failure_reason(f, changed)) < 300


def test_equals_match_refuses_non_constants():
    with pytest.raises(UnguardableValue):
        equals_match(X, object())
    with pytest.raises(UnguardableValue):
        equals_match(X, [1, 2])


# ------------------------------------------------------------------ type, identity


def test_type_match_is_exact():
    class Base:
        pass

    class Derived(Base):
        pass

    guard_fn = guard_fn_for([type_match(X, Base())], "x")
    assert passes(guard_fn, Base())
    assert not passes(guard_fn, Derived())
    assert "expected" in guard_fn.failure_reason(f, Derived())


def test_id_match_wants_the_very_object():
    def g():
        pass

    def h():
        pass

    guard_fn = guard_fn_for([id_match(X, g)], "x")
    assert passes(guard_fn, g)
    assert not passes(guard_fn, h)
    assert guard_fn.failure_reason(f, h).startswith("L['x']: expected the object seen at trace time")


def test_id_match_keeps_its_object_alive():
    guard = id_match(X, [1, 2])
    assert guard.obj == [1, 2]    # a dead object's id could be reused by a new one


# ------------------------------------------------------------------ containers


def test_length_match_checks_type_and_length():
    guard_fn = guard_fn_for([length_match(X, [1, 2])], "x")
    assert passes(guard_fn, [5, 6])
    assert not passes(guard_fn, [1, 2, 3])
    assert not passes(guard_fn, (1, 2))
    assert guard_fn.failure_reason(f, [1]) == "len(L['x']): expected 2, got 1"


def test_dict_keys_match_checks_keys_in_order():
    guard_fn = guard_fn_for([dict_keys_match(X, {"a": 1, "b": 2})], "x")
    assert passes(guard_fn, {"a": 0, "b": 0})
    assert not passes(guard_fn, {"b": 0, "a": 0})
    assert not passes(guard_fn, {"a": 0})
    assert guard_fn.failure_reason(f, {"a": 0, "c": 1}) == "L['x'].keys(): expected ['a', 'b'], got ['a', 'c']"


def test_dict_keys_match_tells_1_from_1_point_0():
    guard_fn = guard_fn_for([dict_keys_match(X, {1: "a"})], "x")
    assert passes(guard_fn, {1: "b"})
    assert not passes(guard_fn, {1.0: "a"})


# ------------------------------------------------------------------ modules, grad mode


def test_module_state_match_sees_training_flag_and_hooks():
    module = torch.nn.Linear(2, 2)
    guard_fn = guard_fn_for([module_state_match(X, module)], "x")
    assert passes(guard_fn, module)
    module.eval()
    assert guard_fn.failure_reason(f, module) == "L['x'].training: expected True, got False"
    module.train()
    handle = module.register_forward_hook(lambda *a: None)
    assert guard_fn.failure_reason(f, module) == "len(L['x']._forward_hooks): expected 0, got 1"
    handle.remove()
    assert passes(guard_fn, module)
    handle = torch.nn.modules.module.register_module_forward_pre_hook(lambda *a: None)
    try:
        assert not passes(guard_fn, module)
        assert "_global_forward_pre_hooks" in guard_fn.failure_reason(f, module)
    finally:
        handle.remove()
    assert passes(guard_fn, module)


def test_module_state_match_counts_a_modules_hooks_as_traced():
    module = torch.nn.Linear(2, 2)
    module.register_forward_pre_hook(lambda *a: None)
    guard_fn = guard_fn_for([module_state_match(X, module)], "x")
    assert passes(guard_fn, module)
    handle = module.register_forward_pre_hook(lambda *a: None)
    assert guard_fn.failure_reason(f, module) == "len(L['x']._forward_pre_hooks): expected 1, got 2"
    handle.remove()
    assert passes(guard_fn, module)


def test_module_state_match_refuses_global_hooks():
    handle = torch.nn.modules.module.register_module_forward_pre_hook(lambda *a: None)
    try:
        with pytest.raises(UnguardableValue, match="_global_forward_pre_hooks"):
            module_state_match(X, torch.nn.Linear(2, 2))
    finally:
        handle.remove()


def test_grad_mode_match():
    guard_fn = guard_fn_for([grad_mode_match()], "x")
    assert passes(guard_fn, None)
    with torch.no_grad():
        assert not passes(guard_fn, None)
        assert guard_fn.failure_reason(f, None) == "torch.is_grad_enabled(): expected True, got False"
        assert guard_fn_for([grad_mode_match()], "x")(f, None)
    assert guard_fn_for([grad_mode_match(False)], "x").failure_reason(f, None) is not None


@pytest.mark.parametrize("shape", [(4, 6), (2, 3, 5), (1, 6), (6, 1), (0, 3), (5,), ()])
def test_tensor_match_strides_hold_for_every_layout_of_the_same_shape(shape):
    """Contiguous tensors may be checked by contiguity: it must still tell every stride apart."""
    x = torch.ones(shape)
    guard_fn = guard_fn_for([tensor_match(X, x)], "x")
    layouts = [torch.ones(shape)]
    if x.dim() >= 2:
        layouts.append(torch.ones(tuple(reversed(shape))).transpose(0, -1))   # same shape, other strides
        doubled = [s * 2 for s in x.stride()]
        layouts.append(torch.ones(2 * max(x.numel(), 1)).as_strided(shape, doubled))   # gaps
    for other in layouts:
        assert guard_fn(f, other) == (tuple(other.stride()) == tuple(x.stride())), (shape, other.stride())

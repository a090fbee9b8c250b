"""The optional C helper: TensorMatch answers exactly what the Python tensor checks answer."""

import pytest
import torch

from guards import native

TensorMatch = native.TensorMatch
pytestmark = pytest.mark.skipif(TensorMatch is None, reason="guards/_guard_helpers.c is not built")


def spec_of(t):
    return (type(t), t.dtype, t.device, tuple(t.shape), tuple(t.stride()), t.requires_grad)


def python_check(spec, t):
    cls, dtype, device, shape, stride, requires_grad = spec
    try:
        return (type(t) is cls and t.dtype is dtype and t.device == device and t.shape == shape
                and t.stride() == stride and t.requires_grad is requires_grad)
    except Exception:
        return False


class MyTensor(torch.Tensor):
    pass


CANDIDATES = [
    torch.ones(2, 3), torch.ones(2, 3).half(), torch.ones(3, 2).t(), torch.ones(2, 3, requires_grad=True),
    torch.nn.Parameter(torch.ones(2, 3)), torch.ones(2, 3, device="meta"), torch.ones(()), torch.ones(0, 3),
    torch.ones(2, 3).as_subclass(MyTensor), torch.ones(600, 2), None, 3, [1, 2],
]


@pytest.mark.parametrize("traced", [t for t in CANDIDATES if isinstance(t, torch.Tensor)], ids=repr)
def test_agrees_with_the_python_checks(traced):
    spec = spec_of(traced)
    check = TensorMatch([spec])
    for candidate in CANDIDATES:
        assert check(candidate) is python_check(spec, candidate), (traced, candidate)


def test_checks_many_tensors_in_one_call():
    x, y = torch.ones(2), torch.zeros(3, 3)
    check = TensorMatch([spec_of(x), spec_of(y)])
    assert check(x, y) is True
    assert check(x, x) is False
    with pytest.raises(TypeError):
        check(x)


def test_refuses_types_whose_metadata_is_computed_in_python():
    class Odd(torch.Tensor):
        @property
        def dtype(self):
            return torch.float64

    with pytest.raises(TypeError):
        TensorMatch([(Odd, torch.float32, torch.device("cpu"), (1,), (1,), False)])


def test_a_frame_of_tensor_arguments_gets_a_guard_function_in_c(tensor_check_mode):
    from guards import LocalSource, compile_reader, grad_mode_match, tensor_match
    from tests.guards.helpers import frame_of, guard_fn_for, some_function as f

    x, y = torch.ones(2, 3), torch.ones(3)
    guards = [grad_mode_match(), tensor_match(LocalSource("x"), x), tensor_match(LocalSource("y"), y)]
    guard_fn = guard_fn_for(guards, "x", "y")
    assert isinstance(guard_fn, native.ArgumentGuard) is tensor_check_mode
    assert guard_fn(f, torch.zeros(2, 3), torch.zeros(3)) is True
    assert guard_fn(f, y, x) is False
    assert guard_fn.failure_reason(f, x, y.double()) == "L['y'].dtype: expected torch.float32, got torch.float64"
    with torch.no_grad():
        assert guard_fn(f, x, y) is False
    assert "L_x.dtype is" in guard_fn.source            # readable Python, whichever runs
    reader = compile_reader([LocalSource("y"), LocalSource("x")], frame_of("x", "y"))
    values = reader(f, x, y)
    assert values[0] is y and values[1] is x

"""The compiled helpers: the C++ TensorMatch answers exactly what the Python tensor checks answer,
and a frame of tensor arguments gets a guard function that is all compiled (a FastGuard)."""

import pytest
import torch

from guards import native

# name -> TensorMatch class, for every compiled helper that is built
HELPERS = {name: module.TensorMatch for name, module in native.TENSOR_CHECKERS.items()}
pytestmark = pytest.mark.skipif(not HELPERS, reason="no compiled guard helper is built")


@pytest.fixture
def tensor_check_mode():
    """These tests name the helper they test: run them once, not once per mode."""


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


class Odd(torch.Tensor):
    @property
    def dtype(self):
        return torch.float64


CANDIDATES = [
    torch.ones(2, 3), torch.ones(2, 3).half(), torch.ones(3, 2).t(), torch.ones(2, 3, requires_grad=True),
    torch.nn.Parameter(torch.ones(2, 3)), torch.ones(2, 3, device="meta"), torch.ones(()), torch.ones(0, 3),
    torch.ones(2, 3).as_subclass(MyTensor), torch.ones(600, 2), None, 3, [1, 2],
]


@pytest.mark.parametrize("helper", HELPERS)
@pytest.mark.parametrize("traced", [t for t in CANDIDATES if isinstance(t, torch.Tensor)], ids=repr)
def test_agrees_with_the_python_checks(helper, traced):
    spec = spec_of(traced)
    check = HELPERS[helper]([spec])
    for candidate in CANDIDATES:
        assert check(candidate) is python_check(spec, candidate), (traced, candidate)


@pytest.mark.parametrize("helper", HELPERS)
def test_checks_many_tensors_in_one_call(helper):
    x, y = torch.ones(2), torch.zeros(3, 3)
    check = HELPERS[helper]([spec_of(x), spec_of(y)])
    assert check(x, y) is True
    assert check(x, x) is False
    with pytest.raises(TypeError):
        check(x)


@pytest.mark.skipif("cpp" not in HELPERS, reason="guards/_tensor_match.cpp is not built")
def test_cpp_reads_the_tensor_itself_only_where_python_would_read_the_same():
    x = torch.ones(2, 3)
    types = [torch.Tensor, torch.nn.Parameter, MyTensor, Odd]
    check = HELPERS["cpp"]([(cls, x.dtype, x.device, (2, 3), (3, 1), False) for cls in types])
    # MyTensor keeps torch's default __torch_function__, which returns what the getter returns;
    # Odd's dtype is Python code: asked through Python, as the generated check would ask.
    assert check.direct() == (True, True, True, False)
    odd = x.as_subclass(Odd)
    assert check(x, torch.nn.Parameter(x, requires_grad=False), x.as_subclass(MyTensor), odd) is False
    odd_spec = (Odd, torch.float64, x.device, (2, 3), (3, 1), False)
    assert HELPERS["cpp"]([odd_spec])(odd) is python_check(odd_spec, odd) is True


@pytest.mark.parametrize("mode", native.TENSOR_CHECKERS)
def test_a_frame_of_tensor_arguments_gets_a_compiled_guard_function(mode, monkeypatch):
    from guards import LocalSource, compile_reader, grad_mode_match, tensor_match
    from tests.guards.helpers import frame_of, guard_fn_for, some_function as f

    monkeypatch.setattr(native, "mode", mode)
    x, y = torch.ones(2, 3), torch.ones(3)
    guards = [grad_mode_match(), tensor_match(LocalSource("x"), x), tensor_match(LocalSource("y"), y)]
    guard_fn = guard_fn_for(guards, "x", "y")
    assert type(guard_fn) is native.TENSOR_CHECKERS[mode].FastGuard
    assert guard_fn(f, torch.zeros(2, 3), torch.zeros(3)) is True
    assert guard_fn(f, y, x) is False
    assert guard_fn.failure_reason(f, x, y.double()) == "L['y'].dtype: expected torch.float32, got torch.float64"
    with torch.no_grad():
        assert guard_fn(f, x, y) is False
    with torch.inference_mode():
        assert guard_fn(f, x, y) is False           # inference mode turns grad mode off too
    assert "# L['x'] tensor: torch.float32 cpu [2, 3]" in guard_fn.source   # readable, whichever runs
    assert "Runs natively (guards._tensor_match.FastGuard)" in guard_fn.source
    reader = compile_reader([LocalSource("y"), LocalSource("x")], frame_of("x", "y"))
    values = reader(f, x, y)
    assert values[0] is y and values[1] is x


@pytest.mark.parametrize("mode", native.TENSOR_CHECKERS)
def test_the_compiled_guard_function_checks_the_autocast_state(mode, monkeypatch):
    from guards import LocalSource, autocast_match, grad_mode_match, tensor_match
    from tests.guards.helpers import guard_fn_for, some_function as f

    monkeypatch.setattr(native, "mode", mode)
    x = torch.ones(2, 3)
    guard_fn = guard_fn_for([grad_mode_match(), autocast_match(), tensor_match(LocalSource("x"), x)], "x")
    assert type(guard_fn) is native.TENSOR_CHECKERS[mode].FastGuard
    assert guard_fn(f, x) is True
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert guard_fn(f, x) is False
        assert "autocast" in guard_fn.failure_reason(f, x)
    assert guard_fn(f, x) is True
    fast_guard = native.TENSOR_CHECKERS[mode].FastGuard
    with pytest.raises(TypeError, match="callable"):
        fast_guard(1, (), None, 0, 2, ((7, 42, True),), [], None)
    with pytest.raises(ValueError, match="empty register"):   # reads register 2 before any op fills it
        fast_guard(1, (), None, 0, 4, ((0, 3, 2, "shape"),), [], None)


def test_pure_python_mode_uses_no_compiled_helper(monkeypatch):
    from guards import LocalSource, tensor_match
    from tests.guards.helpers import guard_fn_for

    monkeypatch.setattr(native, "mode", "python")
    guard_fn = guard_fn_for([tensor_match(LocalSource("x"), torch.ones(2))], "x")
    assert type(guard_fn).__name__ == "function"
    assert "___tensor_match" not in guard_fn.source and "L_x.dtype is" in guard_fn.source

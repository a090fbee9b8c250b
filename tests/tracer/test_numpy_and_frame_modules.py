"""NumPy scalars as constants, pure numpy callables folded at trace time, and parameter-free
library modules made in the frame (``nn.ReLU()(x)``): each compared with eager on two calls,
with one graph, no fallback and no recompile; and the refusals next to them, equal to eager."""


import numpy as np
import pytest
import torch
from torch import nn

import minidynamo
from minidynamo.eval_frame import OptimizeContext
from minidynamo.explain import ExplainOutput

from .helpers import assert_same, compiled_twice


def x34():
    return (torch.randn(3, 4),)


# ---------------------------------------------------------------- numpy scalars

SCALE64, SCALE32, COUNT, FLAG = np.float64(0.5), np.float32(2.0), np.int64(3), np.bool_(True)


def test_numpy_scalars_read_from_globals_are_constants():
    def f(x):
        y = x * SCALE64 + SCALE32 - COUNT
        if FLAG and COUNT > 2:
            y = y * 2
        return y, x.view(int(COUNT) + 1, -1)
    compiled_twice(f, x34)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.bool])
@pytest.mark.parametrize("scalar", [np.float64(2.5), np.float32(2.5), np.int64(3), np.int32(3), np.bool_(True)],
                         ids=lambda s: type(s).__name__)
def test_numpy_scalar_with_a_tensor_promotes_as_in_eager(dtype, scalar):
    def f(x):
        return x * scalar, scalar * x, torch.add(x, scalar)
    compiled_twice(f, lambda: (torch.ones(2, 3, dtype=dtype),))    # assert_same compares dtypes


def test_numpy_scalar_operators_fold_with_numpy_arithmetic():
    def f(x):
        a = np.float32(1.5) * 2          # stays a float32 in numpy
        b = np.int64(7) // 2
        c = np.float32(1) / np.float32(3)   # rounded to float32 by numpy
        return x * a + b, x + float(c), type(a) is np.float32, float(c)
    compiled_twice(f, x34)


def test_a_changed_numpy_global_recompiles_and_stays_correct():
    global SCALE32
    def f(x):
        return x * SCALE32
    minidynamo.reset()
    minidynamo.counters.reset()
    opt = minidynamo.optimize("eager")(f)
    x = torch.randn(3)
    saved = SCALE32
    try:
        assert_same(f(x), opt(x))
        for new in (np.float32(3.0), np.float64(2.0), np.float32("nan"), np.float32(-0.0)):
            SCALE32 = new                                   # same value, other type: misses too
            assert_same(f(x), opt(x))
        assert minidynamo.counters["compiles"] == 5
    finally:
        SCALE32 = saved
        minidynamo.reset()


# ---------------------------------------------------------------- numpy callables on constants

def test_numpy_callables_on_numbers_fold_at_trace_time():
    def f(x):
        d = x.shape[-1]
        scale = 1 / np.sqrt(d) + np.log(np.exp(1.0)) + np.prod((2, 3)) + np.pi
        return x * scale * np.float32(2.0) + np.round(2.567, 2) + np.maximum(1, 3)
    report = compiled_twice(f, x34)
    targets = [n.target for n in report.graphs[0].graph.nodes if n.op == "call_function"]
    assert all(getattr(t, "__module__", "") == "_operator" for t in targets), targets     # folded


def test_numpy_type_info_and_scalar_types():
    def f(x):
        s = np.float32(0.25)
        return x + np.iinfo(np.int16).max, x * np.finfo(np.float32).eps, x * type(s)(3)
    compiled_twice(f, x34)


def test_numpy_random_is_refused_and_equal_to_eager():
    def f(x):
        return x * np.random.rand()
    report = compiled_twice(f, x34, graphs=None, breaks=1)   # the drawn float specialises the rest
    assert "NumPy's global random state" in report.reasons[0]


def test_numpy_callable_returning_an_ndarray_is_refused():
    def f(x):
        return x + float(np.ones(2).sum())
    report = compiled_twice(f, x34, graphs=None, fallbacks=0, breaks=2)
    assert "numpy" in report.reasons[0] and "ndarray.sum" in report.reasons[1]   # (a C method: a break)


def test_torch_tensor_of_a_numpy_scalar_is_refused_where_dtype_comes_from_numpy():
    def f(x):
        return x + torch.tensor(np.float64(1.5))          # float64 in eager
    report = compiled_twice(f, x34, graphs=None, fallbacks=None, breaks=1)
    assert "numpy scalar" in report.reasons[0]


# ---------------------------------------------------------------- library modules made in the frame

@pytest.mark.parametrize("make", [
    lambda: nn.ReLU(), lambda: nn.Softmax(dim=-1), lambda: nn.Dropout(0.0), lambda: nn.GELU(approximate="tanh"),
    lambda: nn.Flatten(), lambda: nn.LayerNorm(4, elementwise_affine=False), lambda: nn.Sequential(),
])
def test_parameter_free_library_module_made_in_the_frame(make):
    def f(x):
        return make()(x * 2) + 1
    compiled_twice(f, x34)


def test_identity_made_in_the_frame():
    def f(x):
        return nn.Identity()(x)
    compiled_twice(f, x34, graphs=0)        # no tensor op: nothing to compile, nothing wrong


def test_module_made_in_the_frame_and_returned_is_rebuilt_each_call():
    def f(x):
        act = nn.Softmax(dim=0)
        return act(x), act, act
    minidynamo.reset()
    opt = minidynamo.optimize("eager")(f)
    x = torch.randn(3, 4)
    first, second = opt(x), opt(x)
    assert_same(f(x), first)
    assert type(first[1]) is nn.Softmax and first[1].dim == 0 and first[1].training
    assert first[1] is first[2] and first[1] is not second[1]          # one new module per call
    minidynamo.reset()


def test_module_with_parameters_made_in_the_frame_is_refused_and_rng_is_untouched():
    def f(x):
        return nn.Linear(4, 4)(x)
    minidynamo.reset()
    report = ExplainOutput()
    opt = OptimizeContext("eager", recorder=report)(f)
    for seed in (3, 4):
        torch.manual_seed(seed)
        expected = f(torch.ones(2, 4))
        after_eager = torch.random.get_rng_state()
        torch.manual_seed(seed)
        assert_same(expected, opt(torch.ones(2, 4)))   # the trace-time attempt drew nothing
        assert torch.equal(after_eager, torch.random.get_rng_state())
    assert report.fallback_count == 0 and "parameters or buffers" in report.reasons[0], report.reasons
    minidynamo.reset()


def test_user_module_with_its_own_init_made_in_the_frame_is_refused():
    class Scale(nn.Module):
        def __init__(self):
            super().__init__()
            self.k = 2

        def forward(self, x):
            return x * self.k
    def f(x):
        return Scale()(x)
    report = compiled_twice(f, x34, graphs=None, fallbacks=None, breaks=1)   # the module is on the stack
    assert "program's code" in report.reasons[0]


def test_module_made_in_the_frame_stored_on_an_object_equals_eager():
    class Holder:
        pass
    def f(holder, x):
        holder.act = nn.ReLU()
        return holder.act(x)
    def make():
        return Holder(), torch.randn(3, 4)
    minidynamo.reset()
    opt = minidynamo.optimize("eager")(f)
    for _ in range(2):
        h_eager, x = make()
        h_opt = Holder()
        assert_same(f(h_eager, x), opt(h_opt, x))
        assert type(h_opt.act) is nn.ReLU and h_opt.act is not h_eager.act
    minidynamo.reset()


def test_module_made_in_the_frame_put_in_eval_mode_is_refused():
    def f(x):
        drop = nn.Dropout(0.5)
        drop.eval()
        return drop(x)
    report = compiled_twice(f, x34, graphs=None, breaks=1)     # the resume sees the module eval() changed
    assert "mutates the module" in report.reasons[0]


def test_a_numpy_call_that_warns_is_refused_so_eager_warns_on_every_call():
    def f(x):
        return x + float(np.log(0.0))           # RuntimeWarning: divide by zero
    with pytest.warns(RuntimeWarning):
        report = compiled_twice(f, x34, graphs=None, fallbacks=None, breaks=1)
    assert "error state decides" in report.reasons[0]


class OnlyForward(nn.Module):
    scale = 2

    def forward(self, x):
        return nn.ReLU()(x) * self.scale


def test_program_module_with_only_a_forward_made_in_the_frame():
    def f(x):
        return OnlyForward()(x) + 1
    compiled_twice(f, x34)


def test_program_module_made_in_the_frame_sees_its_class_change():
    def f(x):
        return OnlyForward()(x)
    minidynamo.reset()
    opt = minidynamo.optimize("eager")(f)
    x = torch.randn(3)
    try:
        assert_same(f(x), opt(x))
        OnlyForward.scale = 5                                     # a class attribute the trace read
        assert_same(f(x), opt(x))
        OnlyForward.forward = lambda self, x: x - 1               # the method it inlined
        assert_same(f(x), opt(x))
        OnlyForward.__init__ = lambda self: (nn.Module.__init__(self), print("init"))[0]   # now the program's
        assert_same(f(x), opt(x))
    finally:
        OnlyForward.scale = 2
        OnlyForward.forward = _only_forward
        del OnlyForward.__init__
        minidynamo.reset()


_only_forward = OnlyForward.forward


def log_of_zero(t):
    return t + float(np.log(np.float64(0.0))), t - float(np.float64(1.0) / np.float64(0.0))


def test_a_fold_that_numpys_error_state_decides_follows_the_state_of_each_call():
    """``np.log(0.0)`` is -inf, a warning, or a FloatingPointError as ``np.seterr`` says at the
    call: folded under the trace's state, a later ``seterr(divide="raise")`` still gave -inf."""
    import warnings

    def outcomes(fn):
        seen = []
        for mode in ("ignore", "raise", "warn", "ignore"):
            with np.errstate(divide=mode), warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    seen.append((mode, [r.tolist() for r in fn(torch.zeros(1))], len(caught)))
                except FloatingPointError:
                    seen.append((mode, "FloatingPointError", len(caught)))
        return seen

    assert outcomes(minidynamo.optimize("eager")(log_of_zero)) == outcomes(log_of_zero)

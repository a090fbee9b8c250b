"""Regressions found by fuzz feature families (tests/fuzz/generator.py FEATURES), each a
minimized repro written as an example: the compiled function must answer as eager does."""

import pytest
import torch

import minidynamo

BACKENDS = ["eager", "torchxla_trace_once"]


def same(a, b):
    assert type(a) is type(b)
    if isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and a.shape == b.shape
        torch.testing.assert_close(a, b.to(a.device), equal_nan=True)


def outcome(fn, *args):
    try:
        return "ok", fn(*args)
    except Exception as error:      # noqa: BLE001 (the exception is the answer compared)
        return type(error), str(error).splitlines()[0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_std_of_an_integer_tensor_raises_as_in_eager(backend):
    """seed 305 i214 (trace_once): eager's std/var refuse integer tensors ("std and var only
    support floating point and complex dtypes"), even when the result is never used; the bridge
    dropped or computed the unused op and returned.  The tracer's dtype probe now counts that
    message as a dtype refusal, so the call raises as in eager."""
    def f(x, y):
        counts = (x * 3).clamp(-1e6, 1e6).nan_to_num(0.0).long() // 2
        counts.sum(dim=0).std(dim=0)          # unused: eager raises all the same
        return y * x

    x, y = torch.randn(2, 3, requires_grad=True), torch.randn(2, 3)
    expected = outcome(f, x, y)
    assert expected[0] is RuntimeError
    minidynamo.reset()
    assert outcome(minidynamo.optimize(backend)(f), x, y) == expected


@pytest.mark.parametrize("backend", BACKENDS)
def test_logit_with_eps_of_an_integer_tensor_clamps_in_float(backend):
    """seed 305 i277 (trace_once): logit(t, eps=0.2) of an int64 t clamps t to [0.2, 0.8] in the
    result's float dtype in eager (+-1.3863); the bridge's clamp ran on the integers (eps became
    0) and every value came back -inf."""
    def f(x):
        t = (x * 3).long() + 0
        return torch.logit(t, eps=0.2)

    x = torch.tensor([[-1.0, 0.1, 1.0], [0.5, -0.2, 2.0]])
    minidynamo.reset()
    same(f(x), minidynamo.optimize(backend)(f)(x))

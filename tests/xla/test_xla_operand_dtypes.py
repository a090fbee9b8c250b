"""A pointwise op computes in the dtype eager computes it in, whatever its operands' dtypes.

Eager's pointwise kernels convert every operand to one common dtype first, and a 0-dim tensor
does not widen it: ``f32 + f64 0-dim`` is computed in float32. torch_xla reports that dtype but
computed in the widest operand's: comparisons flipped (``0.1f < 0.1`` in float64), integer
sums did not wrap, float32 roundings were kept, and the result's data stayed float64 under a
float32 dtype, so a replayed backward graph refused it (fuzz seed 213 i34). ``bf16 + f16``
rounded one operand to the other 16-bit type. ``dtype_check.DtypeWatch`` converts such operands
while tracing (``_operands_in``).
"""

import pytest
import torch

import minidynamo
from tests.xla.xla_testing import BACKENDS

T = torch.tensor


def f64(value):
    return T(value, dtype=torch.float64)


def i64(value):
    return T(value, dtype=torch.int64)


CASES = {
    "f32 + f64 0-dim rounds in float32": (lambda x, s: (x + s) - x, (T([1e8, 1.0]), f64(1.0))),
    "f32 > f64 0-dim compares in float32": (lambda x, s: x > s, (T([0.1, 0.2]), f64(0.1))),
    "f32 == f64 0-dim": (lambda x, s: x == s, (T([0.1, 0.2]), f64(0.1))),
    "where of f32 and f64 0-dim": (lambda x, s: torch.where(x > 0, x + s, x) - x, (T([1e8, -1.]), f64(1.0))),
    "matmul then f64 0-dim": (lambda x, s: (x @ x.t()) + s - (x @ x.t()), (T([[1e4, 1.], [1., 1.]]), f64(1e-3))),
    "i32 + i64 0-dim wraps": (lambda i, n: (i + n) < 0, (T([2 ** 31 - 1, 3], dtype=torch.int32), i64(1))),
    "u8 + i64 0-dim wraps": (lambda i, n: (i + n) // 2, (T([250, 3], dtype=torch.uint8), i64(10))),
    "bf16 + f64 0-dim": (lambda h, s: (h + s) - h, (T([256., 1.], dtype=torch.bfloat16), f64(1.0))),
    "in place f32 += f64 0-dim": (lambda x, s: x.clone().add_(s) - x, (T([1e8, 1.0]), f64(1.0))),
    "bf16 / f16 in float32": (lambda a, b: a / b, (T([100.5], dtype=torch.bfloat16), T([0.3330078125], dtype=torch.float16))),
    "bf16 + f16 in float32": (lambda a, b: a + b, (T([100.5], dtype=torch.bfloat16), T([0.3330078125], dtype=torch.float16))),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", CASES)
def test_a_pointwise_op_computes_in_eagers_dtype(backend, case):
    fn, args = CASES[case]
    expected = fn(*args)
    actual = minidynamo.optimize(backend)(fn)(*args)
    assert actual.dtype == expected.dtype
    assert torch.equal(actual, expected), (actual, expected)


class ShiftedByAFloat64Buffer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.tensor(1.5))
        self.register_buffer("shift", torch.tensor(1.0, dtype=torch.float64))

    def forward(self, x):
        out = torch.relu(x) * self.scale + self.shift + 1
        return out.relu() * 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_float64_buffer_on_the_training_path(backend):
    """The replayed backward graph gets float32 data where its forward made float32 tensors."""
    torch.manual_seed(0)
    model = ShiftedByAFloat64Buffer()
    x = torch.randn(3, 4, requires_grad=True)
    expected = model(x)
    expected_grads = torch.autograd.grad(expected.double().sum(), [x, model.scale])
    compiled = minidynamo.optimize(backend)(model)
    for _ in range(2):
        actual = compiled(x)
        grads = torch.autograd.grad(actual.double().sum(), [x, model.scale])
        torch.testing.assert_close(actual, expected)
        for got, want in zip(grads, expected_grads):
            torch.testing.assert_close(got, want)

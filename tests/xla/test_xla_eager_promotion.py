"""Binary ops of operands of different dtypes answer in the dtype eager promotes them to.

``xla_bridge.eager_promotion``: several torch_xla lowerings take the result dtype from one
operand (``where(c, int64, float32)`` came back int64; ``bool & int64`` bool) or promote a
0-dim operand as if it had dimensions (``maximum(int32 vector, int64 0-dim)`` int64, eager
int32). Device fuzz seed 415 i95 found the first.
"""

import pytest
import torch

import minidynamo
from tests.xla.xla_testing import BACKENDS, to_xla

CONDITION = torch.tensor([True, False, True, False])
INTS = torch.tensor([-3, 2, 5, 7])
FLOATS = torch.tensor([0.5, -1.25, 2.0, 3.5])
BOOLS = torch.tensor([True, False, True, True])

CASES = {
    "where(c, int64, float32)": (lambda c, a, b: torch.where(c, a, b), INTS, FLOATS),
    "where(c, bool, int64)": (lambda c, a, b: torch.where(c, a, b), BOOLS, INTS),
    "where(c, int32, int64)": (lambda c, a, b: torch.where(c, a, b), INTS.int(), INTS),
    "remainder(int64, float32)": (lambda c, a, b: torch.remainder(a, b), INTS, FLOATS),
    "int32 % int64": (lambda c, a, b: a % b, INTS.int(), INTS.abs() + 1),
    "bool & int64": (lambda c, a, b: a & b, BOOLS, INTS),
    "uint8 | int32": (lambda c, a, b: a | b, INTS.abs().to(torch.uint8), INTS.int()),
    "bool ^ int64": (lambda c, a, b: a ^ b, BOOLS, INTS),
    "maximum(int32, int64 0-dim)": (lambda c, a, b: torch.maximum(a, b), INTS.int(), torch.tensor(3)),
    "minimum(int64 0-dim, uint8)": (lambda c, a, b: torch.minimum(a, b), torch.tensor(3), INTS.abs().to(torch.uint8)),
    "int32 << int64 0-dim": (lambda c, a, b: a << b, INTS.int(), torch.tensor(2)),
    "clamp(int32, int64 0-dim bounds)": (lambda c, a, b: torch.clamp(a, b, b + 2), INTS.int(), torch.tensor(1)),
    "clamp(int64, min=float)": (lambda c, a, b: a.clamp(min=-0.5), INTS, FLOATS),
    "clamp(int32, float, float)": (lambda c, a, b: torch.clamp(a, -2.5, 4.5), INTS.int(), FLOATS),
    "addcmul(int64, uint8, uint8)": (lambda c, a, b: torch.addcmul(a, b, b), INTS, torch.tensor([1, 200, 3, 40], dtype=torch.uint8)),
    # (probe AI r12: converted to uint8 first, -100 was read as 156; each operand becomes a float)
    "atan2(uint8, int8 0-dim)": (lambda c, a, b: torch.atan2(a, b), INTS.abs().to(torch.uint8), torch.tensor(-100, dtype=torch.int8)),
    "xlogy(uint8, int8 0-dim)": (lambda c, a, b: torch.xlogy(a, b), INTS.abs().to(torch.uint8), torch.tensor(-100, dtype=torch.int8)),
    # (probe AI r12: decomposed on the device, their comparisons met a uint8 and an int8 tensor)
    "isin(uint8, int8)": (lambda c, a, b: torch.isin(a, b), torch.tensor([128, 255, 1], dtype=torch.uint8),
                          torch.tensor([-128, -1, 1], dtype=torch.int8)),
    "bucketize(int8, uint8 boundaries)": (lambda c, a, b: torch.bucketize(a, b), torch.tensor([-2, 0, 3], dtype=torch.int8),
                                          torch.tensor([0, 1], dtype=torch.uint8)),
    "uint8 tensor == int8 tensor": (lambda c, a, b: a == b, torch.tensor([128, 255, 1], dtype=torch.uint8),
                                    torch.tensor([-128, -1, 1], dtype=torch.int8)),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("on_device", [False, True], ids=["host", "device"])
@pytest.mark.parametrize("case", CASES)
def test_a_binary_op_of_two_dtypes_answers_in_eagers_promoted_dtype(backend, on_device, case):
    fn, a, b = CASES[case]
    expected = fn(CONDITION, a, b)
    args = (CONDITION, a, b)
    if on_device:
        args = tuple(map(to_xla, args))
    actual = minidynamo.optimize(backend)(fn)(*args)
    assert actual.dtype == expected.dtype
    torch.testing.assert_close(actual.cpu(), expected, equal_nan=True)


NON_FINITE = torch.tensor([float("inf"), float("nan"), -3.0, -float("inf")])
MASK = torch.tensor([True, False, True, False])
BOOL_PRODUCTS = {
    "mask * inf": lambda m, x: m * float("inf"),
    "nan * mask": lambda m, x: float("nan") * m,
    "mask / 0.0": lambda m, x: m / 0.0,
    "mask // 0.0": lambda m, x: m // 0.0,
    "div(mask, 0.0, floor)": lambda m, x: torch.div(m, 0.0, rounding_mode="floor"),
    "x * mask": lambda m, x: x * m,
    "x / mask": lambda m, x: x / m,
    "x.mul_(mask)": lambda m, x: x.clone().mul_(m),
    "addcmul(x, mask, x)": lambda m, x: torch.addcmul(x, m, x),
    "where(mask, x, mask * x)": lambda m, x: torch.where(m, x, m * x),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", BOOL_PRODUCTS)
def test_a_bool_operand_of_a_product_is_converted_as_eager_converts_it(backend, case):
    """Probe AI r1: ``mask * inf`` gave 0 where eager gives NaN (``False`` promoted to 0.0, then
    ``0 * inf``): torch_xla converts the bool operand itself and XLA's simplifier turns
    ``y * convert(mask)`` into ``select(mask, y, 0)``; likewise quotients and ``addcmul``."""
    fn = BOOL_PRODUCTS[case]
    expected = fn(MASK, NON_FINITE)
    for _ in range(2):
        actual = minidynamo.optimize(backend)(fn)(MASK.clone(), NON_FINITE.clone())
        assert actual.dtype == expected.dtype
        torch.testing.assert_close(actual, expected, equal_nan=True)
    minidynamo.reset()


COMPLEX_WITH_NON_FINITE = torch.tensor([complex(float("inf"), 0), complex(1, 2), complex(0, float("nan")), 3j])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", ["mask * z", "z.mul_(mask)", "mask.to(complex64) * z"])
def test_a_bool_operand_of_a_complex_product_is_converted_as_eager_converts_it(backend, case):
    """Probe AK r2: the bool-operand rule stopped at floating results; ``mask * z`` of a complex
    ``z`` was a select on the device (``False * (inf+0j)`` gave 0j, eager nan+nanj)."""
    fn = {"mask * z": lambda m, z: m * z, "z.mul_(mask)": lambda m, z: z.clone().mul_(m),
          "mask.to(complex64) * z": lambda m, z: m.to(torch.complex64) * z}[case]
    expected = fn(MASK, COMPLEX_WITH_NON_FINITE)
    actual = minidynamo.optimize(backend)(fn)(MASK.clone(), COMPLEX_WITH_NON_FINITE.clone())
    torch.testing.assert_close(actual, expected, equal_nan=True)
    minidynamo.reset()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", ["x * mask", "mask * x", "torch.mul(x, mask)"])
def test_the_gradient_through_a_bool_product_is_eagers(backend, case):
    """Probe AK r9: the backward's ``grad * mask`` was left as recorded, and XLA made it a
    select: where the mask is False and the incoming gradient inf or NaN, eager's gradient is
    NaN (and -0.0 for a negative one), trace_once's was 0; trivial's backward (torch_xla's own
    autograd, once the runtime is up) too: such a graph trains eagerly there."""
    from xla_bridge import device

    device.xla_device()                      # (trivial's first call would run eagerly before it)
    fn = {"x * mask": lambda x, m: x * m, "mask * x": lambda x, m: m * x,
          "torch.mul(x, mask)": lambda x, m: torch.mul(x, m)}[case]
    incoming = torch.tensor([1.0, float("inf"), float("nan"), -1.0])
    grads = []
    for f in (fn, minidynamo.optimize(backend)(fn)):
        x = torch.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
        f(x, MASK).backward(incoming)
        grads.append(x.grad)
    assert torch.equal(grads[1].isnan(), grads[0].isnan())
    assert torch.equal(torch.signbit(grads[1].nan_to_num()), torch.signbit(grads[0].nan_to_num()))
    torch.testing.assert_close(grads[1], grads[0], equal_nan=True)
    minidynamo.reset()

"""Ops whose XLA lowering computes in another precision than eager's CPU kernels answer as eager.

``xla_bridge.eager_precision``: 16-bit float reductions accumulate in float32 (XLA summed a bf16
tensor over two dimensions in bf16: 256 for 1024 ones), integer ``//`` divides exactly (torch_xla
went through float32: wrong above 2**24), and a float converted to an integer out of range wraps
as eager's conversion does (XLA saturated ``-1.0`` to uint8 0; eager gives 255).
"""

import pytest
import torch
import torch.nn.functional as F

import minidynamo
from tests.xla.xla_testing import BACKENDS

BF16, F16 = torch.bfloat16, torch.float16


def ones(*shape, dtype=BF16):
    return torch.ones(*shape, dtype=dtype)


REDUCTIONS = {
    "bf16 sum over two dims": (lambda x: x.sum((-1, -2)), ones(2, 32, 32)),
    "bf16 sum of everything": (lambda x: x.sum(), ones(2, 32, 32)),
    "bf16 global average pool": (lambda x: x.mean((-1, -2)), ones(2, 32, 32) * 3),
    "bf16 adaptive_avg_pool2d": (lambda x: F.adaptive_avg_pool2d(x, 1), ones(1, 1, 64, 64) * 3),
    "bf16 vector_norm over two dims": (lambda x: torch.linalg.vector_norm(x, dim=(-1, -2)), ones(64, 64)),
    "bf16 avg_pool2d of a large window": (lambda x: F.avg_pool2d(x, 64), ones(1, 1, 64, 64) * 3),
    "fp16 avg_pool1d of a large window": (lambda x: F.avg_pool1d(x, 4096), ones(1, 1, 4096, dtype=F16)),
    "fp16 mean of more than 65504": (lambda x: x.mean(), ones(70000, dtype=F16)),
    "fp16 mean(dtype=float32)": (lambda x: x.mean(dtype=torch.float32), ones(70000, dtype=F16)),
    "fp16 softmax over more than 65504": (lambda x: torch.softmax(x, 0)[:2], torch.zeros(70000, dtype=F16)),
    "fp16 l1_loss over more than 65504": (lambda x: F.l1_loss(x, torch.zeros_like(x)), ones(100000, dtype=F16)),
    "fp16 var over more than 65504": (lambda x: x.var(), torch.arange(70000.).remainder(2).half()),
    "fp16 bmm over 1000 terms": (lambda x: torch.bmm(x, x.transpose(1, 2)),
                                 torch.randn(4, 32, 1000, generator=torch.Generator().manual_seed(0)).half()),
    "bf16 nan_to_num of infinities": (lambda x: torch.nan_to_num(x * 1),
                                      torch.tensor([float("inf"), -float("inf"), float("nan")], dtype=BF16)),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", REDUCTIONS)
def test_a_16_bit_reduction_accumulates_in_float32_as_eager(backend, case):
    fn, x = REDUCTIONS[case]
    expected = fn(x)
    actual = minidynamo.optimize(backend)(fn)(x)
    assert actual.dtype == expected.dtype
    torch.testing.assert_close(actual, expected, rtol=1e-2, atol=1e-6)


def _draw(*shape, dtype=BF16, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


PRODUCTS_WITH_A_TERM = {   # probe AB r8: XLA rounded the product to 16 bits, then the sum again
    "bf16 F.linear (2-D, bias)": (lambda x, w, b: F.linear(x, w, b), (_draw(16, 12), _draw(8, 12, seed=1), _draw(8, seed=2))),
    "fp16 F.linear (2-D, bias)": (lambda x, w, b: F.linear(x, w, b),
                                  (_draw(16, 12, dtype=F16), _draw(8, 12, dtype=F16, seed=1), _draw(8, dtype=F16, seed=2))),
    "bf16 F.linear (3-D, contiguous: eager's one addmm)": (lambda x, w, b: F.linear(x, w, b),
                                                          (_draw(4, 16, 32), _draw(24, 32, seed=1), _draw(24, seed=2))),
    "bf16 F.linear (3-D, transposed: eager's matmul, then add_)": (
        lambda x, w, b: F.linear(x.transpose(0, 1), w, b), (_draw(16, 4, 32), _draw(24, 32, seed=1), _draw(24, seed=2))),
    "bf16 addmm, beta and alpha": (lambda m, a, b: torch.addmm(m, a, b, beta=0.5, alpha=2),
                                   (_draw(16, 8), _draw(16, 12, seed=1), _draw(12, 8, seed=2))),
    "bf16 baddbmm": (torch.baddbmm, (_draw(3, 16, 8), _draw(3, 16, 12, seed=1), _draw(3, 12, 8, seed=2))),
    "bf16 addmv": (torch.addmv, (_draw(16), _draw(16, 12, seed=1), _draw(12, seed=2))),
    "bf16 conv2d with a bias": (lambda x, w, b: F.conv2d(x, w, b),
                                (_draw(2, 3, 8, 8), _draw(4, 3, 3, 3, seed=1), _draw(4, seed=2))),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", PRODUCTS_WITH_A_TERM)
def test_a_16_bit_product_with_a_term_added_rounds_once_as_eager(backend, case):
    fn, args = PRODUCTS_WITH_A_TERM[case]
    expected = fn(*args)
    actual = minidynamo.optimize(backend)(fn)(*args)
    assert actual.dtype == expected.dtype
    assert torch.equal(actual, expected), (actual - expected).abs().max()


SIXTEEN_BIT_AS_EAGER = {   # probe AD F1, F2, F10: bit for bit (eager's roundings, step by step)
    "bf16 x - 0.3 (the number rounded first)": (lambda x: x - 0.3, (_draw(4096) * 3,)),
    "fp16 sub_(0.3) in place": (lambda x: x.clone().sub_(0.3), (_draw(4096, dtype=F16) * 3,)),
    "bf16 x * 0.1 + 0.2 - 3.0": (lambda x: x * 0.1 + 0.2 - 3.0, (_draw(4096) * 3,)),
    "fp16 x + 0.3 with alpha=2": (lambda x: torch.add(x, 0.3, alpha=2), (_draw(4096, dtype=F16),)),
    "bf16 add(x, y, alpha=0.3)": (lambda x, y: torch.add(x, y, alpha=0.3), (_draw(4096) * 3, _draw(4096, seed=1) * 3)),
    "bf16 log_softmax": (lambda x: x.log_softmax(-1), (_draw(5, 1200) * 20,)),
    "fp16 log_softmax": (lambda x: x.log_softmax(-1), (_draw(5, 1200, dtype=F16) * 20,)),
    "bf16 mish": (F.mish, (_draw(4096) * 3,)),
    "bf16 mish in place": (lambda x: F.mish(x.clone(), inplace=True), (_draw(4096) * 3,)),
}


@pytest.mark.parametrize("case", SIXTEEN_BIT_AS_EAGER)
def test_16_bit_arithmetic_rounds_where_eager_rounds(case):
    fn, args = SIXTEEN_BIT_AS_EAGER[case]
    with torch.no_grad():
        expected = fn(*args)
        actual = minidynamo.optimize("torchxla_trace_once")(fn)(*args)
    assert torch.equal(actual, expected), (actual.float() - expected.float()).abs().max()


DIVISIONS = {
    "int32 // 7": (lambda x: x // 7, torch.tensor([20000001, -20000001], dtype=torch.int32)),
    "int32 // 3 near 2**30": (lambda x: x // 3, torch.tensor([1073741825], dtype=torch.int32)),
    "int64 flat-index math": (lambda i: (i // 640, i % 640), torch.tensor([17141759, 3])),
    "int64 beyond 2**53": (lambda i: torch.floor_divide(i, 1), torch.tensor([2 ** 53 + 1, 2 ** 60 + 3])),
    "int64 trunc of negatives": (lambda i: torch.div(i, 3, rounding_mode="trunc"), torch.tensor([-(2 ** 40) - 1, 7])),
    "int64 by a tensor": (lambda i: torch.div(i, torch.tensor([1000003, -7]), rounding_mode="floor"),
                          torch.tensor([99999999 * 1000003, 2 ** 55 + 1])),
    "in place //=": (lambda i: i.clone().floor_divide_(7), torch.tensor([20000001], dtype=torch.int32)),
    "uint8 // -1 (the number wraps to 255)": (lambda i: i // -1, torch.tensor([0, 255, 3], dtype=torch.uint8)),
    # probe Z r06, r07, r09, r17
    "int32 near its limits // 3": (lambda i: i // 3, torch.tensor([-2 ** 31, 2 ** 31 - 1, -7], dtype=torch.int32)),
    "int32 // -128": (lambda i: i // -128, torch.tensor([2 ** 31 - 1, -2 ** 31], dtype=torch.int32)),
    "int32 // True": (lambda i: i // True, torch.tensor([2147483646, -2147483647], dtype=torch.int32)),
    "int32 // 2**31 (wraps to -2**31)": (lambda i: torch.div(i, 2 ** 31, rounding_mode="floor"),
                                         torch.tensor([1, 7], dtype=torch.int32)),
    "int8 % 200 (wraps to -56)": (lambda i: i % 200, torch.tensor([1, 7, -63], dtype=torch.int8)),
    "uint8 % -3 (wraps to 253)": (lambda i: i % -3, torch.tensor([1, 200], dtype=torch.uint8)),
    "int8 // a 0-dim int64 200": (lambda i: i // torch.tensor(200), torch.tensor([1, 7, -63], dtype=torch.int8)),
}


def test_an_integer_division_by_a_number_that_wraps_to_zero_raises_as_in_eager():
    fn = lambda i: torch.div(i, 256, rounding_mode="floor")     # noqa: E731  (256 is 0 in int8)
    x = torch.tensor([1, 2], dtype=torch.int8)
    with pytest.raises(RuntimeError):
        fn(x)
    with pytest.raises(RuntimeError):
        minidynamo.optimize("torchxla_trace_once")(fn)(x)


TENTHS = torch.tensor([0.3, 0.7, 1.0, 0.2, 0.5, 0.9, 2.3, -0.3, 0.0, -0.0])
FLOOR_DIVISIONS = {      # probe X r17: torch_xla floored x / 0.1 (0.7 // 0.1 gave 7.0; Python's is 6.0)
    "float32 // 0.1": (lambda x: x // 0.1, TENTHS),
    "float32 // a tensor": (lambda x: x // torch.full_like(x, 0.1), TENTHS),
    "float32 // -0.1": (lambda x: x // -0.1, TENTHS),
    "div(rounding_mode='floor')": (lambda x: torch.div(x, 0.1, rounding_mode="floor"), TENTHS),
    "float64 // 0.1": (lambda x: x // 0.1, TENTHS.double()),
    "float16 // 0.1": (lambda x: x // 0.1, TENTHS.half()),
    "bfloat16 // 0.1": (lambda x: x // 0.1, TENTHS.bfloat16()),
    "// 0 (IEEE)": (lambda x: x // 0.0, TENTHS),
    "in place //=": (lambda x: x.clone().floor_divide_(0.1), TENTHS),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", FLOOR_DIVISIONS)
def test_float_floor_division_follows_pythons_rule(backend, case):
    fn, x = FLOOR_DIVISIONS[case]
    expected, actual = fn(x), minidynamo.optimize(backend)(fn)(x)
    assert actual.dtype == expected.dtype
    torch.testing.assert_close(actual, expected, rtol=0, atol=0, equal_nan=True)
    assert torch.equal(torch.signbit(actual), torch.signbit(expected))


COMPARISONS = {          # probe X r10, r11, r07: the number is converted to the compared dtype first
    "float32 == 0.1": (lambda x: x == 0.1, torch.tensor([0.1, 0.2])),
    "float32 > 0.1": (lambda x: x > 0.1, torch.tensor([0.1, 0.2])),
    "float16 == 0.1": (lambda x: x == 0.1, torch.tensor([0.1, 0.2], dtype=F16)),
    "bfloat16 != 0.1": (lambda x: x != 0.1, torch.tensor([0.1, 0.2], dtype=BF16)),
    "where(x == 0.7)": (lambda x: torch.where(x == 0.7, 1, 0), torch.tensor([0.7, 0.2])),
    "int64 == 2**53 + 1 as a float": (lambda x: x == float(2 ** 53 + 1), torch.tensor([2 ** 53, 2 ** 53 + 1])),
    "int8 == 200 (wraps)": (lambda x: x == 200, torch.tensor([-56, 100], dtype=torch.int8)),
    "uint8 > -1 (wraps)": (lambda x: x > -1, torch.tensor([0, 255], dtype=torch.uint8)),
    "uint8 < 256 (wraps)": (lambda x: x < 256, torch.tensor([0, 255], dtype=torch.uint8)),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", COMPARISONS)
def test_a_comparison_with_a_number_converts_it_first(backend, case):
    fn, x = COMPARISONS[case]
    expected, actual = fn(x), minidynamo.optimize(backend)(fn)(x)
    assert actual.dtype == expected.dtype and torch.equal(actual, expected), (actual, expected)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", DIVISIONS)
def test_integer_division_is_exact(backend, case):
    fn, x = DIVISIONS[case]
    expected = fn(x)
    actual = minidynamo.optimize(backend)(fn)(x)
    for a, e in zip(torch.utils._pytree.tree_leaves(actual), torch.utils._pytree.tree_leaves(expected)):
        assert a.dtype == e.dtype and torch.equal(a, e), (a, e)


OUT_OF_RANGE = torch.tensor([-1.0, 200.0, 300.0, float("nan"), 3e9, -3e9, 70000.0])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64])
@pytest.mark.parametrize("source", [torch.float32, torch.float64, BF16, F16])
def test_a_float_out_of_an_integers_range_converts_as_eager(backend, dtype, source):
    fn = lambda x: (x * 1).to(dtype)      # noqa: E731  (an op first: the conversion is in the graph)
    x = OUT_OF_RANGE.to(source)
    expected = fn(x)
    assert torch.equal(minidynamo.optimize(backend)(fn)(x), expected)


def test_integer_division_of_python_numbers_is_left_to_the_op():
    """Fuzz seed 216 i545: ``torch.div(n + 7, 2, rounding_mode="floor")`` of Python ints reached
    the formula with a Python int dividend (``remainder(int, int)`` raised TypeError)."""
    from xla_bridge.eager_precision import integer_division_as_eager
    assert integer_division_as_eager("floor")(7, 2) is NotImplemented
    assert torch.equal(integer_division_as_eager("floor")(torch.tensor([7]), 2), torch.tensor([3]))


HALVES_WITH_NUMBERS = {   # probe X r13: eager keeps the number in float32; 1e5 in float16 is inf
    "float16 / 1e5": (lambda x: x / 1e5, torch.tensor([6e4, 1.0, -3.0], dtype=F16)),
    "float16 * 1e-8": (lambda x: x * 1e-8 * 1e4, torch.tensor([6e4, 1.0, -3.0], dtype=F16)),
    "float16 /= 1e5": (lambda x: x.clone().div_(1e5), torch.tensor([6e4, 1.0], dtype=F16)),
    "bfloat16 * 0.1": (lambda x: x * 0.1, torch.linspace(-3, 3, 101).to(BF16)),
    "bfloat16 - 1e39": (lambda x: x - 1e39, torch.tensor([1.0, -2.0], dtype=BF16)),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", HALVES_WITH_NUMBERS)
def test_a_16_bit_float_with_a_number_computes_as_eager(backend, case):
    fn, x = HALVES_WITH_NUMBERS[case]
    expected, actual = fn(x), minidynamo.optimize(backend)(fn)(x)
    assert actual.dtype == expected.dtype
    torch.testing.assert_close(actual, expected, rtol=0, atol=0, equal_nan=True)


def test_an_in_place_comparison_converts_the_number_too():
    """Probe Z r18: ``x.eq_(0.1)`` on an argument compared with 0.1 itself."""
    for fn, x in ((lambda a: a.eq_(0.1), torch.tensor([0.1, 0.2])),
                  (lambda a: a.gt_(200), torch.tensor([-56, 100], dtype=torch.int8))):
        expected, got = x.clone(), x.clone()
        fn(expected)
        minidynamo.optimize("torchxla_trace_once")(fn)(got)
        assert torch.equal(got, expected), (got, expected)


@pytest.mark.parametrize("backend", BACKENDS)
def test_true_division_of_integers_by_a_number_out_of_their_range(backend):
    """Probe Z r10: ``int8 / 200`` divides in float32 in eager; torch_xla converted 200 to int8
    first (``1 / 200`` gave -0.0179, ``1 / 256`` inf)."""
    for fn in (lambda x: x / 200, lambda x: x / 256, lambda x: x / 3.5, lambda x: x / 2):
        x = torch.tensor([1, 0, -7], dtype=torch.int8)
        expected, actual = fn(x), minidynamo.optimize(backend)(fn)(x)
        assert actual.dtype == expected.dtype and torch.equal(actual, expected), (actual, expected)


COMPLEX = torch.tensor([1e-30j, 0j, 2 + 0j, -2.25 + 0j, 1e30 + 1e30j], dtype=torch.complex64)
COMPLEX_CONVERSIONS = {
    "x.bool()": lambda x: x.bool(),
    "logical_not(x)": torch.logical_not,
    "logical_xor(x, 0)": lambda x: torch.logical_xor(x, torch.zeros_like(x)),
    "logical_and(x, x)": lambda x: torch.logical_and(x, x),
    "where(x.bool(), 1, 0)": lambda x: torch.where(x.bool(), 1, 0),
    "x.to(uint8)": lambda x: x.to(torch.uint8),
    "x.to(int64)": lambda x: x.to(torch.int64),
    # (probe AK r3: their out= and in-place forms too)
    "logical_not(x, out=bool)": lambda x: torch.logical_not(x, out=torch.empty(5, dtype=torch.bool)),
    "logical_and(x, 1, out=bool)": lambda x: torch.logical_and(x, torch.ones(5), out=torch.empty(5, dtype=torch.bool)),
    "x.logical_not_()": lambda x: x.clone().logical_not_(),
    "x.logical_xor_(0)": lambda x: x.clone().logical_xor_(torch.zeros(5)),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", COMPLEX_CONVERSIONS)
def test_a_complex_number_converts_to_a_truth_value_or_an_integer_as_eager(backend, case):
    """Probe AI r5: ``bool(1e-30j)`` was False on the device (the real part alone), and so were
    the logical ops, which convert too; an out-of-range complex number converted to an integer
    saturated where eager wraps its real part."""
    op = COMPLEX_CONVERSIONS[case]
    expected = op(COMPLEX)
    actual = minidynamo.optimize(backend)(op)(COMPLEX.clone())
    assert actual.dtype == expected.dtype and torch.equal(actual, expected)
    minidynamo.reset()


FLOATS_OUT_OF_RANGE = torch.tensor([-1.5, -4.0, 3.0, 300.0])
COPIES_INTO_INTEGERS = {
    "uint8.copy_(float32)": lambda s: torch.zeros(4, dtype=torch.uint8).copy_(s),
    "uint8[:] = float32": lambda s: (lambda t: (t.__setitem__(slice(None), s), t)[1])(torch.zeros(4, dtype=torch.uint8)),
    "uint8.copy_(float16)": lambda s: torch.zeros(4, dtype=torch.uint8).copy_(s.half()),
    "int8.copy_(float64)": lambda s: torch.zeros(4, dtype=torch.int8).copy_(s.double()),
    "int8[1:] = row": lambda s: (lambda t: (t.__setitem__(slice(1, None), s[1:]), t)[1])(torch.zeros(4, dtype=torch.int8)),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", COPIES_INTO_INTEGERS)
def test_a_float_copied_into_an_integer_tensor_converts_as_eager(backend, case):
    """Probe AI r10: ``copy_`` (and ``t[...] = floats``) saturated out-of-range values into the
    integer tensor (-1.5 into uint8 gave 0, eager wraps to 255); ``.to(uint8)`` already wrapped.
    A device trace dispatches the copy in its functional form, ``aten.copy``."""
    op = COPIES_INTO_INTEGERS[case]
    expected = op(FLOATS_OUT_OF_RANGE)
    actual = minidynamo.optimize(backend)(op)(FLOATS_OUT_OF_RANGE.clone())
    assert actual.dtype == expected.dtype and torch.equal(actual, expected)
    minidynamo.reset()


ROUNDED_EVERY_OP = {
    "x.bfloat16().sin().float()": lambda x: x.bfloat16().sin().float(),
    "bfloat16 square().square() to uint8": lambda x: x.bfloat16().square().square().to(torch.uint8),
    "bfloat16 exp() / 3 widened": lambda x: (x.bfloat16().exp() / 3).float(),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", ROUNDED_EVERY_OP)
def test_16_bit_results_are_rounded_at_every_op_as_eager(backend, case):
    """Probe AI r17: XLA kept a chain of bfloat16 ops in float32 and rounded once at the end
    (``xla_allow_excess_precision``): ``sin`` of 1 widened gave 0.84147 where eager's rounded
    result is 0.83984375, and an integer conversion after it came out one off. The bridge starts
    the runtime with that flag off."""
    op = ROUNDED_EVERY_OP[case]
    x = torch.tensor([1.0, 5.125, 0.1, -0.155])
    expected = op(x)
    actual = minidynamo.optimize(backend)(op)(x)
    assert actual.dtype == expected.dtype and torch.equal(actual, expected)
    minidynamo.reset()


_ONES_INTO_ONE_PLACE = torch.zeros(300, dtype=torch.long)
SUMS_INTO_PLACES = {
    "scatter_add": lambda x: torch.zeros(1, dtype=x.dtype).scatter_add(0, _ONES_INTO_ONE_PLACE, x),
    "scatter_add_": lambda x: torch.zeros(1, dtype=x.dtype).scatter_add_(0, _ONES_INTO_ONE_PLACE, x),
    "scatter_reduce sum": lambda x: torch.zeros(1, dtype=x.dtype).scatter_reduce(0, _ONES_INTO_ONE_PLACE, x, "sum"),
    "embedding_bag sum": lambda x: F.embedding_bag(torch.arange(300), x.reshape(300, 1), torch.tensor([0]), mode="sum"),
    "cumprod": lambda x: (x * 0 + 1.00101).cumprod(0)[-1:],
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("case", SUMS_INTO_PLACES)
def test_16_bit_sums_into_places_accumulate_in_float32_as_eager(backend, dtype, case):
    """Probe AI r22: 300 bfloat16 1.01s scattered into one place gave 346 (eager 302: its CPU
    kernel sums in float32 and rounds once), a bfloat16 embedding bag's sum of 4096 rows 512
    (eager 4128), a float16 cumprod 52.75 (eager 54.5)."""
    op = SUMS_INTO_PLACES[case]
    x = torch.full((300,), 1.01, dtype=dtype)
    expected = op(x)
    actual = minidynamo.optimize(backend)(op)(x)
    assert actual.dtype == expected.dtype and torch.equal(actual, expected)
    minidynamo.reset()

"""Dtypes torch_xla gets wrong whatever the op.  It loses the imaginary part of complex128
tensors (``x.to(xla).cpu()`` of ``1+2j`` is ``1+0j``) and returns uint16/32/64 results as the
signed type of their width, so a graph that holds one, as an argument, a value it makes
(``float64 * 1j``) or the input of an op it partitions out, runs eagerly; complex64 stays on
the device, its result dtypes checked like any other."""

import pytest
import torch

import minidynamo
import xla_bridge
from tests.xla.xla_testing import BACKENDS

PROGRAMS = {
    "float64 times 1j": lambda a: a.real.double() * 1j,
    "plus a complex constant": lambda a: a + (1 + 2j),
    "product": lambda a: a * a.conj(),
    "sum": lambda a: a.sum(),
    "matmul": lambda a: a.reshape(2, 3) @ a.reshape(3, 2),
    "exp, then the real part": lambda a: torch.view_as_real(a.exp()),
    "abs": lambda a: a.abs(),
    "angle (partitioned out)": lambda a: a.angle(),
    "complex from parts": lambda a: torch.complex(a.real, a.imag) * 2,
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
@pytest.mark.parametrize("program", PROGRAMS.values(), ids=PROGRAMS)
def test_complex_programs_answer_as_eager(backend, dtype, program):
    xla_bridge.device.xla_device()
    minidynamo.reset()
    a = (torch.randn(6, dtype=torch.float64) + 1j * torch.randn(6, dtype=torch.float64)).to(dtype)
    expected = program(a)
    got = minidynamo.optimize(backend)(program)(a)
    assert got.dtype == expected.dtype and torch.allclose(got, expected, rtol=1e-5, atol=1e-6)
    minidynamo.reset()


def test_a_complex128_graph_says_why_it_runs_eagerly():
    xla_bridge.device.xla_device()
    minidynamo.reset()
    xla_bridge.reset_counters()
    x = torch.tensor([1.0, -2.0], dtype=torch.float64)
    assert torch.equal(minidynamo.optimize("torchxla_trace_once")(lambda x: x * 1j)(x), x * 1j)
    assert "complex128" in xla_bridge.counters.reasons[-1] and "imaginary" in xla_bridge.counters.reasons[-1]
    minidynamo.reset()


UNSIGNED_PROGRAMS = {
    "times two": lambda a: a * 2,
    "concatenated": lambda a: torch.cat([a, a]),
    "a transposed copy": lambda a: a.view(2, 2).t().contiguous(),
    "made from int64": lambda a: (a.long() * 3).to(a.dtype),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [torch.uint16, torch.uint32, torch.uint64])
@pytest.mark.parametrize("program", UNSIGNED_PROGRAMS.values(), ids=UNSIGNED_PROGRAMS)
def test_wide_unsigned_programs_keep_their_dtype(backend, dtype, program):
    xla_bridge.device.xla_device()
    minidynamo.reset()
    a = torch.tensor([0, 1, 2, 3]).to(dtype)
    expected = program(a)
    got = minidynamo.optimize(backend)(program)(a)
    assert got.dtype == expected.dtype and torch.equal(got, expected)
    minidynamo.reset()

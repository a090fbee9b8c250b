"""The trace asks eager's CPU kernel whether it takes an op's dtypes (``tracer/eager_checks.py``):
it runs the op once on tensors of ones.  Those stand-ins have the real shapes (which the meta
kernel accepted) when the arguments are small; one-element stand-ins, for large arguments, are
never given to an op over a list of tensors, whose kernel may trust sizes they do not keep."""

import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as F

import minidynamo
from minidynamo.tracer.eager_checks import _refusal, _takes_tensor_lists

GRU_IN_INFERENCE_MODE = textwrap.dedent("""
    import torch, minidynamo
    gru = torch.nn.GRU(2, 3, batch_first=True)

    def f(y):
        with torch.inference_mode():       # its GRU op is seeded: the trace asks the CPU kernel
            return gru(y.unsqueeze(1))[0][:, 0]

    print(torch.allclose(minidynamo.optimize("eager")(f)(torch.ones(3, 2)), f(torch.ones(3, 2))))
""")


def test_an_rnn_op_is_asked_on_stand_ins_of_its_own_shapes():
    """Found by the fuzzer (seed 5063, program 228): one-element weights made the GRU kernel
    read out of bounds, and the process died (a subprocess here, so a crash fails one test)."""
    done = subprocess.run([sys.executable, "-c", GRU_IN_INFERENCE_MODE], capture_output=True, text=True,
                          timeout=300, cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "True"


def test_which_ops_take_lists_of_tensors():
    aten = torch.ops.aten
    assert _takes_tensor_lists(aten.gru.input) and _takes_tensor_lists(aten.cat.default)
    assert _takes_tensor_lists(aten.index.Tensor)              # Tensor?[]
    assert not _takes_tensor_lists(aten.add.Tensor) and not _takes_tensor_lists(aten.topk.default)


def test_a_refused_dtype_is_still_found_at_the_real_shapes():
    """``topk(k=2)`` cannot run on one-element stand-ins; at the real shapes it can, so a dtype
    the kernel lacks is told apart from one it takes."""
    meta = torch.empty(4, 5, dtype=torch.bool, device="meta")
    assert "does not support bool" in str(_refusal(torch.ops.aten.topk.default, (meta, 2), {}))
    assert _refusal(torch.ops.aten.topk.default, (meta.float(), 2), {}) is None


def test_a_large_op_over_a_list_is_not_asked():
    big = torch.empty(70_000, dtype=torch.int32, device="meta")
    assert _refusal(torch.ops.aten.cat.default, ([big, big],), {}) is None
    minidynamo.reset()



_D, _F = torch.ones(4, 3, dtype=torch.float64), torch.ones(2, 3)
_ROWS, _ZEROS = torch.tensor([0, 1]), torch.zeros(2, 3, dtype=torch.long)
aten = torch.ops.aten


@pytest.mark.parametrize("op, args, eager_refuses", [
    (aten.index_copy_.default, (_D, 0, _ROWS, _F), True),
    (aten.index_add.default, (_D, 0, _ROWS, _F), True),
    (aten.scatter_add_.default, (_D, 0, _ZEROS, _F), True),
    (aten.add.Tensor, (_D, _F[0]), False),            # promotes
], ids=["index_copy_", "index_add", "scatter_add_", "add"])
def test_mixed_floating_dtypes_the_cpu_kernel_refuses(op, args, eager_refuses):
    """Meta kernels of ``index_copy_`` and ``index_add`` take a float32 source into float64 (fuzz
    seed 5074 program 163); eager's kernels refuse it, so the op must not be captured (a
    functional backend would answer).  The kernel is asked with the floating stand-ins made
    float32 and index stand-ins zeros; kernels that promote (``add``) are not refused."""
    assert (_refusal(op, args, {}) is not None) is eager_refuses
    if not eager_refuses:
        return
    fn = lambda d, f: op(d.clone(), *args[1:-1], f)      # noqa: E731
    with pytest.raises(RuntimeError, match="dtype|scalar type"):
        fn(_D, _F)
    minidynamo.reset()
    with pytest.raises(RuntimeError, match="dtype|scalar type"):
        minidynamo.optimize("torchxla_trace_once")(fn)(_D, _F)


_F8 = torch.tensor([1.0, 2.0, 3.0, 4.0]).to(torch.float8_e4m3fn)
_INDICES = torch.tensor([1, 3])
KERNELS_MISSING_FOR_A_DTYPE = {
    "float8 x[idx]": (lambda x: x[_INDICES], _F8),
    "float8 gather": (lambda x: x.gather(0, _INDICES), _F8),
    "float8 take": (lambda x: x.take(_INDICES), _F8),
    "sign of complex": (torch.sign, torch.tensor([1 + 1j, -2j], dtype=torch.complex64)),
}


@pytest.mark.parametrize("case", KERNELS_MISSING_FOR_A_DTYPE)
def test_a_kernel_missing_for_a_dtype_beside_indices_raises_as_in_eager(case):
    """Probe AI r6: ``x[idx]`` of a float8 tensor (eager: "index_cpu" not implemented for
    'Float8_e4m3fn') was asked again with every stand-in float32, indices too, which failed
    for another reason, so the refusal did not count; ``torch.sign`` of a complex tensor words
    its refusal "not intended to support complex numbers". Both ran on XLA and answered."""
    fn, x = KERNELS_MISSING_FOR_A_DTYPE[case]
    with pytest.raises((RuntimeError, NotImplementedError)) as eager:
        fn(x)
    for backend in ("eager", "torchxla_trace_once"):
        minidynamo.reset()
        with pytest.raises(type(eager.value)):
            minidynamo.optimize(backend)(fn)(x)
    minidynamo.reset()


SHIFT_OF_A_FLOAT = textwrap.dedent("""
    import torch, minidynamo
    complex_x = torch.tensor([1 + 2j, 3 - 1j])
    for shift, x in ((lambda x: 7 << x, torch.ones(3)), (lambda x: 7 >> x, torch.ones(3)),
                     (lambda x: torch.fmod(x, 1j), complex_x), (lambda x: torch.remainder(x, 1j), complex_x)):
        minidynamo.reset()
        try:
            minidynamo.optimize("torchxla_trace_once")(shift)(x)
        except NotImplementedError as error:
            print("raised", error)
        else:
            print("answered")
""")


def test_a_shift_of_a_float_tensor_raises_as_in_eager():
    """Probe AI r16, r21: ``7 << x`` of a float ``x`` (``bitwise_left_shift.Scalar_Tensor``, whose
    meta kernel takes a float) and ``fmod`` of a complex tensor by a complex number reached XLA's
    compiler, which crashed the process ("Shifts only work with integral types!"); eager raises
    NotImplementedError. The kernel of an op of integers only is asked for any dtype, and its
    refusal counts where the same call in int64 passes; the reference call of a complex
    tensor's refusal takes a complex number's real part. (A subprocess: the old failure killed
    the process.)"""
    done = subprocess.run([sys.executable, "-c", SHIFT_OF_A_FLOAT], capture_output=True, text=True, timeout=300,
                          cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))),
                          env={**os.environ, "PJRT_DEVICE": "CPU"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.count("raised") == 4, done.stdout


NUMBERS_EAGER_REFUSES = {
    "addcmul(value=1e40) of float32": lambda x: torch.addcmul(x, x, x, value=1e40),
    "threshold(x, 1.5, 1e40) of float32": lambda x: F.threshold(x, 1.5, 1e40),
    "index_fill of a bool tensor with 1j": lambda x: (x > 0).index_fill(0, torch.tensor([1]), 1j),
}


@pytest.mark.parametrize("case", NUMBERS_EAGER_REFUSES)
def test_a_number_eagers_kernel_refuses_raises_as_in_eager(case):
    """Probe AI r11: a Python number beyond float32's range given to a float32 op that converts it
    with a range check (eager: "value cannot be converted to type float without overflow"), and
    a complex number given to a bool tensor's ``index_fill``, were computed on XLA."""
    fn = NUMBERS_EAGER_REFUSES[case]
    x = torch.tensor([1.0, 2.0, 3.0, 4.0])
    with pytest.raises(RuntimeError):
        fn(x)
    for backend in ("eager", "torchxla_trace_once"):
        minidynamo.reset()
        with pytest.raises(RuntimeError):
            minidynamo.optimize(backend)(fn)(x)
    minidynamo.reset()

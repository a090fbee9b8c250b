"""Global flags that change what a host kernel does (minidynamo/tracer/kernel_flags.py): a graph
compiled before a flag flipped is not replayed under it, and one compiled under it runs as eager."""

import contextlib

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import minidynamo
from tests.xla.xla_testing import BACKENDS


@contextlib.contextmanager
def deterministic():
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(False)


def nan_filled(x):
    return x + torch.empty_like(x).isnan().float()       # NaN-filled memory under the flag


def legacy_new(x):
    return x + x.new(3).isnan().float()                   # Tensor.new: memory as torch.empty's


def put_without_accumulate(x):
    y = x.clone()
    y.put_(torch.tensor([0]), torch.tensor([5.0]))        # raises under the flag
    return y


def attention(q):
    return F.scaled_dot_product_attention(q, q, q) * 2


def outcome(fn, *args):
    try:
        return fn(*args).tolist()
    except RuntimeError as error:
        return type(error).__name__


@pytest.mark.parametrize("backend", ["eager", *BACKENDS])
@pytest.mark.parametrize("fn", [nan_filled, legacy_new, put_without_accumulate])
def test_deterministic_algorithms_are_honoured_whenever_they_are_switched_on(backend, fn):
    compiled = minidynamo.optimize(backend)(fn)
    x = torch.zeros(3)
    compiled(x)                                            # compiled with the flag off
    with deterministic():
        expected = outcome(fn, x)
        assert outcome(compiled, x) == expected            # not the replayed graph
    minidynamo.reset()
    with deterministic():
        assert outcome(minidynamo.optimize(backend)(fn), x) == expected      # compiled under it


MHA = torch.nn.MultiheadAttention(8, 2, batch_first=True)      # (training: no fused fast path)


def module_attention(q):
    return MHA(q, q, q, need_weights=False)[0] * 2       # one node: the functional form, running SDPA


@pytest.mark.parametrize("backend", ["eager", *BACKENDS])
@pytest.mark.parametrize("fn, shape", [(attention, (1, 2, 4, 8)), (module_attention, (1, 4, 8))])
def test_attention_with_its_host_kernels_switched_off_raises_as_eager_does(backend, fn, shape):
    compiled = minidynamo.optimize(backend)(fn)
    q = torch.randn(*shape)
    torch.testing.assert_close(compiled(q), fn(q))
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):       # no kernel the host has
        assert outcome(fn, q) == "RuntimeError"
        assert outcome(compiled, q) == "RuntimeError"
    torch.testing.assert_close(compiled(q), fn(q))

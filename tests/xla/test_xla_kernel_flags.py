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
@pytest.mark.parametrize("fn", [nan_filled, put_without_accumulate])
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


@pytest.mark.parametrize("backend", ["eager", *BACKENDS])
def test_attention_with_its_host_kernels_switched_off_raises_as_eager_does(backend):
    compiled = minidynamo.optimize(backend)(attention)
    q = torch.randn(1, 2, 4, 8)
    torch.testing.assert_close(compiled(q), attention(q))
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):       # no kernel the host has
        assert outcome(attention, q) == "RuntimeError"
        assert outcome(compiled, q) == "RuntimeError"
    torch.testing.assert_close(compiled(q), attention(q))

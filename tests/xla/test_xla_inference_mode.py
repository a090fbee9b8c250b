"""Programs run under ``torch.inference_mode()`` are captured and replayed (real-model probe F2).

Every frame under inference mode ran eagerly ("Inference tensors do not track version counter"):
the tracer and the bridge read version counters of meta examples and device copies, which
inference tensors lack. The tracer's write check leaves them to the nodes' own writes, the
bridge's one-time work runs with inference mode off, and its per-call identities read no
version of an inference tensor. Results are inference tensors where eager's are.
"""

import pytest
import torch

import minidynamo
import xla_bridge
from tests.xla.xla_testing import BACKENDS, fresh  # noqa: F401  (autouse: caches and counters reset)


def test_an_inference_mode_frame_is_captured_on_the_eager_backend():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    compiled = minidynamo.optimize("eager")(model)
    with torch.inference_mode():
        x = torch.randn(2, 4)
        assert torch.equal(compiled(x), model(x))
    assert not minidynamo.counters.snapshot().get("fallback_reasons")


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_model_and_an_in_place_write_under_inference_mode(backend):
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    compiled = minidynamo.optimize(backend)(model)

    def bump(z):
        z.add_(1)
        return z * 2

    with torch.inference_mode():
        for _ in range(2):
            x = torch.randn(2, 4)
            out, expected = compiled(x), model(x)
            torch.testing.assert_close(out, expected)
            assert out.is_inference() == expected.is_inference()
        z, z_eager = torch.zeros(3), torch.zeros(3)
        torch.testing.assert_close(minidynamo.optimize(backend)(bump)(z), bump(z_eager))
        torch.testing.assert_close(z, z_eager)
    assert not minidynamo.counters.snapshot().get("fallback_reasons")
    assert not [r for r in xla_bridge.counters.reasons if "eager" in r], xla_bridge.counters.reasons


def _writes_and_returns_a_view(x):
    x.add_(1)
    return x.t()


def _writes_through_a_view_returned(x):
    return x[0].add_(1)


@pytest.mark.parametrize("fn", [_writes_and_returns_a_view, _writes_through_a_view_returned])
def test_a_view_of_an_inference_tensor_argument_is_eagers(fn):
    """Probe N: the first raised inside the bridge (creation meta set on an inference tensor),
    the second applied the write twice (the view made again after the write-back)."""
    compiled = minidynamo.optimize("torchxla_trace_once")(fn)
    for _ in range(2):
        with torch.inference_mode():
            x, x_eager = torch.zeros(3, 4), torch.zeros(3, 4)
            out, expected = compiled(x), fn(x_eager)
        torch.testing.assert_close(out, expected)
        torch.testing.assert_close(x, x_eager)


@pytest.mark.parametrize("backend", BACKENDS)
def test_each_in_place_op_moves_the_version_as_in_eager(backend):
    """Probe N: two in-place ops on an argument moved its version once (the write-back's copy)."""
    def f(x, m):
        x.masked_fill_(m, 0.5)
        x.clamp_(-0.5, 0.7)
        return x.sum()
    compiled = minidynamo.optimize(backend)(f)
    for _ in range(2):
        x = torch.randn(4, 6)
        mask = x > 0
        x_eager = x.clone()
        before, before_eager = x._version, x_eager._version
        torch.testing.assert_close(compiled(x, mask), f(x_eager, mask))
        assert x._version - before == x_eager._version - before_eager == 2



def _writes_then_adds(t, x):
    t.add_(1)               # eager: writes, then raises for an inference tensor outside the mode
    t.data.add_(1)          # never reached there
    return x + 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_inference_tensor_written_outside_the_mode_raises_after_eagers_writes(backend):
    """Probe AA r5: a graph compiled for a plain tensor, then called with an inference tensor
    outside inference mode. Eager's ``t.add_`` writes and raises, so the write through ``.data``
    after it never happens; the replay made both writes, then raised."""
    def outcome(fn):
        t = torch.arange(5.0)
        fn(t, torch.ones(2))
        fn(t, torch.ones(2))
        with torch.inference_mode():
            t = torch.arange(5.0)
        with pytest.raises(RuntimeError, match="inference tensor"):
            fn(t, torch.ones(2))
        return t

    torch.testing.assert_close(outcome(minidynamo.optimize(backend)(_writes_then_adds)),
                               outcome(_writes_then_adds))

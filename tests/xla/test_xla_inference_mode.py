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

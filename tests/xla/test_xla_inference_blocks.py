"""A graph that enters an inference-mode block runs eagerly on the XLA backends: eager's results
made in the block are inference tensors, a replayed program's would not be."""

import os
import runpy

import pytest
import torch

import minidynamo
import xla_bridge
from tests.fuzz.oracle import run_script
from tests.xla.xla_testing import BACKENDS, fresh  # noqa: F401  (fixture)


def _block(x):
    with torch.inference_mode():
        y = x * 2
    return y + 1, y


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_inference_block_runs_eagerly_with_eagers_results(backend):
    opt = minidynamo.optimize(backend)(_block)
    x = torch.randn(3)
    for _ in range(2):
        actual, expected = opt(x), _block(x)
        for a, e in zip(actual, expected):
            assert a.is_inference() == e.is_inference()
            torch.testing.assert_close(a, e)
    assert any("inference-mode block" in reason for reason in xla_bridge.counters.reasons)


REPRO = os.path.join(os.path.dirname(__file__), "..", "fuzz", "repros", "repro_s357_i692.py")


def test_a_graph_raising_inside_a_block_leaves_it_before_the_backends_contexts():
    """Host seed 357 i692: the graph raised inside an inference-mode block (a dtype mismatch),
    while the bridge ran it under a dispatch mode of its own; the block, left after that mode
    ended, put the mode's dispatch state back for good, and the next tensor made anywhere failed
    ("Hit Python dispatch key").  A graph that enters blocks now leaves them as it raises."""
    program = runpy.run_path(REPRO, run_name="repro")
    assert run_script(program["SOURCE"], program["STEPS"], "torchxla_trace_once", device="cpu") == "OK"
    assert not torch._C._dispatch_tls_is_dispatch_key_included(torch._C.DispatchKey.Python)
    assert not torch.is_inference_mode_enabled()

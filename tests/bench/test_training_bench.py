"""``python -m bench --training`` on the tiny model: one step per peer, gradients checked."""

import argparse
import os

from bench import training
from bench.models import REGIMES


def test_training_bench_times_checks_and_writes(tiny_model, tmp_path):
    options = argparse.Namespace(seed=0, batch_size=2, iterations=2, warmup=1, breakdown=True,
                                 small=True, output=str(tmp_path))
    peers = ("torchxla_trace_once", "torchxla_trivial")
    row = training.run_model(tiny_model, REGIMES["small"], options, peers)
    ours = row["peers"]["torchxla_trace_once"]
    assert "error" not in ours, ours
    assert ours["grads_ok"] and row["peers"]["torchxla_trivial"]["grads_ok"]
    assert ours["saved_activation_bytes"] > 0
    assert ours["bridge"]["fallbacks"] == 0
    assert row["bridge_compiles_during_timing"] == 0
    assert set(ours["breakdown_s"]) == set(training.PHASES)
    assert ours["breakdown_s"]["guard"] > 0           # minidynamo's guard, timed alone
    text = training.report([row], peers, options, str(tmp_path / "training"))
    assert "geomean vs lazy" in text
    for name in ("results.json", "speedups.csv", "speedups.png", "breakdown.png"):
        assert os.path.exists(tmp_path / "training" / name)

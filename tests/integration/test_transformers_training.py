"""Tiny Hugging Face models trained through minidynamo with dropout on: the same losses and
weights as eager from the same seeds (``bench/hf_train.py`` runs every architecture).

Swin's layers set attributes on themselves (``shift_size``) before their dropout: the frame is
one graph only because a graph that draws random numbers is re-run, if it raises, from its
rewound generator.  wav2vec2's feature encoder sets ``requires_grad`` on a view of its input,
and its masking writes into an activation in place."""

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
pytest.importorskip("transformers")

from bench.hf_train import run_one  # noqa: E402


@pytest.mark.parametrize("name, compiles", [("swin", 1), ("wav2vec2", None)])
def test_training_with_dropout_agrees_with_eager(name, compiles):
    row = run_one(name, "eager", 2, "cpu")
    assert row["losses agree"] and row["weight error"] == 0.0, row
    assert row["fallbacks"] == 0, row["reasons"]
    if compiles is not None:
        assert row["compiles"] == compiles and row["breaks"] == 0, row["reasons"]

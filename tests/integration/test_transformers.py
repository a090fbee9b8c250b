"""Tiny Hugging Face transformers models (random init, no downloads) through minidynamo:
equal to eager on every call, one graph, nothing compiled after the first call."""

import os

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
transformers = pytest.importorskip("transformers")

import minidynamo  # noqa: E402
from minidynamo.eval_frame import OptimizeContext  # noqa: E402
from minidynamo.explain import ExplainOutput  # noqa: E402


def tiny_bert():
    config = transformers.BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=20, max_position_embeddings=32)
    return transformers.BertModel(config)


def tiny_distilbert():
    config = transformers.DistilBertConfig(vocab_size=50, dim=16, n_layers=2, n_heads=2, hidden_dim=20,
                                           max_position_embeddings=32)
    return transformers.DistilBertModel(config)


def text_inputs(seed):
    g = torch.Generator().manual_seed(seed)
    mask = torch.ones(2, 6, dtype=torch.long)
    mask[1, -2:] = 0
    return {"input_ids": torch.randint(3, 50, (2, 6), generator=g), "attention_mask": mask}


def flat(out):
    if isinstance(out, dict):
        return [type(out), list(out)] + [t for v in out.values() for t in flat(v)]
    if isinstance(out, (tuple, list)):
        return [t for v in out for t in flat(v)]
    return [out]


@pytest.mark.parametrize("make", [tiny_bert, tiny_distilbert])
@pytest.mark.parametrize("return_dict", [True, False])
def test_tiny_model_is_one_graph_equal_to_eager(make, return_dict):
    torch.manual_seed(0)
    model = make().eval()
    model.config.return_dict = return_dict
    report = ExplainOutput()
    compiled = OptimizeContext("eager", recorder=report)(model)
    with torch.no_grad():
        for seed in range(3):
            inputs = text_inputs(seed)
            expected, got = flat(model(**inputs)), flat(compiled(**inputs))
            assert len(expected) == len(got)
            for a, b in zip(expected, got):
                if isinstance(a, torch.Tensor):
                    torch.testing.assert_close(a, b)
                else:
                    assert a == b
    assert report.graph_break_count == 0, report.reasons
    assert report.graph_count == 1, report.reasons
    if return_dict:
        assert isinstance(compiled(**text_inputs(0)), transformers.modeling_outputs.ModelOutput)
    minidynamo.reset()

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
from bench.hf_sweep import same  # noqa: E402


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


def assert_same_outputs(expected_out, got_out):
    """Field by field: the output's type and keys, then each tensor (close) or value (equal)."""
    expected, got = flat(expected_out), flat(got_out)
    assert len(expected) == len(got)
    for a, b in zip(expected, got):
        if isinstance(a, torch.Tensor):
            torch.testing.assert_close(a, b)
        else:
            assert a == b


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
            assert_same_outputs(model(**inputs), compiled(**inputs))
    assert report.graph_break_count == 0, report.reasons
    assert report.graph_count == 1, report.reasons
    if return_dict:
        assert isinstance(compiled(**text_inputs(0)), transformers.modeling_outputs.ModelOutput)
    minidynamo.reset()


def tiny_gpt2():
    return transformers.GPT2Model(transformers.GPT2Config(vocab_size=50, n_embd=16, n_layer=2, n_head=2,
                                                          n_positions=32))


def tiny_llama():
    return transformers.LlamaModel(transformers.LlamaConfig(
        vocab_size=50, hidden_size=16, intermediate_size=20, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=1, max_position_embeddings=32))


@pytest.mark.parametrize("make", [tiny_gpt2, tiny_llama])
def test_decoder_causal_mask_is_in_the_one_graph(make):
    """Decoders build their causal mask with ``torch.vmap`` inside a ``TorchFunctionMode`` block
    (masking_utils.sdpa_mask_recent_torch): traced into the graph, no fallback, no recompile; the
    four nested vmaps are flattened into the aten operations they run (vmap_flatten.py)."""
    torch.manual_seed(0)
    model = make().eval()
    report = ExplainOutput()
    minidynamo.reset()
    minidynamo.counters.reset()
    compiled = OptimizeContext("eager", recorder=report)(model)
    with torch.no_grad():
        for seed in range(2):
            inputs = dict(text_inputs(seed), use_cache=False)     # (the cache object: bench/hf_sweep.py)
            assert_same_outputs(model(**inputs), compiled(**inputs))
    assert report.fallback_count == 0, report.reasons
    assert report.graph_break_count == 0, report.reasons
    assert report.graph_count == 1, report.reasons
    assert minidynamo.counters["compiles"] == 1, report.reasons
    assert "run_flat" in report.graph_codes[0] and "vmap_call" not in report.graph_codes[0]
    minidynamo.reset()


def tiny_deberta_v2():
    """Its relative-position helpers are ``torch.jit.script`` functions (traced through their
    Python originals)."""
    config = transformers.DebertaV2Config(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                          intermediate_size=20, max_position_embeddings=32)
    return transformers.DebertaV2Model(config), text_inputs


def tiny_wav2vec2():
    """Its positional convolution has a weight-norm parametrization (``self[0](*originals)``
    with a generator expression)."""
    config = transformers.Wav2Vec2Config(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                         intermediate_size=20, conv_dim=(8, 8), conv_stride=(4, 4),
                                         conv_kernel=(8, 4), num_conv_pos_embeddings=8,
                                         num_conv_pos_embedding_groups=2)

    def inputs(seed):
        return {"input_values": torch.randn(2, 200, generator=torch.Generator().manual_seed(seed))}
    return transformers.Wav2Vec2Model(config), inputs


def tiny_t5():
    """Its decoder makes a cache whose config is ``copy.deepcopy``'d (``get_text_config``), then
    edited: modelled by variables/copies.py, so one graph (it was 3, broken at the copy)."""
    config = transformers.T5Config(vocab_size=50, d_model=16, d_kv=8, d_ff=20, num_layers=1, num_heads=2)

    def inputs(seed):
        return dict(text_inputs(seed), decoder_input_ids=torch.randint(3, 50, (2, 3), generator=torch.Generator().manual_seed(seed)))
    return transformers.T5Model(config), inputs


@pytest.mark.parametrize("make, graphs", [(tiny_deberta_v2, 1), (tiny_wav2vec2, 1), (tiny_t5, 1)])
def test_more_architectures_equal_eager_without_fallbacks(make, graphs):
    torch.manual_seed(0)
    model, inputs = make()
    model.eval()
    report = ExplainOutput()
    minidynamo.reset()
    minidynamo.counters.reset()
    compiled = OptimizeContext("eager", recorder=report)(model)
    with torch.no_grad():
        for seed in range(2):                # outputs (and the cache objects in them) field by field
            assert same(model(**inputs(seed)), compiled(**inputs(seed)))
    assert report.fallback_count == 0, report.reasons
    assert report.graph_count == graphs, report.reasons
    assert not minidynamo.counters.snapshot()["recompile_reasons"], report.reasons
    minidynamo.reset()


@pytest.mark.parametrize("make", [tiny_gpt2, tiny_llama])
def test_static_cache_generation_is_two_graphs(make):
    """``generate`` with a static KV cache: the cache's ``try: index_copy_ except
    NotImplementedError`` (cache_utils.StaticLayer.update) is in the graph, its kernels run once on
    stand-ins (tracer/kernel_probe.py): prefill and decode are one graph each, the tokens eager's."""
    torch.manual_seed(0)
    model = make().eval()
    lm = (transformers.GPT2LMHeadModel if isinstance(model, transformers.GPT2Model) else transformers.LlamaForCausalLM)
    model = lm(model.config).eval()
    inputs = text_inputs(0)
    settings = dict(max_new_tokens=4, do_sample=False, pad_token_id=0, cache_implementation="static")
    minidynamo.reset()
    minidynamo.counters.reset()
    with torch.no_grad():
        expected = model.generate(**inputs, **settings)
        model.forward = minidynamo.optimize("eager")(model.forward)
        got = model.generate(**inputs, **settings)
    assert torch.equal(expected, got)
    assert minidynamo.counters["fallback_reasons"] == [], minidynamo.counters["fallback_reasons"]
    assert minidynamo.counters["compiles"] == 2 and minidynamo.counters["graph_breaks"] == 0
    minidynamo.reset()

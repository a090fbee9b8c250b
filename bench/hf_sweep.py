"""Hugging Face transformers, tried as a new user would: small random-init configs of three dozen
architectures, called through ``minidynamo.optimize`` beside ``torch.compile`` (with a backend
that only counts graphs), and compared with eager on every call.

    python -m bench.hf_sweep                       # every model, return_dict True and False
    python -m bench.hf_sweep --only bert,gpt2 --backend torchxla_trace_once
    python -m bench.hf_sweep --no-peer --autocast bfloat16   # every call inside a CPU autocast region

Per model and return_dict: graphs made on the first call, fallbacks (with reasons), graphs
compiled after the first call (recompiles over ``--calls`` calls), whether every call equalled
eager, first-call time, and steady-state time relative to eager.  "one graph" means: one graph,
no fallback, nothing compiled after the first call.  No downloads (``HF_HUB_OFFLINE=1``); the
inputs carry an attention mask with padding.  Not a test: it takes minutes.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import torch  # noqa: E402

SEQ, BATCH, VOCAB = 8, 2, 99
TEXT = dict(vocab_size=VOCAB, max_position_embeddings=64)


def _bert_like(config_cls, model_cls, **extra):
    def build():
        config = config_cls(**TEXT, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                            intermediate_size=37, **extra)
        return model_cls(config), _text_inputs
    return build


def _decoder(config_cls, model_cls, **fields):
    def build():
        return model_cls(config_cls(**fields)), _text_inputs
    return build


def _vision(config_cls, model_cls, **fields):
    def build():
        return model_cls(config_cls(**fields)), _image_inputs
    return build


def _text_inputs(generator):
    ids = torch.randint(3, VOCAB, (BATCH, SEQ), generator=generator)
    mask = torch.ones(BATCH, SEQ, dtype=torch.long)
    mask[1, -3:] = 0                                  # the second sequence is padded
    return {"input_ids": ids, "attention_mask": mask}


def _image_inputs(generator):
    return {"pixel_values": torch.randn(BATCH, 3, 32, 32, generator=generator)}


def _seq2seq_inputs(generator):
    inputs = _text_inputs(generator)
    inputs["decoder_input_ids"] = torch.randint(3, VOCAB, (BATCH, 5), generator=generator)
    return inputs


def _models():
    import transformers as T

    llama_like = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=37, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    seq2seq = dict(vocab_size=VOCAB, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                   decoder_attention_heads=4, encoder_ffn_dim=37, decoder_ffn_dim=37)    # bart, mbart, whisper

    def t5():
        config = T.T5Config(vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=37, num_layers=2, num_heads=4)
        return T.T5Model(config), _seq2seq_inputs

    def bart():
        config = T.BartConfig(**seq2seq, max_position_embeddings=64)
        return T.BartModel(config), _seq2seq_inputs

    def clip():
        config = T.CLIPConfig(
            text_config=dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=37, num_hidden_layers=2,
                             num_attention_heads=4, max_position_embeddings=64),
            vision_config=dict(image_size=32, patch_size=8, hidden_size=32, intermediate_size=37,
                               num_hidden_layers=2, num_attention_heads=4),
            projection_dim=16)

        def inputs(generator):
            return {**_text_inputs(generator), **_image_inputs(generator)}
        return T.CLIPModel(config), inputs

    def whisper_config():
        return T.WhisperConfig(**seq2seq, num_mel_bins=16, max_source_positions=16, max_target_positions=32,
                               pad_token_id=1, bos_token_id=0, eos_token_id=2, decoder_start_token_id=0)

    def whisper_encoder():
        config = whisper_config()

        def inputs(generator):
            return {"input_features": torch.randn(BATCH, 16, 32, generator=generator)}
        return T.WhisperModel(config).get_encoder(), inputs

    def whisper():
        config = whisper_config()

        def inputs(generator):
            return {"input_features": torch.randn(BATCH, 16, 32, generator=generator),
                    "decoder_input_ids": torch.randint(3, VOCAB, (BATCH, 5), generator=generator)}
        return T.WhisperModel(config), inputs

    def mbart():
        config = T.MBartConfig(**seq2seq, max_position_embeddings=64)
        return T.MBartModel(config), _seq2seq_inputs

    def wav2vec2():
        config = T.Wav2Vec2Config(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                  intermediate_size=37, conv_dim=(8, 8), conv_stride=(4, 4), conv_kernel=(8, 4),
                                  num_conv_pos_embeddings=8, num_conv_pos_embedding_groups=2)

        def inputs(generator):
            return {"input_values": torch.randn(BATCH, 400, generator=generator)}
        return T.Wav2Vec2Model(config), inputs

    return {
        "bert": _bert_like(T.BertConfig, T.BertModel),
        "roberta": _bert_like(T.RobertaConfig, T.RobertaModel),
        "electra": _bert_like(T.ElectraConfig, T.ElectraModel, embedding_size=16),
        "albert": _bert_like(T.AlbertConfig, T.AlbertModel, embedding_size=16),
        "mobilebert": _bert_like(T.MobileBertConfig, T.MobileBertModel, embedding_size=16,
                                 intra_bottleneck_size=16, true_hidden_size=16, num_feedforward_networks=1),
        "distilbert": _decoder(T.DistilBertConfig, T.DistilBertModel, **TEXT, dim=32, n_layers=2, n_heads=4,
                               hidden_dim=37),
        "gpt2": _decoder(T.GPT2Config, T.GPT2Model, vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4,
                         n_positions=64),
        "gpt_neo": _decoder(T.GPTNeoConfig, T.GPTNeoModel, **TEXT, hidden_size=32, num_layers=2, num_heads=4,
                            attention_types=[[["global", "local"], 1]], window_size=4),
        "opt": _decoder(T.OPTConfig, T.OPTModel, **TEXT, hidden_size=32, num_hidden_layers=2, ffn_dim=37,
                        num_attention_heads=4, word_embed_proj_dim=32),
        "llama": _decoder(T.LlamaConfig, T.LlamaModel, **llama_like),
        "mistral": _decoder(T.MistralConfig, T.MistralModel, **llama_like),
        "qwen2": _decoder(T.Qwen2Config, T.Qwen2Model, **llama_like),
        "phi": _decoder(T.PhiConfig, T.PhiModel, **llama_like),
        "gemma": _decoder(T.GemmaConfig, T.GemmaModel, **llama_like, head_dim=8),
        "t5": t5,
        "bart": bart,
        "whisper_encoder": whisper_encoder,
        "vit": _vision(T.ViTConfig, T.ViTModel, image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2,
                       num_attention_heads=4, intermediate_size=37),
        "deit": _vision(T.DeiTConfig, T.DeiTModel, image_size=32, patch_size=8, hidden_size=32,
                        num_hidden_layers=2, num_attention_heads=4, intermediate_size=37),
        "swin": _vision(T.SwinConfig, T.SwinModel, image_size=32, patch_size=4, embed_dim=16, depths=[1, 1],
                        num_heads=[2, 2], window_size=4),
        "convnext": _vision(T.ConvNextConfig, T.ConvNextModel, hidden_sizes=[8, 16], depths=[1, 1], num_stages=2),
        "resnet": _vision(T.ResNetConfig, T.ResNetModel, embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1]),
        "clip": clip,
        "xlm_roberta": _bert_like(T.XLMRobertaConfig, T.XLMRobertaModel),
        "deberta_v2": _bert_like(T.DebertaV2Config, T.DebertaV2Model),
        "falcon": _decoder(T.FalconConfig, T.FalconModel, vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2,
                           num_attention_heads=4),
        "bloom": _decoder(T.BloomConfig, T.BloomModel, vocab_size=VOCAB, hidden_size=32, n_layer=2, n_head=4),
        "gpt_neox": _decoder(T.GPTNeoXConfig, T.GPTNeoXModel, **TEXT, hidden_size=32, num_hidden_layers=2,
                             num_attention_heads=4, intermediate_size=37),
        "mixtral": _decoder(T.MixtralConfig, T.MixtralModel, **llama_like, num_local_experts=4,
                            num_experts_per_tok=2),
        "qwen3": _decoder(T.Qwen3Config, T.Qwen3Model, **llama_like, head_dim=8),
        "gemma2": _decoder(T.Gemma2Config, T.Gemma2Model, **llama_like, head_dim=8, sliding_window=4),
        "whisper": whisper,
        "mbart": mbart,
        "wav2vec2": wav2vec2,
        "segformer": _vision(T.SegformerConfig, T.SegformerModel, num_encoder_blocks=2, depths=[1, 1],
                             sr_ratios=[2, 1], hidden_sizes=[8, 16], patch_sizes=[7, 3], strides=[4, 2],
                             num_attention_heads=[1, 2], mlp_ratios=[2, 2], decoder_hidden_size=16),
        "dinov2": _vision(T.Dinov2Config, T.Dinov2Model, image_size=32, patch_size=8, hidden_size=32,
                          num_hidden_layers=2, num_attention_heads=4, mlp_ratio=2),
    }


def build(name, return_dict):
    """(model in eval mode, inputs(generator) -> kwargs) for one architecture."""
    torch.manual_seed(0)
    model, inputs = _models()[name]()
    model.config.return_dict = return_dict
    return model.eval(), inputs


# -- comparing outputs ------------------------------------------------------------------------------
def flatten(value, depth=0) -> list:
    """Every tensor and plain value of an output, in order (ModelOutput, tuples, caches)."""
    if isinstance(value, torch.Tensor):
        return [value]
    if depth > 6:
        return [type(value).__name__]
    if isinstance(value, dict):
        return [type(value).__name__, *[x for k, v in value.items() for x in (k, *flatten(v, depth + 1))]]
    if isinstance(value, (list, tuple)):
        return [type(value).__name__, *[x for v in value for x in flatten(v, depth + 1)]]
    if isinstance(value, (int, float, bool, str, type(None))):
        return [value]
    if hasattr(value, "__dict__"):
        return [type(value).__name__, *flatten(dict(vars(value)), depth + 1)]
    return [type(value).__name__]


def same(a, b) -> bool:
    fa, fb = flatten(a), flatten(b)
    if len(fa) != len(fb):
        return False
    for x, y in zip(fa, fb):
        if isinstance(x, torch.Tensor):
            if not (isinstance(y, torch.Tensor) and x.shape == y.shape and x.dtype == y.dtype
                    and torch.allclose(x, y.to(x.device), atol=1e-5, rtol=1e-4)):
                return False
        elif x != y and not (isinstance(x, torch.nn.Module) or callable(x)):
            return False
    return True


# -- one contender ----------------------------------------------------------------------------------
def _time(fn, repeat, baseline=None):
    """Median seconds per call of ``fn``; with ``baseline``, the two are timed alternately
    (the machine is shared: both see the same load) and the ratio fn / baseline is returned."""
    samples, base = [], []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
        if baseline is not None:
            start = time.perf_counter()
            baseline()
            base.append(time.perf_counter() - start)
    if baseline is None:
        return statistics.median(samples)
    return statistics.median(samples) / statistics.median(base)


def run_minidynamo(model, calls_inputs, expected, backend, repeat):
    import minidynamo
    from minidynamo.eval_frame import OptimizeContext
    from minidynamo.explain import ExplainOutput

    minidynamo.reset()
    minidynamo.counters.reset()
    xla = backend.startswith("torchxla")
    if xla:
        import xla_bridge

        xla_bridge.reset_counters()
    report = ExplainOutput()
    compiled = OptimizeContext(backend, recorder=report)(model)
    graphs_per_call, correct = [], True
    start = time.perf_counter()
    for i, kwargs in enumerate(calls_inputs):
        out = compiled(**kwargs)
        if i == 0:
            first = time.perf_counter() - start
        graphs_per_call.append(report.graph_count)
        correct &= same(expected[i], out)
    steady = _time(lambda: compiled(**calls_inputs[-1]), repeat, lambda: model(**calls_inputs[-1]))
    counts = minidynamo.counters.snapshot()
    if xla:                  # after call 1 every call must replay: no trace, no retrace, no fallback
        c = xla_bridge.counters
        print(f"  xla: traces={c.traces} retraces={c.retraces} replays={c.replays} "
              f"fallbacks={c.fallbacks} partitions={c.partitions}", file=sys.stderr)
    return {"graphs": graphs_per_call[0], "later": graphs_per_call[-1] - graphs_per_call[0],
            "fallbacks": counts.get("fallbacks", 0), "correct": correct, "first": first, "steady": steady,
            "reasons": list(counts["fallback_reasons"]), "recompile_reasons": list(counts["recompile_reasons"])}


def run_torch_compile(model, calls_inputs, expected, repeat):
    import torch._dynamo

    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()                  # graph-break counts are global: this model's only
    graphs = []

    def counting(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    compiled = torch.compile(model, backend=counting)
    per_call, correct = [], True
    start = time.perf_counter()
    for i, kwargs in enumerate(calls_inputs):
        out = compiled(**kwargs)
        if i == 0:
            first = time.perf_counter() - start
        per_call.append(len(graphs))
        correct &= same(expected[i], out)
    steady = _time(lambda: compiled(**calls_inputs[-1]), repeat, lambda: model(**calls_inputs[-1]))
    breaks = sum(counters["graph_break"].values())
    return {"graphs": per_call[0], "later": per_call[-1] - per_call[0], "breaks": breaks, "correct": correct,
            "first": first, "steady": steady}


def sweep_one(name, return_dict, backend, calls, repeat, peer, autocast=None):
    if autocast is not None:          # everything, eager included, inside one CPU region
        with torch.autocast("cpu", dtype=getattr(torch, autocast)):
            return sweep_one(name, return_dict, backend, calls, repeat, peer)
    model, make_inputs = build(name, return_dict)
    generator = torch.Generator().manual_seed(1)
    calls_inputs = [make_inputs(generator) for _ in range(calls)]
    with torch.no_grad():
        expected = [model(**kwargs) for kwargs in calls_inputs]
        eager = _time(lambda: model(**calls_inputs[-1]), repeat)
        row = {"model": name, "return_dict": return_dict, "eager": eager,
               "mini": run_minidynamo(model, calls_inputs, expected, backend, repeat)}
        if peer:
            row["tc"] = run_torch_compile(model, calls_inputs, expected, repeat)
    return row


def one_graph(result) -> bool:
    return result["graphs"] == 1 and result["later"] == 0 and not result.get("fallbacks") \
        and not result.get("breaks")


def print_table(rows, out=sys.stdout):
    head = (f"{'model':<16} {'rd':<2} | {'graphs':>6} {'fallbk':>6} {'later':>5} {'ok':>3} {'first s':>7} "
            f"{'x eager':>7} | {'tc gr':>5} {'tc brk':>6} {'tc later':>8} {'tc x eager':>10}")
    print(head, file=out)
    print("-" * len(head), file=out)
    for row in rows:
        m = row["mini"]
        line = (f"{row['model']:<16} {'T' if row['return_dict'] else 'F':<2} | {m['graphs']:>6} {m['fallbacks']:>6} "
                f"{m['later']:>5} {'yes' if m['correct'] else 'NO':>3} {m['first']:>7.2f} "
                f"{m['steady']:>7.2f}")
        if "tc" in row:
            t = row["tc"]
            line += (f" | {t['graphs']:>5} {t['breaks']:>6} {t['later']:>8} {t['steady']:>10.2f}"
                     + ("" if t["correct"] else " (tc WRONG)"))
        print(line, file=out)
    minis = [r["mini"] for r in rows]
    print(f"\nminidynamo: {sum(map(one_graph, minis))}/{len(rows)} captured as one graph, "
          f"{sum(m['correct'] for m in minis)}/{len(rows)} equal to eager on every call, "
          f"{sum(r['mini']['steady'] <= 1.05 for r in rows)}/{len(rows)} within 5% of eager or faster "
          f"(median x eager {statistics.median(m['steady'] for m in minis):.2f})",
          file=out)
    if all("tc" in r for r in rows):
        tcs = [r["tc"] for r in rows]
        print(f"torch.compile: {sum(map(one_graph, tcs))}/{len(rows)} captured as one graph "
              f"(median x eager {statistics.median(t['steady'] for t in tcs):.2f})",
              file=out)
    reasons = [(r["model"], why) for r in rows for why in r["mini"]["reasons"] + r["mini"]["recompile_reasons"]]
    if reasons:
        print("\nreasons (fallbacks, then recompiles):", file=out)
        for model, why in reasons:
            print(f"  {model}: {why}", file=out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="", help="comma-separated model names")
    parser.add_argument("--backend", default="eager", choices=["eager", "torchxla_trivial", "torchxla_trace_once"])
    parser.add_argument("--return-dict", default="both", choices=["both", "true", "false"])
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=20, help="calls timed for the steady state")
    parser.add_argument("--no-peer", action="store_true", help="skip torch.compile")
    parser.add_argument("--autocast", choices=["bfloat16", "float16"], help="run inside a CPU autocast region")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch intra-op threads (tiny models: more threads only add contention)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    names = [n for n in args.only.split(",") if n] or list(_models())
    flags = {"both": [True, False], "true": [True], "false": [False]}[args.return_dict]
    rows = []
    for name in names:
        for return_dict in flags:
            rows.append(sweep_one(name, return_dict, args.backend, args.calls, args.repeat, not args.no_peer,
                                  args.autocast))
            print_table(rows[-1:], out=sys.stderr)
    print_table(rows)


if __name__ == "__main__":
    main()

"""Hugging Face ``generate`` with a static KV cache, tried on a dozen small decoders.

    python -m bench.hf_generate [--backend torchxla_trace_once] [--only llama,gpt2]

A static cache keeps every decode step at one shape, so each model's forward should be two
graphs (prefill, decode) and nothing after; the cache writes its rows in place inside
``try: index_copy_ ... except NotImplementedError`` (tracer/kernel_probe.py). Per model: whether
the tokens equal eager's, graphs compiled, frames that ran eagerly, graph breaks, and the first
reason of each. Small random-init configs, no downloads. Not a test: it takes a minute or two.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("PJRT_DEVICE", "CPU")

import torch  # noqa: E402

SMALL = dict(vocab_size=99, hidden_size=32, intermediate_size=37, num_hidden_layers=2, num_attention_heads=4,
             max_position_embeddings=64)


def decoders() -> dict:
    """name -> () -> a causal LM (random init)."""
    import transformers as T

    def grouped(config_cls, model_cls, **extra):
        return lambda: model_cls(config_cls(num_key_value_heads=2, **SMALL, **extra))

    return {
        "llama": grouped(T.LlamaConfig, T.LlamaForCausalLM),
        "mistral": grouped(T.MistralConfig, T.MistralForCausalLM),
        "qwen2": grouped(T.Qwen2Config, T.Qwen2ForCausalLM),
        "qwen3": grouped(T.Qwen3Config, T.Qwen3ForCausalLM, head_dim=8),
        "phi3": grouped(T.Phi3Config, T.Phi3ForCausalLM, pad_token_id=0),
        "gemma": grouped(T.GemmaConfig, T.GemmaForCausalLM, head_dim=8),
        "gemma2": grouped(T.Gemma2Config, T.Gemma2ForCausalLM, head_dim=8),
        "olmo": grouped(T.OlmoConfig, T.OlmoForCausalLM),
        "phi": lambda: T.PhiForCausalLM(T.PhiConfig(**SMALL)),
        "gpt_neox": lambda: T.GPTNeoXForCausalLM(T.GPTNeoXConfig(**SMALL)),
        "gpt2": lambda: T.GPT2LMHeadModel(T.GPT2Config(vocab_size=99, n_positions=64, n_embd=32, n_layer=2, n_head=4)),
        "opt": lambda: T.OPTForCausalLM(T.OPTConfig(vocab_size=99, hidden_size=32, ffn_dim=37, num_hidden_layers=2,
                                                    num_attention_heads=4, max_position_embeddings=64,
                                                    word_embed_proj_dim=32)),
    }


def try_one(make, backend: str, new_tokens: int) -> dict:
    import minidynamo

    torch.manual_seed(0)
    model = make().eval()
    ids = torch.randint(3, 99, (2, 6), generator=torch.Generator().manual_seed(0))
    mask = torch.ones(2, 6, dtype=torch.long)
    mask[1, :2] = 0                                   # left padding in one row
    settings = dict(max_new_tokens=new_tokens, do_sample=False, pad_token_id=0, cache_implementation="static")
    minidynamo.reset()
    minidynamo.counters.reset()
    with torch.no_grad():
        expected = model.generate(input_ids=ids, attention_mask=mask, **settings)
        model.forward = minidynamo.optimize(backend)(model.forward)
        got = model.generate(input_ids=ids, attention_mask=mask, **settings)
    counters = minidynamo.counters
    row = {"equal": torch.equal(expected, got.cpu()), "compiles": counters["compiles"],
           "fallbacks": len(counters["fallback_reasons"]), "breaks": counters["graph_breaks"],
           "why": (list(counters["fallback_reasons"]) + list(counters["break_reasons"]))[:1]}
    minidynamo.reset()
    return row


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="eager")
    parser.add_argument("--only", default="")
    parser.add_argument("--new-tokens", type=int, default=4)
    options = parser.parse_args(argv)
    models = decoders()
    names = options.only.split(",") if options.only else list(models)
    print(f"{'model':10s} {'equal':>5s} {'graphs':>6s} {'eager':>5s} {'breaks':>6s}  (backend {options.backend})")
    two_graphs = 0
    for name in names:
        row = try_one(models[name], options.backend, options.new_tokens)
        two_graphs += row["equal"] and row["compiles"] == 2 and not row["fallbacks"] and not row["breaks"]
        print(f"{name:10s} {str(row['equal']):>5s} {row['compiles']:6d} {row['fallbacks']:5d} {row['breaks']:6d}"
              + "".join(f"\n    {why[:300]}" for why in row["why"]))
    print(f"{two_graphs}/{len(names)} generate in two graphs (prefill, decode), tokens equal to eager's")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Write tiny, weight-less model directories for `--load-format dummy`.

Needs only the `tokenizers` package (already on the remote) and the stdlib.
Usage: python make_tiny.py OUTDIR [qwen35|qwen3next|qwen3]
"""

import json
import os
import sys
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

out = sys.argv[1]
kind = sys.argv[2] if len(sys.argv) > 2 else "qwen35"
os.makedirs(out, exist_ok=True)

# ---- tokenizer: byte-level BPE trained on a few lines, vocab 512 ----------
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
tok = Tokenizer(models.BPE())
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
tok.post_processor = processors.ByteLevel(trim_offsets=False)
corpus = [
    "The quick brown fox jumps over the lazy dog.",
    "Hello world! This is a tiny tokenizer for testing SGLang servers.",
    "user assistant system: what is 1+1? The answer is 2.",
] * 50
trainer = trainers.BpeTrainer(
    vocab_size=512,
    special_tokens=SPECIALS,
    initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    show_progress=False,
)
tok.train_from_iterator(corpus, trainer)
tok.save(os.path.join(out, "tokenizer.json"))
vocab_n = tok.get_vocab_size()
eos_id = tok.token_to_id("<|im_end|>")

chat_template = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
Path(out, "tokenizer_config.json").write_text(
    json.dumps(
        {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "model_max_length": 4096,
            "bos_token": None,
            "eos_token": "<|im_end|>",
            "pad_token": "<|endoftext|>",
            "unk_token": None,
            "chat_template": chat_template,
        },
        indent=1,
    )
)
Path(out, "special_tokens_map.json").write_text(
    json.dumps({"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"})
)

# ---- config -----------------------------------------------------------------
VOCAB = 1024  # >= tokenizer vocab, multiple of 64
common = dict(
    vocab_size=VOCAB,
    hidden_size=256,
    intermediate_size=512,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=64,
    max_position_embeddings=4096,
    rms_norm_eps=1e-6,
    hidden_act="silu",
    tie_word_embeddings=False,
    torch_dtype="bfloat16",
    dtype="bfloat16",
    bos_token_id=None,
    eos_token_id=eos_id,
    pad_token_id=0,
    initializer_range=0.02,
    attention_bias=False,
    attention_dropout=0.0,
)
if kind in ("qwen35", "qwen3next"):
    hybrid = dict(
        num_hidden_layers=4,
        full_attention_interval=4,  # layers 0-2 GDN, 3 full attn
        layer_types=["linear_attention"] * 3 + ["full_attention"],
        linear_conv_kernel_dim=4,
        linear_key_head_dim=64,
        linear_value_head_dim=64,
        linear_num_key_heads=2,
        linear_num_value_heads=4,
        partial_rotary_factor=0.25,
        rope_theta=10000000.0,
        rope_parameters={
            "rope_type": "default",
            "rope_theta": 10000000.0,
            "partial_rotary_factor": 0.25,
        },
        mamba_ssm_dtype="float32",
    )
    common.update(hybrid)
if kind == "qwen35":  # dense Qwen3.5/3.6 text model (GDN + gated full attention)
    cfg = dict(architectures=["Qwen3_5ForCausalLM"], model_type="qwen3_5_text", **common)
elif kind == "qwen3next":  # Qwen3-Next (MoE) shrunk to 4 experts
    cfg = dict(
        architectures=["Qwen3NextForCausalLM"],
        model_type="qwen3_next",
        num_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=128,
        shared_expert_intermediate_size=128,
        decoder_sparse_step=1,
        norm_topk_prob=True,
        mlp_only_layers=[],
        **common,
    )
else:  # plain dense Qwen3
    cfg = dict(
        architectures=["Qwen3ForCausalLM"],
        model_type="qwen3",
        num_hidden_layers=2,
        rope_theta=1000000.0,
        **common,
    )
Path(out, "config.json").write_text(json.dumps(cfg, indent=1))
Path(out, "generation_config.json").write_text(
    json.dumps({"eos_token_id": eos_id, "pad_token_id": 0, "do_sample": False})
)
print(f"wrote {out}: {cfg['architectures'][0]}, tokenizer vocab {vocab_n}, eos {eos_id}")

"""Weight bytes estimated from a config's shapes, for ``--load-format dummy`` or a folder that holds
only its config.json.

SGLang allocates every parameter of the model class before loading (dummy or not), so the bytes
are the parameter count per family at the served dtype: the decoder's linear weights at the
quantisation's width (``quantization_config``: FP8 one byte, ``bits`` otherwise), everything else
(embeddings padded to a multiple of 64 as ``VocabParallelEmbedding`` does, norms, convs, the
vision tower, the MTP draft) at the model dtype. Quantisation scales, rotary caches and buffers are
left out: an estimate within a few percent for the big models, which is why the plan says which
source its weights came from and a real log's ``Load weight end ... mem usage`` calibrates it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from tui.sglang.modelcfg.families import granite_types, nemotron_pattern
from tui.sglang.modelcfg.fields import ConfigView
from tui.sglang.modelcfg.shapes import ModelShapes, text_view

_VOCAB_PADDING = 64
"""``DEFAULT_VOCAB_PADDING_SIZE`` of SGLang's ``VocabParallelEmbedding``."""


@dataclass(frozen=True, slots=True)
class WeightEstimate:
    """Target and draft weight bytes."""

    target_bytes: int
    """The served model (vision tower included for a multimodal one)."""
    draft_bytes: int
    """The MTP draft layer(s), 0 without MTP."""


@dataclass(slots=True)
class _Count:
    linear: int = 0
    """Decoder linear weights (quantised when the checkpoint is)."""
    plain: int = 0
    """Everything else, at the model dtype."""

    def add(self, other: _Count, times: int = 1) -> None:
        self.linear += other.linear * times
        self.plain += other.plain * times


def estimate_weights(config: dict[str, Any], shapes: ModelShapes, source: str) -> WeightEstimate:
    """Estimate the weights of one model from its config.

    Args:
        config: the parsed config.json.
        shapes: its derived shapes (``derive_shapes``).
        source: the file, for error messages.

    Returns:
        Target and draft bytes.
    """
    text = text_view(config, source)
    root = ConfigView(config, source)
    dtype_bytes = 4 if shapes.model_dtype == "float32" else 2
    linear_bytes = _linear_bytes(root.section("quantization_config"), dtype_bytes)
    hidden = text.integer("hidden_size", why="the weight estimate")
    vocab = math.ceil(text.integer("vocab_size", why="the weight estimate") / _VOCAB_PADDING)
    vocab *= _VOCAB_PADDING
    tied = bool(text.get("tie_word_embeddings", root.get("tie_word_embeddings", False)))
    total = _Count(plain=vocab * hidden * (1 if tied else 2) + hidden)
    total.add(_decoder(text, shapes, hidden))
    if shapes.multimodal:
        total.plain += _vision(root.section("vision_config"))
    draft = _Count()
    if shapes.draft_layers:
        draft.add(_mtp_layer(text, shapes, hidden, vocab), shapes.draft_layers)
    return WeightEstimate(
        target_bytes=int(total.plain * dtype_bytes + total.linear * linear_bytes),
        draft_bytes=int(draft.plain * dtype_bytes + draft.linear * dtype_bytes),
    )


def _linear_bytes(quant: dict[str, Any], dtype_bytes: int) -> float:
    method = str(quant.get("quant_method", "")).lower()
    if not method:
        return dtype_bytes
    if method == "fp8" or "fp8" in str(quant.get("quant_algo", "")).lower():
        return 1
    bits = quant.get("bits")
    groups = quant.get("config_groups")
    if bits is None and isinstance(groups, dict) and groups:
        first = next(iter(groups.values()))
        bits = (first.get("weights") or {}).get("num_bits") if isinstance(first, dict) else None
    return int(bits) / 8 if isinstance(bits, int) and bits > 0 else dtype_bytes


def _decoder(text: ConfigView, shapes: ModelShapes, hidden: int) -> _Count:
    count = _Count()
    family = shapes.family
    if family == "gdn":
        interval = text.integer("full_attention_interval")
        for i in range(shapes.num_layers):
            mixer = (
                _attention(text, shapes, hidden) if (i + 1) % interval == 0 else _gdn(text, hidden)
            )
            count.add(mixer)
            count.add(_qwen_mlp(text, hidden))
            count.plain += 2 * hidden
    elif family == "nemotron_h":
        count.add(_nemotron(text, shapes, hidden))
    elif family == "falcon_h1":
        per_layer = _attention(text, shapes, hidden)
        per_layer.add(_mamba2(shapes, hidden))
        per_layer.linear += 3 * hidden * text.integer("intermediate_size", 14336)
        per_layer.plain += 2 * hidden
        count.add(per_layer, shapes.num_layers)
    elif family == "granite_hybrid":
        count.add(_granite(text, shapes, hidden))
    elif family == "mla":
        count.add(_deepseek(text, hidden))
    else:
        per_layer = _attention(text, shapes, hidden)
        per_layer.add(_dense_or_moe_mlp(text, hidden))
        per_layer.plain += 2 * hidden
        count.add(per_layer, shapes.num_layers)
    return count


def _attention(text: ConfigView, shapes: ModelShapes, hidden: int) -> _Count:
    heads = text.integer("num_attention_heads", why="the weight estimate")
    head_dim = shapes.head_dim or hidden // heads
    gated = shapes.family == "gdn" and bool(text.get("attn_output_gate", True))
    q = heads * head_dim * (2 if gated else 1)
    kv = 2 * shapes.kv_heads * head_dim
    qk_norm = 2 * head_dim if shapes.model_type.startswith("qwen3") else 0
    return _Count(linear=hidden * (q + kv) + heads * head_dim * hidden, plain=qk_norm)


def _gdn(text: ConfigView, hidden: int) -> _Count:
    value_heads = text.integer("linear_num_value_heads", 32)
    value_dim = value_heads * text.integer("linear_value_head_dim", 128)
    key_dim = text.integer("linear_num_key_heads", 16) * text.integer("linear_key_head_dim", 128)
    conv = (2 * key_dim + value_dim) * text.integer("linear_conv_kernel_dim", 4)
    return _Count(
        linear=hidden * (2 * key_dim + 2 * value_dim) + value_dim * hidden,
        # in_proj_ba, the conv, dt_bias, A_log (float32: two model-dtype elements), the norm
        plain=hidden * 2 * value_heads
        + conv
        + 3 * value_heads
        + text.integer("linear_value_head_dim", 128),
    )


def _mamba2(shapes: ModelShapes, hidden: int) -> _Count:
    state = shapes.state
    if state is None:
        return _Count()
    inter = state.heads * state.head_dim
    groups_state = state.conv_dim - inter  # 2 * n_groups * state_size
    return _Count(
        linear=hidden * (2 * inter + groups_state + state.heads) + inter * hidden,
        plain=state.conv_dim * (state.conv_kernel + 1) + 3 * state.heads + inter,
    )


def _qwen_mlp(text: ConfigView, hidden: int) -> _Count:
    if str(text.get("model_type", "")) in ("qwen3_5_text",):
        return _Count(linear=3 * hidden * text.integer("intermediate_size", why="the MLP"))
    return _dense_or_moe_mlp(text, hidden)


def _dense_or_moe_mlp(text: ConfigView, hidden: int) -> _Count:
    experts = text.integer("num_experts", 0) or text.integer("num_local_experts", 0)
    if not experts:
        return _Count(linear=3 * hidden * text.integer("intermediate_size", why="the MLP"))
    expert_inter = text.integer("moe_intermediate_size", text.integer("intermediate_size", 0))
    shared = text.integer("shared_expert_intermediate_size", 0)
    return _Count(
        linear=experts * 3 * hidden * expert_inter + 3 * hidden * shared,
        plain=hidden * experts + (hidden if shared else 0),
    )


def _nemotron(text: ConfigView, shapes: ModelShapes, hidden: int) -> _Count:
    count = _Count()
    for letter in nemotron_pattern(text):
        count.plain += hidden
        if letter == "M":
            count.add(_mamba2(shapes, hidden))
        elif letter == "*":
            count.add(_attention(text, shapes, hidden))
        elif letter == "-":
            count.linear += 2 * hidden * text.integer("intermediate_size", 21504)
        else:
            count.add(_nemotron_moe(text, hidden))
    return count


def _nemotron_moe(text: ConfigView, hidden: int) -> _Count:
    experts = text.integer("n_routed_experts", 8)
    inter = text.integer("moe_intermediate_size", 7688)
    shared = text.integer("n_shared_experts", 1) * text.integer(
        "moe_shared_expert_intermediate_size", inter
    )
    return _Count(linear=2 * hidden * (experts * inter + shared), plain=(hidden + 1) * experts)


def _granite(text: ConfigView, shapes: ModelShapes, hidden: int) -> _Count:
    types = granite_types(text, shapes.num_layers)
    attention = _attention(text, shapes, hidden)
    mamba = _mamba2(shapes, hidden)
    experts = text.integer("num_local_experts", 0)
    inter = text.integer("intermediate_size", 8192)
    shared = text.integer("shared_intermediate_size", 0)
    mlp = _Count(linear=3 * hidden * (experts * inter + shared), plain=hidden * experts)
    count = _Count()
    for i in range(shapes.num_layers):
        count.add(attention if types[i] == "attention" else mamba)
        count.add(mlp)
        count.plain += 2 * hidden
    return count


def _deepseek(text: ConfigView, hidden: int) -> _Count:
    count = _Count()
    dense = text.integer("first_k_dense_replace", 0)
    for i in range(text.integer("num_hidden_layers")):
        count.add(_mla(text, hidden))
        count.add(_deepseek_mlp(text, hidden, moe=i >= dense))
        count.plain += 2 * hidden
    return count


def _mla(text: ConfigView, hidden: int) -> _Count:
    heads = text.integer("num_attention_heads")
    nope = text.integer("qk_nope_head_dim", 128)
    rope = text.integer("qk_rope_head_dim", 64)
    v_dim = text.integer("v_head_dim", 128)
    kv_rank = text.integer("kv_lora_rank", 512)
    q_rank = text.integer("q_lora_rank", 0)
    q = (
        hidden * q_rank + q_rank * heads * (nope + rope)
        if q_rank
        else hidden * heads * (nope + rope)
    )
    linear = (
        q + hidden * (kv_rank + rope) + kv_rank * heads * (nope + v_dim) + heads * v_dim * hidden
    )
    return _Count(linear=linear, plain=q_rank + kv_rank)


def _deepseek_mlp(text: ConfigView, hidden: int, *, moe: bool) -> _Count:
    if not moe:
        return _Count(linear=3 * hidden * text.integer("intermediate_size", 18432))
    experts = text.integer("n_routed_experts", text.integer("num_routed_experts", 256))
    shared = text.integer("n_shared_experts", text.integer("num_shared_experts", 1))
    inter = text.integer("moe_intermediate_size", 2048)
    return _Count(linear=3 * hidden * inter * (experts + shared), plain=(hidden + 1) * experts)


def _mtp_layer(text: ConfigView, shapes: ModelShapes, hidden: int, vocab: int) -> _Count:
    """One MTP draft layer: a full-attention decoder layer with its two norms, the fusing
    projection (2h -> h) and its three norms, and one vocabulary matrix of its own: the draft is
    built with its own LM head, which it hands back for the target's only after the pools are
    sized (``qwen3_5_mtp.py`` ``set_embed_and_head``; the 0.5.17 recording's budget is short by
    exactly that)."""
    count = _Count(plain=2 * hidden * hidden + 5 * hidden + vocab * hidden)
    if shapes.family == "mla":
        count.add(_mla(text, hidden))
        count.add(_deepseek_mlp(text, hidden, moe=True))
    elif shapes.family == "nemotron_h":
        count.add(_attention(text, shapes, hidden))
        count.add(_nemotron_moe(text, hidden))
    else:
        count.add(_attention(text, shapes, hidden))
        count.add(_qwen_mlp(text, hidden))
    count.plain += count.linear  # the draft layer stays at the model dtype
    count.linear = 0
    return count


def _vision(vision: dict[str, Any]) -> int:
    """A Qwen3-VL style vision tower (patch embed, position embedding, blocks, merger)."""
    width = int(vision.get("hidden_size", 1152))
    inter = int(vision.get("intermediate_size", 4304))
    depth = int(vision.get("depth", 27))
    patch = int(vision.get("patch_size", 16))
    merged = width * int(vision.get("spatial_merge_size", 2)) ** 2
    patch_embed = int(vision.get("in_channels", 3)) * int(vision.get("temporal_patch_size", 2))
    patch_embed = patch_embed * patch * patch * width + width
    block = 4 * width * width + 4 * width + 2 * width * inter + inter + width + 4 * width
    merger = (
        2 * width + merged * merged + merged + merged * int(vision.get("out_hidden_size", width))
    )
    merger += int(vision.get("out_hidden_size", width))
    mergers = 1 + len(vision.get("deepstack_visual_indexes") or [])
    pos = int(vision.get("num_position_embeddings", 0)) * width
    return patch_embed + pos + depth * block + mergers * merger

"""What SGLang derives from a config.json for its memory pools, family by family.

Read from SGLang's own source (0.5.17 and 0.5.23 agree on every formula used here):

* KV cell (``srt/model_executor/pool_configurator.py`` ``DefaultPoolConfigurator``): over the
  full-attention layers only, ``kv_heads * (head_dim + v_head_dim) * dtype bytes`` each; for MLA
  ``(kv_lora_rank + qk_rope_head_dim) * dtype bytes`` (``calculate_mla_kv_cache_dim``, non-DSA).
  ``head_dim`` is the config's or ``hidden_size // num_attention_heads``; KV heads are the first of
  ``n_head_kv``, ``num_kv_heads``, ``num_key_value_heads`` (``srt/configs/model_config.py``).
* State per Mamba/linear-attention layer (``srt/configs/mamba_utils.py``
  ``Mamba2StateShape.create``): conv ``(intermediate + 2 * n_groups * state, kernel - 1)`` in
  bfloat16, temporal ``(heads, head_dim, state)`` in the config's ``mamba_ssm_dtype`` (float32
  by default). Gated DeltaNet (``srt/configs/qwen3_next.py``, inherited by ``qwen3_5.py``):
  intermediate = value heads * value dim, n_groups = key heads, state = key dim, heads = value
  heads; full attention every ``full_attention_interval``-th layer. Nemotron-H
  (``nemotron_h.py``): layers from ``hybrid_override_pattern`` (``M`` Mamba, ``*`` attention),
  ``n_groups``, ``mamba_num_heads``, ``mamba_head_dim``, ``ssm_state_size``, ``conv_kernel``.
  Falcon-H1 (``falcon_h1.py``): attention and Mamba in every layer, intermediate ``mamba_d_ssm``
  (else ``mamba_expand * hidden_size``). Granite 4 hybrids (``granitemoehybrid.py``): layers from
  ``layer_types``, intermediate ``mamba_expand * hidden_size``, the SSM always float32 (its cache
  params take no dtype from the config).
* The MTP draft (``srt/configs/model_config.py``): an MTP checkpoint is rewritten into a draft
  with ``num_nextn_predict_layers = 1``, so its KV pool is one layer of the target's cell.

Families SGLang cannot serve, or whose pools the planner does not model (sliding-window hybrids,
DeepSeek sparse attention), are refused in one line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tui.sglang.arch_support import draft_kv_budgeted_builds
from tui.sglang.modelcfg.errors import ModelConfigError
from tui.sglang.modelcfg.families import (
    DTYPE_BYTES,
    StateShape,
    layers_and_state,
    num_layers,
)
from tui.sglang.modelcfg.fields import ConfigView

GDN_ARCHS = frozenset(
    {
        "Qwen3NextForCausalLM",
        "Qwen3_5ForCausalLM",
        "Qwen3_5MoeForCausalLM",
        "Qwen3_5ForConditionalGeneration",
        "Qwen3_5MoeForConditionalGeneration",
    }
)
MLA_ARCHS = frozenset({"DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM"})
DENSE_ARCHS = frozenset(
    {
        "LlamaForCausalLM",
        "MistralForCausalLM",
        "MixtralForCausalLM",
        "Qwen2ForCausalLM",
        "Qwen2MoeForCausalLM",
        "Qwen3ForCausalLM",
        "Qwen3MoeForCausalLM",
    }
)
FAMILIES = {
    **dict.fromkeys(GDN_ARCHS, "gdn"),
    **dict.fromkeys(MLA_ARCHS, "mla"),
    **dict.fromkeys(DENSE_ARCHS, "dense"),
    "NemotronHForCausalLM": "nemotron_h",
    "FalconH1ForCausalLM": "falcon_h1",
    "GraniteMoeHybridForCausalLM": "granite_hybrid",
}
"""Architecture -> family the planner derives."""

_REFUSED = {
    "JambaForCausalLM": "SGLang (0.5.17, 0.5.23) has no Jamba model",
    "DeepseekV32ForCausalLM": "DeepSeek sparse attention (its indexer pool) is not modelled",
    "NemotronHPuzzleForCausalLM": "per-layer block configs are not modelled",
    "Gemma3ForCausalLM": "sliding-window hybrid pools are not modelled",
    "Gemma3ForConditionalGeneration": "sliding-window hybrid pools are not modelled",
    "GptOssForCausalLM": "sliding-window hybrid pools are not modelled",
    "Llama4ForConditionalGeneration": "sliding-window hybrid pools are not modelled",
}

_CONTEXT_KEYS = (
    "max_sequence_length",
    "seq_length",
    "max_seq_len",
    "model_max_length",
    "max_position_embeddings",
)
"""``srt/utils/hf_transformers/common.py`` ``CONTEXT_LENGTH_KEYS``, first found wins."""


@dataclass(frozen=True, slots=True)
class ModelShapes:
    """Every number of a config that sizes SGLang's pools."""

    architecture: str
    """``architectures[0]``."""
    family: str
    """gdn, nemotron_h, falcon_h1, granite_hybrid, mla or dense."""
    model_type: str
    """The (text) config's ``model_type``."""
    num_layers: int
    """Decoder layers."""
    full_attention_layers: int
    """Layers with a KV cache."""
    kv_heads: int
    """KV heads per full-attention layer."""
    head_dim: int
    """K head dim."""
    v_head_dim: int
    """V head dim."""
    kv_dtype_bytes: int
    """KV cache bytes per element (the model dtype, or 1 for an FP8 KV recipe)."""
    mla_kv_dim: int
    """``kv_lora_rank + qk_rope_head_dim`` for MLA, else 0."""
    state: StateShape | None
    """The Mamba/linear-attention state, None for a pure-attention model."""
    draft_layers: int
    """KV layers of the MTP draft (0: no MTP in the checkpoint)."""
    draft_budgeted_builds: frozenset[str]
    """Builds that count the draft's KV in the token budget."""
    multimodal: bool
    """A vision tower is served (the 0.5.23 multimodal reserve applies)."""
    context_length: int
    """Derived context length."""
    model_dtype: str
    """The served dtype (float32 configs are served in float16, as SGLang's ``auto`` does)."""
    quantization: str | None
    """``quantization_config.quant_method``."""

    @property
    def kv_bytes_per_layer(self) -> int:
        """K plus V bytes per token of one full-attention layer."""
        if self.mla_kv_dim:
            return self.mla_kv_dim * self.kv_dtype_bytes
        return self.kv_heads * (self.head_dim + self.v_head_dim) * self.kv_dtype_bytes

    @property
    def kv_bytes_per_token(self) -> int:
        """The target's cell: every full-attention layer."""
        return self.full_attention_layers * self.kv_bytes_per_layer

    @property
    def draft_kv_bytes_per_token(self) -> int:
        """The draft pool's cell."""
        return self.draft_layers * self.kv_bytes_per_layer

    @property
    def is_hybrid(self) -> bool:
        """A Mamba pool is carved."""
        return self.state is not None and self.state.layers > 0


def text_view(config: dict[str, Any], source: str) -> ConfigView:
    """The text config SGLang sizes from (``get_hf_text_config``: a nested ``text_config``)."""
    text = config.get("text_config")
    if isinstance(text, dict):
        return ConfigView(text, source, "text_config.")
    return ConfigView(config, source)


def architecture_of(config: dict[str, Any], source: str) -> str:
    """``architectures[0]``.

    Raises:
        ModelConfigError: absent or empty.
    """
    archs = config.get("architectures")
    if not isinstance(archs, list) or not archs or not isinstance(archs[0], str):
        raise ModelConfigError(f"{source}: architectures missing (needed to pick the model)")
    return archs[0]


def derive_shapes(config: dict[str, Any], source: str) -> ModelShapes:
    """Derive the pool shapes of one config.

    Args:
        config: the parsed config.json.
        source: its path, for error messages.

    Returns:
        The shapes.

    Raises:
        ModelConfigError: one line naming the missing field (and the file), or why the
            architecture cannot be planned.
    """
    arch = architecture_of(config, source)
    if arch in _REFUSED:
        raise ModelConfigError(f"{source}: {arch}: cannot plan: {_REFUSED[arch]}")
    family = FAMILIES.get(arch)
    if family is None:
        known = ", ".join(sorted(FAMILIES))
        raise ModelConfigError(f"{source}: {arch}: not a family the planner derives ({known})")
    root = ConfigView(config, source)
    text = text_view(config, source)
    if family == "mla" and root.has("index_topk"):
        raise ModelConfigError(
            f"{source}: {arch}: cannot plan: {_REFUSED['DeepseekV32ForCausalLM']}"
        )
    layers = num_layers(family, text)
    full, state = layers_and_state(family, text, layers)
    kv_heads = _kv_heads(family, text)
    head_dim, v_head_dim, mla_dim = _head_dims(family, text)
    model_dtype = _model_dtype(root, text)
    quant = root.section("quantization_config")
    kv_bytes = (
        1
        if str(quant.get("kv_cache_quant_algo", "")).upper() == "FP8"
        else DTYPE_BYTES[model_dtype]
    )
    nextn = text.integer("num_nextn_predict_layers", 0) or root.integer(
        "num_nextn_predict_layers", 0
    )
    return ModelShapes(
        architecture=arch,
        family=family,
        model_type=str(text.get("model_type", root.get("model_type", ""))),
        num_layers=layers,
        full_attention_layers=full,
        kv_heads=kv_heads,
        head_dim=head_dim,
        v_head_dim=v_head_dim,
        kv_dtype_bytes=kv_bytes,
        mla_kv_dim=mla_dim,
        state=state,
        draft_layers=1 if _has_mtp(family, text, nextn) else 0,
        draft_budgeted_builds=draft_kv_budgeted_builds(arch, nextn),
        multimodal=arch.endswith("ForConditionalGeneration") and root.has("vision_config"),
        context_length=_context_length(text),
        model_dtype=model_dtype,
        quantization=str(quant["quant_method"]) if quant.get("quant_method") else None,
    )


def _kv_heads(family: str, text: ConfigView) -> int:
    if family == "mla":
        return 1  # the latent pool has no heads
    if family == "nemotron_h":
        return text.integer("num_key_value_heads", 8)  # NemotronHConfig's default
    for name in ("n_head_kv", "num_kv_heads", "num_key_value_heads"):
        if text.has(name):
            return text.integer(name)
    return text.integer("num_attention_heads", why="the KV heads")


def _head_dims(family: str, text: ConfigView) -> tuple[int, int, int]:
    """(head_dim, v_head_dim, MLA latent dim)."""
    if family == "mla":
        rank = text.integer("kv_lora_rank", why="the MLA cache dim")
        rope = text.integer("qk_rope_head_dim", why="the MLA cache dim")
        return 0, 0, rank + rope
    if family == "nemotron_h":
        head = text.integer("head_dim", 128)  # NemotronHConfig's default
    elif text.has("head_dim"):
        head = text.integer("head_dim")
    else:
        hidden = text.integer("hidden_size", why="head_dim (hidden_size / heads)")
        heads = text.integer("num_attention_heads", why="head_dim (hidden_size / heads)")
        head = hidden // heads
    return head, text.integer("v_head_dim", head) or head, 0


def _model_dtype(root: ConfigView, text: ConfigView) -> str:
    """The dtype ``--dtype auto`` serves in (``_get_and_verify_dtype``: float32 -> float16)."""
    for view in (text, root):
        for name in ("dtype", "torch_dtype"):
            value = view.get(name)
            if isinstance(value, str) and value.removeprefix("torch.") in DTYPE_BYTES:
                dtype = value.removeprefix("torch.")
                return "float16" if DTYPE_BYTES[dtype] == 4 else dtype
    return "float16"  # no dtype: float32, served as float16


def _context_length(text: ConfigView) -> int:
    """``get_context_length``: the first context key, times a rope scaling ``factor`` unless the
    scaling is llama3 or names ``original_max_position_embeddings``."""
    scaling_key = "rope_scaling" if text.get("rope_scaling") else "rope_parameters"
    scaling = text.get(scaling_key) or {}
    factor = scaling.get("factor") if isinstance(scaling, dict) else None
    if isinstance(scaling, dict) and (
        "original_max_position_embeddings" in scaling or scaling.get("rope_type") == "llama3"
    ):
        factor = None
    if factor is None:
        factor = 1
    elif isinstance(factor, bool) or not isinstance(factor, int | float) or factor <= 0:
        # A string multiplied the context key's digits ('2' * 4096); a list crashed int().
        raise ModelConfigError(
            f"{text.source}: {text.prefix}{scaling_key}.factor = {factor!r} "
            "is not a positive number"
        )
    for key in _CONTEXT_KEYS:
        if text.has(key):
            return int(factor * text.integer(key))
    return 2048


def _has_mtp(family: str, text: ConfigView, nextn: int) -> bool:
    """Whether NEXTN/EAGLE builds a one-layer MTP draft from the model itself.

    For Qwen3.5/3.6, Qwen3-Next and Nemotron-H, SGLang rewrites the architecture into its MTP
    class with ``num_nextn_predict_layers = 1`` whatever the config says (the 0.5.17 recording of
    the tiny model, whose config names no MTP layer, loads ``Qwen3_5ForCausalLMMTP`` and a second
    KV pool); elsewhere the config's ``num_nextn_predict_layers`` or ``mtp_num_hidden_layers``.
    """
    if family in ("gdn", "nemotron_h"):
        return True
    return text.integer("mtp_num_hidden_layers", 0) > 0 or nextn > 0

"""Per-build architecture lists that change the memory plan: the mamba radix-cache strategy and
whether an EAGLE/MTP draft is counted in the KV token budget.

Copied from each build's source, because the lists differ between builds and the difference
moves numbers: ``srt/arg_groups/overrides.py`` ``_MAMBA_RADIX_CACHE_ARCHS`` and
``_MAMBA_EXTRA_BUFFER_ARCHS`` (0.5.23 adds the text-only ``Qwen3_5ForCausalLM`` and
``Qwen3_5MoeForCausalLM``: in 0.5.17 their ``--mamba-radix-cache-strategy auto`` is never
resolved, so they reserve 3 slots per request where 0.5.23 reserves 5), and
``srt/arg_groups/speculative_hook.py``'s list of architectures whose MTP draft defaults
``--speculative-draft-model-path`` to the model itself (only then does 0.5.17's
``spec_aux_hidden_state.py`` size the draft's KV into the token budget).
"""

from __future__ import annotations

from tui.sglang.builds import SEED, SGLANG_0_5_17, Build

_RADIX_0_5_17 = frozenset(
    {
        "KimiLinearForCausalLM",
        "KimiK3ForConditionalGeneration",
        "BailingMoeV2_5ForCausalLM",
        "Qwen3NextForCausalLM",
        "Qwen3_5MoeForConditionalGeneration",
        "InternS2PreviewForConditionalGeneration",
        "Qwen3_5ForConditionalGeneration",
        "MiniCPMV4_6ForConditionalGeneration",
        "NemotronHForCausalLM",
        "NemotronHPuzzleForCausalLM",
        "FalconH1ForCausalLM",
        "JetNemotronForCausalLM",
        "JetVLMForConditionalGeneration",
        "Lfm2ForCausalLM",
        "Lfm2MoeForCausalLM",
        "ZayaForCausalLM",
        # GraniteMoeHybridForCausalLM joins when its layer_types hold a mamba layer.
        "GraniteMoeHybridForCausalLM",
    }
)
_RADIX_0_5_23 = _RADIX_0_5_17 | {
    "Qwen3_5MoeForCausalLM",
    "Qwen3_5ForCausalLM",
    "Qwen4ExpForConditionalGeneration",
    "MiniCPMV4_7ForConditionalGeneration",
    "NemotronH_Omni_Reasoning_V3",
    "Glm5NextForConditionalGeneration",
}

_EXTRA_BUFFER_0_5_17 = frozenset(
    {
        "KimiLinearForCausalLM",
        "Qwen3_5ForConditionalGeneration",
        "Qwen3_5MoeForConditionalGeneration",
        "Qwen3NextForCausalLM",
        "InternS2PreviewForConditionalGeneration",
        "MiniCPMV4_6ForConditionalGeneration",
        "BailingMoeV2_5ForCausalLM",
        "FalconH1ForCausalLM",
        "GraniteMoeHybridForCausalLM",
        "NemotronHForCausalLM",
        "NemotronHPuzzleForCausalLM",
        "KimiK3ForConditionalGeneration",
    }
)
_EXTRA_BUFFER_0_5_23 = _EXTRA_BUFFER_0_5_17 | {
    "Qwen3_5MoeForCausalLM",
    "Qwen3_5ForCausalLM",
    "Qwen4ExpForConditionalGeneration",
    "MiniCPMV4_7ForConditionalGeneration",
    "BailingMoeV3ForCausalLM",
    "BailingMoeV3VLForConditionalGeneration",
    "Glm5NextForConditionalGeneration",
    "NemotronH_Omni_Reasoning_V3",
    "InklingForConditionalGeneration",
    "InklingForConditionalGenerationMTP",
}

DRAFT_PATH_ARCHS = frozenset(
    {
        "DeepseekV32ForCausalLM",
        "DeepseekV3ForCausalLM",
        "DeepseekV4ForCausalLM",
        "Glm4MoeForCausalLM",
        "Glm4MoeLiteForCausalLM",
        "GlmMoeDsaForCausalLM",
        "BailingMoeForCausalLM",
        "BailingMoeV2ForCausalLM",
        "BailingMoeV2_5ForCausalLM",
        "MistralLarge3ForCausalLM",
        "PixtralForConditionalGeneration",
        "HYV3ForCausalLM",
    }
)
"""Architectures whose MTP draft defaults ``--speculative-draft-model-path`` to the model path
(both builds' ``_handle_eagle_family``)."""


def uses_mamba_radix_cache(architecture: str, build: Build) -> bool:
    """Whether the build resolves ``--mamba-radix-cache-strategy auto`` for this architecture.

    The seed build predates the lists; its numbers came from a Qwen3.5 VL model, which every list
    holds, so it answers as 0.5.23 does.
    """
    return architecture in (_RADIX_0_5_17 if build == SGLANG_0_5_17 else _RADIX_0_5_23)


def supports_extra_buffer(architecture: str, build: Build) -> bool:
    """Whether ``auto`` may resolve to ``extra_buffer`` (with the default triton linear-attention
    backend, which both builds' ``supports_mamba_cache_extra_buffer`` require)."""
    return architecture in (
        _EXTRA_BUFFER_0_5_17 if build == SGLANG_0_5_17 else _EXTRA_BUFFER_0_5_23
    )


def draft_kv_budgeted_builds(architecture: str, nextn_layers_in_config: int) -> frozenset[str]:
    """The builds that count an MTP draft's KV bytes per token in the target's token budget.

    0.5.23 sizes the draft off the target config's ``num_nextn_predict_layers`` when no draft path
    is set (a Qwen3.5 config has ``mtp_num_hidden_layers`` instead, so its draft is not counted),
    or off the draft config when the architecture sets the path; 0.5.17 only when a path is set.
    The seed build's numbers count it (see ``tui.sglang.models``).

    Args:
        architecture: ``architectures[0]``.
        nextn_layers_in_config: ``num_nextn_predict_layers`` of the (text) config, 0 if absent.

    Returns:
        The set of build names.
    """
    builds: set[str] = {SEED}
    if architecture in DRAFT_PATH_ARCHS:
        builds |= {"0.5.23", "0.5.17"}
    elif nextn_layers_in_config > 0:
        builds.add("0.5.23")
    return frozenset(builds)

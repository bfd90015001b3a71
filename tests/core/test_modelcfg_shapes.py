"""Pool shapes derived from real config.json files (tests/fixtures/model_configs, sources in its
README) against numbers computed by hand from SGLang's own formulas (``srt/configs/*.py``,
``srt/configs/mamba_utils.py``, ``srt/model_executor/pool_configurator.py``), family by family; the
two hand-written specs checked against their models' configs; the one-line refusals."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from repo_paths import FIXTURES

from bench.simfleet import seed_aggressive_plan
from tui.sglang.builds import SEED, SGLANG_0_5_17, SGLANG_0_5_23
from tui.sglang.modelcfg.errors import ModelConfigError
from tui.sglang.modelcfg.shapes import ModelShapes, derive_shapes
from tui.sglang.modelcfg.spec import resolve_model
from tui.sglang.models import GIB, MODELS

CONFIGS = FIXTURES / "model_configs"


def _config(name: str) -> dict[str, Any]:
    return json.loads((CONFIGS / name / "config.json").read_text())


def _shapes(name: str) -> ModelShapes:
    return derive_shapes(_config(name), f"{name}/config.json")


# (fixture, full-attention layers, K+V bytes/token, draft K+V bytes/token, Mamba layers,
#  conv bytes/slot, ssm bytes/slot, context length), every number by hand:
CASES = [
    # Qwen3.5 27B (Qwen3_5ForConditionalGeneration, the seed model's family): 64 layers, full
    # attention every 4th -> 16 layers * 4 KV heads * (256 + 256) * 2 B; 48 GDN layers, conv
    # (48 * 128 + 2 * 16 * 128) * 3 * 2 B, ssm 48 * 128 * 128 * 4 B (float32).
    ("Qwen--Qwen3.5-27B", 16, 65_536, 4_096, 48, 48 * 10_240 * 6, 48 * 3_145_728, 262_144),
    ("nvidia--Qwen3.6-27B-NVFP4", 16, 65_536, 4_096, 48, 2_949_120, 150_994_944, 262_144),
    # Qwen3.5-35B-A3B (MoE): 40 layers -> 10 full (2 KV heads of 256), 30 GDN (32 v heads).
    (
        "Qwen--Qwen3.5-35B-A3B",
        10,
        10 * 2 * 512 * 2,
        2_048,
        30,
        30 * 8_192 * 6,
        30 * 2_097_152,
        262_144,
    ),
    # Qwen3-Next-80B-A3B: 48 layers -> 12 full, 36 GDN; conv (32*128 + 2*16*128) * 3 * 2 B.
    (
        "Qwen--Qwen3-Next-80B-A3B-Instruct",
        12,
        24_576,
        2_048,
        36,
        36 * 49_152,
        36 * 2_097_152,
        262_144,
    ),
    # Nemotron-H 56B: pattern of 118 layers, 54 'M' and 10 '*'; conv (256*64 + 2*8*256) * 3 * 2,
    # ssm 256 * 64 * 256 * 4; KV 8 heads, head_dim 128 (NemotronHConfig's default).
    ("nvidia--Nemotron-H-56B-Base-8K", 10, 40_960, 4_096, 54, 54 * 122_880, 54 * 16_777_216, 8_192),
    # Nemotron 3 Nano 30B-A3B: 52 layers, 23 'M', 6 '*' (23 'E' MoE); conv (64*64 + 2*8*128) * 6;
    # its mamba_ssm_cache_dtype is not the key SGLang reads: float32.
    (
        "nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
        6,
        6 * 1_024,
        1_024,
        23,
        23 * 36_864,
        23 * 2_097_152,
        262_144,
    ),
    # Dense and MoE: every layer has a KV cache.
    ("meta-llama--Meta-Llama-3.1-8B", 32, 32 * 8 * 256 * 2, 0, 0, 0, 0, 131_072),
    ("Qwen--Qwen3-8B", 36, 36 * 8 * 256 * 2, 0, 0, 0, 0, 40_960),
    ("Qwen--Qwen3-30B-A3B", 48, 48 * 4 * 256 * 2, 0, 0, 0, 0, 40_960),
    ("mistralai--Mixtral-8x7B-v0.1", 32, 32 * 8 * 256 * 2, 0, 0, 0, 0, 32_768),
    # DeepSeek-V3, MLA: (kv_lora_rank 512 + qk_rope_head_dim 64) * 2 B per layer, 61 layers; the
    # yarn scaling names original_max_position_embeddings, so no factor on the context.
    ("deepseek-ai--DeepSeek-V3", 61, 61 * 1_152, 1_152, 0, 0, 0, 163_840),
    # The GPU machine's tiny models (make_tiny.py): 4 layers = 3 GDN + 1 full attention,
    # 2 KV heads of 64; conv (4*64 + 2*2*64) * 3 * 2; ssm 4 * 64 * 64 * 4. Qwen3.5/3.6, Qwen3-Next
    # and Nemotron-H always get a one-layer MTP draft under NEXTN, whatever the config says (the
    # 0.5.17 recording of tiny-qwen35 loads one), so its draft pool is one layer.
    ("gpufleet--tiny-qwen35", 1, 512, 512, 3, 3 * 3_072, 3 * 65_536, 4_096),
    ("gpufleet--tiny-qwen3next", 1, 512, 512, 3, 9_216, 196_608, 4_096),
    ("gpufleet--tiny-qwen3", 2, 1_024, 0, 0, 0, 0, 4_096),
]


@pytest.mark.parametrize(
    ("name", "full", "kv", "draft", "mamba", "conv", "ssm", "context"),
    CASES,
    ids=[c[0] for c in CASES],
)
def test_shapes_match_sglangs_formulas(
    name: str, full: int, kv: int, draft: int, mamba: int, conv: int, ssm: int, context: int
) -> None:
    shapes = _shapes(name)
    assert shapes.full_attention_layers == full
    assert shapes.kv_bytes_per_token == kv
    assert shapes.draft_kv_bytes_per_token == draft
    assert shapes.context_length == context
    if mamba:
        assert shapes.state is not None
        assert shapes.state.layers == mamba
        assert (shapes.state.conv_state_bytes, shapes.state.ssm_state_bytes) == (conv, ssm)
    else:
        assert not shapes.is_hybrid


def test_multimodal_and_draft_budget_follow_each_builds_source() -> None:
    qwen = _shapes("Qwen--Qwen3.5-27B")
    assert qwen.multimodal and qwen.model_dtype == "bfloat16"
    # A Qwen3.5 config has mtp_num_hidden_layers, not num_nextn_predict_layers: only the seed
    # build (the hand-fitted numbers) counts its path-less draft in the token budget.
    assert qwen.draft_budgeted_builds == {SEED}
    deepseek = _shapes("deepseek-ai--DeepSeek-V3")
    assert deepseek.draft_budgeted_builds == {SEED, SGLANG_0_5_17, SGLANG_0_5_23}
    assert deepseek.quantization == "fp8" and deepseek.mla_kv_dim == 576
    assert not _shapes("gpufleet--tiny-qwen35").multimodal


def _with(config: dict[str, Any], **changes: Any) -> dict[str, Any]:
    return {**config, **changes}


def test_falcon_h1_from_its_documented_shapes() -> None:
    """No real Falcon-H1 config.json could be found (fixtures README); this one is built from the
    H1 0.5B row of the transformers documentation table, not a real file."""
    config = {
        "architectures": ["FalconH1ForCausalLM"],
        "model_type": "falcon_h1",
        "hidden_size": 1024,
        "num_hidden_layers": 36,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "head_dim": 64,
        "mamba_d_ssm": 1536,
        "mamba_n_heads": 24,
        "mamba_d_head": 64,
        "mamba_d_state": 128,
        "max_position_embeddings": 16384,
        "torch_dtype": "bfloat16",
    }
    shapes = derive_shapes(config, "falcon")
    # Attention and Mamba in every layer: KV 36 * 2 * (64 + 64) * 2; conv (1536 + 2 * 128) * 3 * 2
    # per layer (mamba_n_groups 1), ssm 24 * 64 * 128 * 4.
    assert shapes.kv_bytes_per_token == 36 * 512
    assert shapes.state is not None and shapes.state.layers == 36
    assert shapes.state.conv_state_bytes == 36 * 10_752
    assert shapes.state.ssm_state_bytes == 36 * 786_432
    with pytest.raises(ModelConfigError, match="mamba_d_head"):
        derive_shapes(_with(config, mamba_d_head=60), "falcon")  # 24 * 60 != 1536


def test_granite_hybrid_defaults_and_float32_state() -> None:
    """Built from GraniteMoeHybridConfig's own defaults (no real Granite 4.0-H config.json could
    be found): no layer_types means attention every 6th layer; the state is always float32
    (its cache params take no dtype), whatever mamba_ssm_dtype says."""
    config = {
        "architectures": ["GraniteMoeHybridForCausalLM"],
        "model_type": "granitemoehybrid",
        "hidden_size": 1536,
        "num_hidden_layers": 40,
        "num_attention_heads": 12,
        "num_key_value_heads": 4,
        "mamba_n_heads": 48,
        "mamba_d_head": 64,
        "mamba_ssm_dtype": "bfloat16",
    }
    shapes = derive_shapes(config, "granite")
    assert shapes.full_attention_layers == 6  # layers 5, 11, 17, 23, 29, 35
    assert shapes.kv_bytes_per_token == 6 * 4 * 256 * 2
    assert shapes.state is not None and shapes.state.layers == 34
    assert shapes.state.conv_state_bytes == 34 * (3072 + 2 * 128) * 3 * 2
    assert shapes.state.ssm_state_bytes == 34 * 48 * 64 * 128 * 4
    only_attention = derive_shapes(_with(config, layer_types=["attention"] * 40), "granite")
    assert not only_attention.is_hybrid and only_attention.full_attention_layers == 40


def test_hand_written_specs_equal_their_models_configs() -> None:
    """The two hand-written specs are fixtures checked against configs: every shape the config
    gives is the same; what stays hand-written is the named calibration (weights as served,
    graphs, throughput) and the B200 page size."""
    hand = MODELS["qwen3.6-27b"]
    for name in ("Qwen--Qwen3.5-27B", "nvidia--Qwen3.6-27B-NVFP4"):
        derived = resolve_model(str(CONFIGS / name))
        for field in (
            "architecture",
            "kv_bytes_per_token",
            "draft_kv_bytes_per_token",
            "is_hybrid_mamba",
            "conv_state_bytes",
            "ssm_state_bytes",
            "conv_window",
            "ssm_dtype_bytes",
            "is_multimodal",
            "context_length",
        ):
            assert getattr(derived, field) == getattr(hand, field), (name, field)
    llama = resolve_model(str(CONFIGS / "meta-llama--Meta-Llama-3.1-8B"))
    for field in ("architecture", "kv_bytes_per_token", "is_hybrid_mamba", "context_length"):
        assert getattr(llama, field) == getattr(MODELS["llama-8b"], field), field


def test_the_seed_numbers_stay_exact_from_the_derived_shapes() -> None:
    """The config-derived shapes plus the hand spec's named calibration give the seed's exact
    allocation: 798,080 KV tokens with the aggressive flags on a B200 (seed build)."""
    hand = MODELS["qwen3.6-27b"]
    derived = resolve_model(str(CONFIGS / "nvidia--Qwen3.6-27B-NVFP4"))
    calibrated = dataclasses.replace(
        derived,
        weight_bytes=hand.weight_bytes,
        draft_weight_bytes=hand.draft_weight_bytes,
        default_page_size=hand.default_page_size,
    )
    plan = seed_aggressive_plan(calibrated, build=SEED)
    assert plan.max_total_num_tokens == 798_080
    assert (round(plan.conv_state_bytes / GIB, 2), round(plan.ssm_state_bytes / GIB, 2)) == (
        0.55,
        28.27,
    )
    assert round(plan.k_bytes / GIB, 2) == 24.36 and round(plan.draft_k_bytes / GIB, 2) == 1.52


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"architectures": None}, "config.json: architectures missing"),
        ({"architectures": ["MysteryForCausalLM"]}, "MysteryForCausalLM: not a family"),
        ({"hidden_size": None, "head_dim": None}, "hidden_size missing"),
    ],
)
def test_a_missing_field_is_one_line_naming_it_and_the_file(
    change: dict[str, Any], needle: str
) -> None:
    config = {k: v for k, v in _with(_config("Qwen--Qwen3-8B"), **change).items() if v is not None}
    with pytest.raises(ModelConfigError) as info:
        derive_shapes(config, "/models/q/config.json")
    message = str(info.value)
    assert needle in message and "\n" not in message
    assert message.startswith("/models/q/config.json: ")


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"num_hidden_layers": 0}, "num_hidden_layers = 0 must be at least 1"),
        ({"head_dim": 0}, "head_dim = 0 must be at least 1"),
        ({"num_key_value_heads": -8}, "num_key_value_heads = -8 must be at least 1"),
        ({"rope_scaling": {"factor": "2"}}, "rope_scaling.factor = '2' is not a positive number"),
        ({"rope_scaling": {"factor": [2]}}, "rope_scaling.factor = [2] is not a positive number"),
    ],
)
def test_a_size_or_factor_below_its_least_is_one_line_naming_it(
    tmp_path: Path, change: dict[str, Any], needle: str
) -> None:
    # Before: accepted, and `gpufleet plan` then died of a ZeroDivisionError ("unexpected error").
    config = tmp_path / "config.json"
    config.write_text(json.dumps(_with(_config("Qwen--Qwen3-8B"), **change)))
    with pytest.raises(ModelConfigError) as info:
        resolve_model(str(tmp_path), load_format="dummy")
    assert str(info.value) == f"{config}: {needle}"


def test_a_nested_text_config_field_is_named_with_its_path() -> None:
    config = _config("Qwen--Qwen3.5-27B")
    del config["text_config"]["full_attention_interval"]
    with pytest.raises(ModelConfigError) as info:
        derive_shapes(config, "/m/config.json")
    assert str(info.value) == (
        "/m/config.json: text_config.full_attention_interval missing "
        "(needed for the layer types (SGLang's rule))"
    )
    nemotron = _config("nvidia--Nemotron-H-56B-Base-8K")
    del nemotron["n_groups"]
    with pytest.raises(ModelConfigError, match=r"n_groups missing \(needed for the Mamba conv"):
        derive_shapes(nemotron, "/n/config.json")


def test_families_sglang_cannot_serve_are_refused_in_one_line() -> None:
    with pytest.raises(ModelConfigError) as info:
        resolve_model(str(CONFIGS / "ai21labs--AI21-Jamba-1.5-Mini"))
    assert str(info.value).endswith(
        "JambaForCausalLM: cannot plan: SGLang (0.5.17, 0.5.23) has no Jamba model"
    )
    sparse = _with(_config("deepseek-ai--DeepSeek-V3"), index_topk=2048)
    with pytest.raises(ModelConfigError, match="DeepSeek sparse attention"):
        derive_shapes(sparse, "dsa")

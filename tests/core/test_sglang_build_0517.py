"""The ``0.5.17`` build: SGLang 0.5.17's arithmetic where it differs from 0.5.23 (read file by file
from its wheel: ``srt/mem_cache/kv_cache_configurator.py``, ``srt/arg_groups/overrides.py``,
``srt/model_executor/model_runner_components/spec_aux_hidden_state.py``), checked on the GPU
machine's own tiny model (make_tiny.py's Qwen3_5ForCausalLM) with numbers computed by hand."""

from __future__ import annotations

from typing import Any

import pytest
from repo_paths import FIXTURES

from tui.gpu.sim_records import SIM_GPU_KINDS
from tui.sglang.builds import SEED, SGLANG_0_5_17, SGLANG_0_5_23, Build
from tui.sglang.memory import plan_memory
from tui.sglang.modelcfg.spec import resolve_model
from tui.sglang.models import MODELS

CONFIGS = FIXTURES / "model_configs"
H200 = SIM_GPU_KINDS["h200"][1]
B200 = SIM_GPU_KINDS["b200"][1]
TINY = resolve_model(str(CONFIGS / "gpufleet--tiny-qwen35"), load_format="dummy")
# serve.sh's flags: --mem-fraction-static 0.2 --context-length 4096 --max-running-requests 16
# --max-mamba-cache-size 64 --disable-cuda-graph (the other flags do not size memory).
SERVE: dict[str, Any] = dict(
    mem_fraction_static=0.2,
    context_length=4096,
    max_running_requests=16,
    max_mamba_cache_size=64,
    disable_cuda_graph=True,
)


def test_the_tiny_models_plan_by_hand() -> None:
    """pre 10 GiB; 73,371,448 B taken before the weights (0.5.17's, measured on the recordings);
    dummy weights 3,160,676 bf16 parameters = 6,321,352 B; slack 0.8 * pre = 8,589,934,592;
    rest = pre - both - slack = 2,067,790,848; 65 Mamba slots (64 + padding) of 9,216 + 196,608 B
    = 13,378,560; KV tokens (rest - that) // 512 B = 4,012,524."""
    plan = plan_memory(TINY, H200, pre_bytes=10 * 2**30, build=SGLANG_0_5_17, **SERVE)
    assert plan.ok
    assert (plan.weight_bytes, plan.before_weights_bytes) == (6_321_352, 73_371_448)
    assert (plan.slack_bytes, plan.rest_bytes) == (8_589_934_592, 2_067_790_848)
    assert plan.max_mamba_cache_size == 64
    assert (plan.conv_state_bytes, plan.ssm_state_bytes) == (65 * 9_216, 65 * 196_608)
    assert plan.max_total_num_tokens == 4_012_524
    assert plan.k_bytes == plan.v_bytes == 4_012_524 * 256
    assert plan.max_running_requests == 16 and not plan.capped_by_mamba
    assert plan.graph_bytes == 0 and plan.cuda_graph_max_bs == 0  # --disable-cuda-graph


def test_0517_leaves_qwen3_5_for_causal_lm_strategy_unresolved() -> None:
    """0.5.17's lists lack Qwen3_5ForCausalLM: ``auto`` stays, no extra buffer, 3 slots per
    request (64 // 3 = 21 >= 16: no cap). 0.5.23 lists it: extra_buffer with overlap, 5 slots,
    64 // 5 = 12 < 16: capped, with the WARNING."""
    old = plan_memory(TINY, H200, pre_bytes=10 * 2**30, build=SGLANG_0_5_17, **SERVE)
    new = plan_memory(TINY, H200, pre_bytes=10 * 2**30, build=SGLANG_0_5_23, **SERVE)
    assert (old.mamba_strategy, old.mamba_slots_per_request) == ("auto", 3)
    assert (new.mamba_strategy, new.mamba_slots_per_request) == ("extra_buffer", 5)
    assert old.max_running_requests == 16 and old.warnings == ()
    assert new.max_running_requests == 12 and new.capped_by_mamba
    assert new.warnings[0].startswith("max_running_requests is capped to 12 by the mamba state")
    # The multimodal Qwen3_5ForConditionalGeneration is in both builds' lists.
    assert plan_memory(MODELS["qwen3.6-27b"], B200, build=SGLANG_0_5_17).mamba_strategy == (
        "extra_buffer"
    )


def test_0517_has_no_multimodal_reserve() -> None:
    flags: dict[str, Any] = dict(
        mem_fraction_static=0.93, max_mamba_cache_size=200, speculative_algorithm="EAGLE"
    )
    qwen = MODELS["qwen3.6-27b"]
    old = plan_memory(qwen, B200, build=SGLANG_0_5_17, **flags)
    new = plan_memory(qwen, B200, build=SGLANG_0_5_23, **flags)
    assert old.multimodal_reserve_bytes == 0 and new.multimodal_reserve_bytes == 100 * 2**20
    assert old.rest_bytes == old.avail_after_weights_bytes - old.slack_bytes
    assert new.rest_bytes == new.avail_after_weights_bytes - new.slack_bytes - 100 * 2**20


def test_a_path_less_mtp_draft_is_budgeted_only_where_the_source_says() -> None:
    """The draft pool is allocated in every build; its bytes per token count in the budget only
    where SGLang sizes them in: never for a Qwen3.5 config outside the seed build, always for
    DeepSeek (its draft path defaults to the model path)."""
    qwen = resolve_model(str(CONFIGS / "Qwen--Qwen3.5-27B"))
    flags: dict[str, Any] = dict(
        mem_fraction_static=0.93, max_mamba_cache_size=200, speculative_algorithm="EAGLE"
    )
    for build, cell in ((SGLANG_0_5_23, 65_536), (SGLANG_0_5_17, 65_536), (SEED, 69_632)):
        plan = plan_memory(qwen, B200, build=build, **flags)
        rest = plan.rest_bytes - plan.mamba_reserve_bytes
        assert plan.max_total_num_tokens == rest // cell, build
        assert plan.draft_k_bytes == plan.max_total_num_tokens * 4_096 // 2
    deepseek = resolve_model(str(CONFIGS / "deepseek-ai--DeepSeek-V3"))
    assert SGLANG_0_5_17 in deepseek.draft_kv_budgeted_builds


@pytest.mark.parametrize(("build", "slots"), [(SGLANG_0_5_17, 0), (SGLANG_0_5_23, 1)])
def test_0517_takes_max_running_requests_without_the_floor_of_one(build: Build, slots: int) -> None:
    """``--disable-radix-cache --max-running-requests 0``: 0.5.17 sizes 0 Mamba slots (and
    fails), 0.5.23 floors the request at 1."""
    plan = plan_memory(
        TINY,
        H200,
        pre_bytes=10 * 2**30,
        disable_radix_cache=True,
        max_running_requests=0,
        mem_fraction_static=0.2,
        build=build,
    )
    assert plan.max_mamba_cache_size == slots
    assert plan.ok == (slots > 0)
    if not plan.ok:
        assert plan.failure is not None and plan.failure.kind == "mamba_no_memory"

"""The memory planner against hand-computed cases: the seed build reproduces the seed's log lines;
the default build follows SGLang 0.5.23's source (``srt/mem_cache/kv_cache_configurator.py``,
``srt/model_executor/pool_configurator.py``, ``srt/mem_cache/memory_pool.py``)."""

from __future__ import annotations

import math
from typing import TypedDict

import pytest

from tui.gpu.sim_records import SIM_GPU_KINDS
from tui.sglang.builds import SEED, SGLANG_0_5_23, Build
from tui.sglang.memory import plan_memory, slots_per_request
from tui.sglang.models import GIB, get_model
from tui.sglang.plan_types import Calibration

QWEN = get_model("qwen3.6-27b")
LLAMA = get_model("llama-8b")
B200 = SIM_GPU_KINDS["b200"][1]
H100 = SIM_GPU_KINDS["h100"][1]


class Flags(TypedDict, total=False):
    """The flags of ``plan_memory`` these tests set, each with its type (a plain dict of them
    would pass every value as ``object``)."""

    mem_fraction_static: float
    max_mamba_cache_size: int
    mamba_full_memory_ratio: float
    max_running_requests: int
    max_total_tokens: int
    page_size: int
    speculative_algorithm: str


SEED_FLAGS = Flags(
    mem_fraction_static=0.93,
    max_mamba_cache_size=200,
    mamba_full_memory_ratio=0.6,
    max_running_requests=64,
    speculative_algorithm="EAGLE",
)
BASELINE_FLAGS = Flags(
    mem_fraction_static=0.88, max_mamba_cache_size=80, speculative_algorithm="EAGLE"
)


def gb(n: int) -> float:
    return round(n / GIB, 2)


def test_seed_aggressive_reproduces_the_seeds_allocation_lines() -> None:
    plan = plan_memory(QWEN, B200, build=SEED, **SEED_FLAGS)
    assert plan.ok
    assert plan.max_mamba_cache_size == 200
    assert (gb(plan.conv_state_bytes), gb(plan.ssm_state_bytes)) == (0.55, 28.27)
    assert (gb(plan.intermediate_ssm_bytes), gb(plan.intermediate_conv_bytes)) == (23.06, 0.45)
    assert plan.max_total_num_tokens == 798080
    assert (gb(plan.k_bytes), gb(plan.v_bytes)) == (24.36, 24.36)
    assert (gb(plan.draft_k_bytes), gb(plan.draft_v_bytes)) == (1.52, 1.52)
    # 5 slots per request (extra_buffer + overlap + spec): 200 // 5 = 40 < 64.
    assert plan.mamba_slots_per_request == 5
    assert plan.max_running_requests == 40 and plan.capped_by_mamba
    assert plan.requested_max_running_requests == 64
    assert any("capped to 40" in w for w in plan.warnings)
    # PR #9083's advice: a few GB left after capture.
    assert 5 * GIB < plan.available_gpu_mem_bytes < 15 * GIB


def test_seed_baseline_80_slots_cap_16() -> None:
    plan = plan_memory(QWEN, B200, build=SEED, **BASELINE_FLAGS)
    assert plan.ok
    assert gb(plan.ssm_state_bytes) == 11.39
    assert gb(plan.intermediate_ssm_bytes) == 9.56  # (min(48, 80 // 5) + 1) * 4 slots
    assert plan.max_running_requests == 16 and plan.capped_by_mamba
    assert plan.warnings[0].startswith("Max running requests is reset to 48")
    assert abs(plan.max_total_num_tokens - 1_142_976) / 1_142_976 < 0.005
    assert plan.max_total_num_tokens % plan.page_size == 0


@pytest.mark.parametrize("build", [SGLANG_0_5_23, SEED])
def test_kv_tokens_follow_the_formula(build: Build) -> None:
    plan = plan_memory(QWEN, B200, build=build, **SEED_FLAGS)
    rest = plan.rest_bytes - plan.mamba_reserve_bytes
    cell = QWEN.kv_bytes_per_token + QWEN.draft_kv_bytes_per_token
    assert plan.max_total_num_tokens == rest // cell // 64 * 64
    reserve = plan.multimodal_reserve_bytes
    assert plan.rest_bytes == plan.avail_after_weights_bytes - plan.slack_bytes - reserve
    assert plan.slack_bytes == int(plan.pre_bytes * (1 - 0.93))


def test_raising_the_fraction_grows_kv_and_other_tenants_shrink_it() -> None:
    low = plan_memory(QWEN, B200, **(SEED_FLAGS | Flags(mem_fraction_static=0.90)))
    high = plan_memory(QWEN, B200, **SEED_FLAGS)
    crowded = plan_memory(QWEN, B200, other_resident_bytes=4 * GIB, **SEED_FLAGS)
    assert low.max_total_num_tokens < high.max_total_num_tokens
    assert crowded.max_total_num_tokens < high.max_total_num_tokens


@pytest.mark.parametrize(
    ("strategy", "radix_off", "overlap", "expected"),
    [
        ("extra_buffer", False, True, 5),
        ("extra_buffer", False, False, 4),
        ("extra_buffer_lazy", False, True, 4),
        ("no_buffer", False, True, 3),
        ("extra_buffer", True, True, 1),
    ],
)
def test_slots_per_request(strategy: str, radix_off: bool, overlap: bool, expected: int) -> None:
    assert slots_per_request(strategy, radix_off, overlap) == expected


def test_disable_radix_cache_uses_ratio_one_and_branch_two() -> None:
    plan = plan_memory(
        QWEN,
        B200,
        mem_fraction_static=0.9,
        max_running_requests=32,
        disable_radix_cache=True,
        speculative_algorithm="EAGLE",
    )
    assert plan.ok and plan.max_mamba_cache_size == 32 and plan.max_running_requests == 32
    assert not plan.capped_by_mamba
    assert plan.intermediate_ssm_bytes == 33 * 4 * QWEN.ssm_state_bytes


def test_auto_mamba_budget_branch_three() -> None:
    plan = plan_memory(QWEN, B200, mem_fraction_static=0.9, mamba_full_memory_ratio=0.9, build=SEED)
    assert plan.ok
    budget = plan.rest_bytes * 0.9 / 1.9
    slot = QWEN.mamba_slot_bytes
    assert plan.max_mamba_cache_size == int((budget - slot) // slot)
    assert plan.max_running_requests == plan.max_mamba_cache_size // 5


def test_bf16_ssm_halves_the_state() -> None:
    fp32 = plan_memory(QWEN, B200, **SEED_FLAGS)
    bf16 = plan_memory(QWEN, B200, mamba_ssm_dtype="bfloat16", **SEED_FLAGS)
    assert bf16.ssm_state_bytes * 2 == fp32.ssm_state_bytes
    assert bf16.max_total_num_tokens > fp32.max_total_num_tokens


def test_failure_weights_leave_no_memory_gives_the_minimum_fraction() -> None:
    plan = plan_memory(QWEN, B200, build=SEED, **(SEED_FLAGS | Flags(mem_fraction_static=0.3)))
    assert plan.failure is not None and plan.failure.exception == "ValueError"
    minimum = 1 - plan.avail_after_weights_bytes / plan.pre_bytes
    assert f"{minimum:.4f}" in plan.failure.message
    assert plan.failure.message.startswith("Loaded weights leave no GPU memory")


def test_seed_build_not_enough_memory_when_mamba_eats_the_rest() -> None:
    plan = plan_memory(QWEN, B200, build=SEED, **(SEED_FLAGS | Flags(mem_fraction_static=0.5)))
    assert plan.failure is not None
    assert plan.failure.line == (
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
        "Current value: mem_fraction_static=0.5"
    )


def test_failure_cuda_oom_at_graph_capture_when_fraction_is_too_high() -> None:
    ok = plan_memory(QWEN, B200, **(SEED_FLAGS | Flags(mem_fraction_static=0.95)))
    oom = plan_memory(QWEN, B200, **(SEED_FLAGS | Flags(mem_fraction_static=0.97)))
    assert ok.ok
    assert oom.failure is not None and oom.failure.phase == "cuda_graph"
    assert oom.failure.line.startswith(
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate"
    )


def test_failure_mamba_too_small_and_mamba_no_memory() -> None:
    small = plan_memory(QWEN, B200, max_mamba_cache_size=4, speculative_algorithm="EAGLE")
    assert small.failure is not None and small.failure.kind == "mamba_too_small"
    starved = plan_memory(QWEN, H100, mem_fraction_static=0.72, mamba_full_memory_ratio=0.01)
    assert starved.failure is not None and starved.failure.kind == "mamba_no_memory"
    assert "Not enough GPU memory for hybrid" in starved.failure.message


def test_plain_model_has_no_mamba_and_uses_the_kv_auto_cap() -> None:
    plan = plan_memory(LLAMA, H100, mem_fraction_static=0.85)
    assert plan.ok and plan.mamba_bytes == 0 and plan.max_mamba_cache_size == 0
    estimated = min(max(int(plan.max_total_num_tokens / plan.context_len * 512), 2048), 4096)
    assert plan.max_running_requests == min(estimated, plan.max_total_num_tokens // 2)


def test_max_total_tokens_caps_and_warns() -> None:
    plan = plan_memory(LLAMA, H100, mem_fraction_static=0.85, max_total_tokens=10_000_000)
    assert any("is larger than the profiled value" in w for w in plan.warnings)
    capped = plan_memory(LLAMA, H100, mem_fraction_static=0.85, max_total_tokens=1000)
    assert capped.max_total_num_tokens == 1000


def test_default_fraction_is_chosen_when_unset() -> None:
    plan = plan_memory(QWEN, B200, max_mamba_cache_size=80, speculative_algorithm="EAGLE")
    assert plan.fraction_was_default and 0.8 < plan.mem_fraction_static < 0.95


def test_calibration_from_the_seeds_lines_recovers_the_spec() -> None:
    cal = Calibration.from_log_values(
        kv_tokens=798080,
        k_gb=24.36,
        v_gb=24.36,
        draft_k_gb=1.52,
        draft_v_gb=1.52,
        mamba_slots=200,
        conv_gb=0.55,
        ssm_gb=28.27,
    )
    assert cal.kv_bytes_per_token is not None and cal.ssm_state_bytes is not None
    assert abs(cal.kv_bytes_per_token - QWEN.kv_bytes_per_token) / QWEN.kv_bytes_per_token < 0.002
    assert abs(cal.ssm_state_bytes - QWEN.ssm_state_bytes) / QWEN.ssm_state_bytes < 0.002
    calibrated = plan_memory(QWEN, B200, calibration=cal, build=SEED, **SEED_FLAGS)
    assert abs(calibrated.max_total_num_tokens - 798080) / 798080 < 0.01
    heavier = plan_memory(
        QWEN,
        B200,
        calibration=Calibration(kv_bytes_per_token=2 * QWEN.kv_bytes_per_token),
        build=SEED,
        **SEED_FLAGS,
    )
    assert heavier.max_total_num_tokens < calibrated.max_total_num_tokens


# --- SGLang 0.5.23 (the default build) -------------------------------------------------------


def test_0523_auto_pool_at_fraction_030_raises_the_mamba_runtime_error() -> None:
    # kv_cache_configurator.py carves the Mamba pool before the "Loaded weights" check: an
    # auto-sized pool that gets nothing raises the RuntimeError, not the ValueError.
    plan = plan_memory(QWEN, B200, mem_fraction_static=0.30, speculative_algorithm="EAGLE")
    assert plan.failure is not None and plan.failure.kind == "mamba_no_memory"
    assert plan.failure.line.startswith(
        "RuntimeError: Not enough GPU memory for hybrid (mamba/linear-attention) state cache. "
        "Computed max_mamba_cache_size=-"
    )
    assert plan.failure.message.endswith(
        "Try: (1) reduce --max-running-requests, (2) increase --mem-fraction-static, "
        "(3) reduce --speculative-num-draft-tokens, or (4) use GPUs with more memory."
    )
    seed = plan_memory(
        QWEN, B200, mem_fraction_static=0.30, speculative_algorithm="EAGLE", build=SEED
    )
    assert seed.failure is not None and seed.failure.kind == "weights_leave_no_memory"


@pytest.mark.parametrize("fraction", [0.30, 0.6])
def test_0523_explicit_900_slots_raise_the_value_error(fraction: float) -> None:
    plan = plan_memory(
        QWEN,
        B200,
        mem_fraction_static=fraction,
        max_mamba_cache_size=900,
        speculative_algorithm="EAGLE",
    )
    assert plan.failure is not None and plan.failure.exception == "ValueError"
    minimum = 1 - plan.avail_after_weights_bytes / plan.pre_bytes
    assert plan.failure.message == (
        "Loaded weights leave no GPU memory for the KV cache under "
        f"--mem-fraction-static={fraction}. Raise --mem-fraction-static above "
        f"{math.ceil(minimum * 1000) / 1000:.3f} (minimum viable = 1 - available/pre = "
        f"{minimum:.4f}). If using speculative decoding, draft weights are now counted."
    )
    seed = plan_memory(
        QWEN,
        B200,
        mem_fraction_static=0.6,
        max_mamba_cache_size=900,
        speculative_algorithm="EAGLE",
        build=SEED,
    )
    assert seed.failure is not None and seed.failure.kind == "not_enough_memory"


def test_0523_reserves_100_mib_for_a_multimodal_model_only() -> None:
    qwen = plan_memory(QWEN, B200, **SEED_FLAGS)
    seed = plan_memory(QWEN, B200, build=SEED, **SEED_FLAGS)
    assert QWEN.is_multimodal and qwen.multimodal_reserve_bytes == 100 * 1024**2
    assert seed.multimodal_reserve_bytes == 0
    assert seed.rest_bytes - qwen.rest_bytes == 100 * 1024**2
    cell = QWEN.kv_bytes_per_token + QWEN.draft_kv_bytes_per_token
    assert (
        qwen.max_total_num_tokens
        == (seed.rest_bytes - 100 * 1024**2 - qwen.mamba_reserve_bytes) // cell // 64 * 64
    )
    assert qwen.max_total_num_tokens < 798080
    llama = plan_memory(LLAMA, H100, mem_fraction_static=0.85)
    assert llama.multimodal_reserve_bytes == 0


def test_0523_stores_the_intermediate_conv_window_compactly() -> None:
    qwen = plan_memory(QWEN, B200, **SEED_FLAGS)
    seed = plan_memory(QWEN, B200, build=SEED, **SEED_FLAGS)
    # 41 rows (40 effective + 1) x 4 draft tokens: dense 12 columns, compact 4 + 3 - 1 = 6.
    assert gb(seed.intermediate_conv_bytes) == 0.45
    assert gb(qwen.intermediate_conv_bytes) == 0.23
    assert qwen.intermediate_conv_bytes * 2 == seed.intermediate_conv_bytes
    # The budget is still charged the dense windows (mamba_cache_per_req counts them).
    assert qwen.intermediate_reserve_bytes == seed.intermediate_reserve_bytes
    assert qwen.mamba_bytes < qwen.mamba_reserve_bytes


def test_0523_max_prefill_tokens_defaults_to_16384() -> None:
    h100 = plan_memory(LLAMA, H100, mem_fraction_static=0.85)
    assert (h100.chunked_prefill_size, h100.max_prefill_tokens) == (8192, 16384)
    assert plan_memory(LLAMA, H100, mem_fraction_static=0.85, build=SEED).max_prefill_tokens == 8192


def test_0523_too_small_pool_names_the_remedies() -> None:
    small = plan_memory(QWEN, B200, max_mamba_cache_size=4, speculative_algorithm="EAGLE")
    assert small.failure is not None and small.failure.kind == "mamba_too_small"
    assert small.failure.message.endswith(
        "resulting max_num_reqs=0. Try: (1) reduce --max-running-requests, (2) increase "
        "--mem-fraction-static, or (3) use GPUs with more memory."
    )


def test_0523_kv_warning_only_when_mamba_did_not_cap() -> None:
    capped = plan_memory(QWEN, B200, **(SEED_FLAGS | Flags(max_total_tokens=64)))
    assert capped.failure is None and capped.capped_by_mamba is False
    assert capped.max_running_requests == 32 and capped.reduced_by_kv
    assert [w for w in capped.warnings if "reduced from" in w] == [
        "max_running_requests was reduced from the requested 64 to 32 (per dp worker) due to "
        "the available KV cache capacity."
    ]
    # 100 tokens bound it to 50, then the 200 Mamba slots cap it to 40: only the cap is told.
    both_flags = SEED_FLAGS | Flags(max_total_tokens=100, page_size=1)
    both = plan_memory(QWEN, B200, **both_flags)
    assert both.capped_by_mamba and both.max_running_requests == 40
    assert not any("reduced from" in w for w in both.warnings)
    seed = plan_memory(QWEN, B200, build=SEED, **both_flags)
    assert any("reduced from the requested 64 to 50" in w for w in seed.warnings)

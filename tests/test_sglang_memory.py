"""The memory planner against hand-computed cases (sizes from the seed's log lines)."""

from __future__ import annotations

import pytest

from tui.gpu.sim_records import SIM_GPU_KINDS
from tui.sglang.memory import plan_memory, slots_per_request
from tui.sglang.models import GIB, get_model
from tui.sglang.plan_types import Calibration

QWEN = get_model("qwen3.6-27b")
LLAMA = get_model("llama-8b")
B200 = SIM_GPU_KINDS["b200"][1]
H100 = SIM_GPU_KINDS["h100"][1]
SEED_FLAGS = dict(
    mem_fraction_static=0.93,
    max_mamba_cache_size=200,
    mamba_full_memory_ratio=0.6,
    max_running_requests=64,
    speculative_algorithm="EAGLE",
)
BASELINE_FLAGS = dict(
    mem_fraction_static=0.88, max_mamba_cache_size=80, speculative_algorithm="EAGLE"
)


def gb(n: int) -> float:
    return round(n / GIB, 2)


def test_seed_aggressive_reproduces_the_seeds_allocation_lines() -> None:
    plan = plan_memory(QWEN, B200, **SEED_FLAGS)
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
    plan = plan_memory(QWEN, B200, **BASELINE_FLAGS)
    assert plan.ok
    assert gb(plan.ssm_state_bytes) == 11.39
    assert gb(plan.intermediate_ssm_bytes) == 9.56  # (min(48, 80 // 5) + 1) * 4 slots
    assert plan.max_running_requests == 16 and plan.capped_by_mamba
    assert plan.warnings[0].startswith("Max running requests is reset to 48")
    assert abs(plan.max_total_num_tokens - 1_142_976) / 1_142_976 < 0.005
    assert plan.max_total_num_tokens % plan.page_size == 0


def test_kv_tokens_follow_the_formula() -> None:
    plan = plan_memory(QWEN, B200, **SEED_FLAGS)
    rest = plan.rest_bytes - plan.mamba_bytes
    cell = QWEN.kv_bytes_per_token + QWEN.draft_kv_bytes_per_token
    assert plan.max_total_num_tokens == rest // cell // 64 * 64
    assert plan.rest_bytes == plan.avail_after_weights_bytes - plan.slack_bytes
    assert plan.slack_bytes == int(plan.pre_bytes * (1 - 0.93))


def test_raising_the_fraction_grows_kv_and_other_tenants_shrink_it() -> None:
    low = plan_memory(QWEN, B200, **{**SEED_FLAGS, "mem_fraction_static": 0.90})
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
    plan = plan_memory(QWEN, B200, mem_fraction_static=0.9, mamba_full_memory_ratio=0.9)
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
    plan = plan_memory(QWEN, B200, **{**SEED_FLAGS, "mem_fraction_static": 0.3})
    assert plan.failure is not None and plan.failure.exception == "ValueError"
    minimum = 1 - plan.avail_after_weights_bytes / plan.pre_bytes
    assert f"{minimum:.4f}" in plan.failure.message
    assert plan.failure.message.startswith("Loaded weights leave no GPU memory")


def test_failure_not_enough_memory_when_mamba_eats_the_rest() -> None:
    plan = plan_memory(QWEN, B200, **{**SEED_FLAGS, "mem_fraction_static": 0.5})
    assert plan.failure is not None
    assert plan.failure.line == (
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
        "Current value: mem_fraction_static=0.5"
    )


def test_failure_cuda_oom_at_graph_capture_when_fraction_is_too_high() -> None:
    ok = plan_memory(QWEN, B200, **{**SEED_FLAGS, "mem_fraction_static": 0.95})
    oom = plan_memory(QWEN, B200, **{**SEED_FLAGS, "mem_fraction_static": 0.97})
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
    calibrated = plan_memory(QWEN, B200, calibration=cal, **SEED_FLAGS)
    assert abs(calibrated.max_total_num_tokens - 798080) / 798080 < 0.01
    heavier = plan_memory(
        QWEN,
        B200,
        calibration=Calibration(kv_bytes_per_token=2 * QWEN.kv_bytes_per_token),
        **SEED_FLAGS,
    )
    assert heavier.max_total_num_tokens < calibrated.max_total_num_tokens

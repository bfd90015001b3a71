"""The ``0.5.17`` plan against a real SGLang 0.5.17 server: the 13 launches recorded on an H100
(``tests/fixtures/real_sglang/0.5.17``, the tiny random-weight Qwen3_5ForCausalLM of
``bench/real_sglang/make_tiny.py``, the flags of ``bench/real_sglang/explore.py``'s SCENARIOS)."""

from __future__ import annotations

from typing import Any

import pytest
from repo_paths import FIXTURES

from tui.retune import plan_cli
from tui.retune.plan_log import read_launch
from tui.sglang.memory import plan_memory
from tui.sglang.modelcfg.spec import resolve_model

RECORDED = FIXTURES / "real_sglang" / "0.5.17"
TINY = FIXTURES / "model_configs" / "gpufleet--tiny-qwen35"
MODEL = resolve_model(str(TINY), load_format="dummy")
H100 = 85_520_809_984
SPEC = {"speculative_algorithm": "NEXTN", "speculative_num_draft_tokens": 4}
# explore.py's scenarios (all but graph with --disable-cuda-graph, all --context-length 4096).
SCENARIOS: dict[str, dict[str, Any]] = {
    "base": dict(mem_fraction_static=0.2, max_running_requests=16, max_mamba_cache_size=64),
    "cap": dict(mem_fraction_static=0.3, max_running_requests=64, max_mamba_cache_size=32),
    "auto": dict(mem_fraction_static=0.25),
    "ratio": dict(mem_fraction_static=0.25, mamba_full_memory_ratio=2.0, max_running_requests=8),
    "ratio_low": dict(mem_fraction_static=0.2, mamba_full_memory_ratio=0.3),
    "noradix": dict(mem_fraction_static=0.2, disable_radix_cache=True, max_running_requests=24),
    "extra": dict(
        mem_fraction_static=0.2,
        mamba_radix_cache_strategy="extra_buffer",
        max_mamba_cache_size=100,
        max_running_requests=48,
    ),
    "graph": dict(mem_fraction_static=0.2, max_mamba_cache_size=64, cuda_graph_max_bs=16),
    "spec": dict(
        mem_fraction_static=0.25,
        max_mamba_cache_size=80,
        mamba_full_memory_ratio=0.4,
        mamba_radix_cache_strategy="extra_buffer",
        max_running_requests=64,
        **SPEC,
    ),
    "spec_auto": dict(mem_fraction_static=0.25, **SPEC),
    "kill": dict(mem_fraction_static=0.2),
    "low_fraction": dict(mem_fraction_static=0.001),
    "oom_mamba": dict(mem_fraction_static=0.2, max_mamba_cache_size=2_000_000),
}
STARTED = sorted(set(SCENARIOS) - {"oom_mamba"})


def _budget(name: str) -> int:
    """What a launch's KV and Mamba pools took: tokens * 512 B + (slots + 1) * 205,824 B."""
    launch = read_launch(RECORDED / name / "server.log")
    assert launch.kv_tokens is not None and launch.mamba_slots is not None
    per_slot = MODEL.conv_state_bytes + MODEL.ssm_state_bytes
    return launch.kv_tokens * MODEL.kv_bytes_per_token + (launch.mamba_slots + 1) * per_slot


@pytest.fixture(scope="module")
def measured_pre() -> int:
    """``pre_model_load_memory``, solved from two launches: budget = avail - (1 - f) * pre at
    f = 0.2 (base) and 0.3 (cap); the log prints it only rounded, and after ~70 MiB more went."""
    return round((_budget("cap") - _budget("base")) / 0.1)


@pytest.mark.parametrize("name", STARTED)
def test_the_0517_arithmetic_reproduces_every_recorded_launch(name: str, measured_pre: int) -> None:
    """With the one measured ``pre``, every launch's slots and max_running_requests are exact and
    its KV tokens within 6 (3 KB: PyTorch gives the draft's weights whole 2 MiB blocks)."""
    flags = dict(SCENARIOS[name], disable_cuda_graph=name != "graph", context_length=4096)
    plan = plan_memory(MODEL, H100, pre_bytes=measured_pre, build="0.5.17", **flags)
    launch = read_launch(RECORDED / name / "server.log")
    assert plan.max_mamba_cache_size == launch.mamba_slots
    assert launch.kv_tokens is not None and abs(plan.max_total_num_tokens - launch.kv_tokens) <= 6
    if launch.max_running_requests is not None:  # the spec launches were stopped before it
        assert plan.max_running_requests == launch.max_running_requests


def _argv(name: str) -> list[str]:
    argv = [str(TINY), "--build", "0.5.17", "--log", str(RECORDED / name / "server.log")]
    argv += ["--load-format", "dummy", "--context-length", "4096"]
    argv += ["--attention-backend", "triton", "--sampling-backend", "pytorch"]
    if name != "graph":
        argv.append("--disable-cuda-graph")
    for key, value in SCENARIOS[name].items():
        flag = "--" + key.replace("_", "-")
        argv += [flag] if value is True else [flag, str(value)]
    return argv


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_gpufleet_plan_agrees_with_every_recorded_log(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The one command the integrator runs on the GPU machine, against every recording: each
    number within the log's two-decimal rounding, and the refused launch's exact error line."""
    rc = plan_cli.main(_argv(name))
    out = capsys.readouterr().out
    if name == "oom_mamba":
        assert rc == 1, out
        assert "compare   failure: predicted 'ValueError: Loaded weights leave no GPU memory" in out
        assert out.rstrip().endswith("same")
    else:
        assert rc == 0, out
        assert "DIFFERS" not in out and "compare   kv_tokens" in out

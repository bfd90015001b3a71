"""Preflight: the memory plan for a candidate profile, calibrated on a running server's log."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import repo_paths

from tui.profiles import Profile, load_profile
from tui.retune import preflight as preflight_module
from tui.retune.preflight import Preflight, build_for, calibration_from_log, preflight
from tui.sglang.memory import plan_memory
from tui.sglang.modelcfg.spec import resolve_model
from tui.sglang.models import MODELS

FIXTURES = repo_paths.FIXTURES / "retune"
SIM_AGGRESSIVE = """
name = "sim-aggr"
[engine]
kind = "sim"
sim_gpu = "b200"
sim_model = "qwen3.6-27b"
[fleet]
gpus = [0, 1, 2]
base_port = 31000
[server]
model_path = "Qwen/Qwen3.6-27B-FP8"
mem_fraction_static = 0.93
max_mamba_cache_size = 200
mamba_full_memory_ratio = 0.6
max_running_requests = 64
mamba_radix_cache_strategy = "extra_buffer"
speculative_algorithm = "EAGLE"
speculative_num_steps = 3
speculative_eagle_topk = 1
speculative_num_draft_tokens = 4
[gpu.2]
mem_fraction_static = 0.35
"""


@pytest.fixture()
def profile_file(tmp_path: Path) -> Path:
    path = tmp_path / "sim-aggr.toml"
    path.write_text(SIM_AGGRESSIVE)
    return path


def test_calibration_reads_the_last_launch_allocation_lines() -> None:
    cal = calibration_from_log(FIXTURES / "aggressive_gpu0.log")
    assert cal is not None
    # 24.36 GB each for K and V over 798,080 tokens: 65,536 K+V bytes per token (print rounding).
    model = MODELS["qwen3.6-27b"]
    assert cal.kv_bytes_per_token == pytest.approx(model.kv_bytes_per_token, rel=1e-3)
    assert cal.draft_kv_bytes_per_token == pytest.approx(model.draft_kv_bytes_per_token, rel=5e-3)
    assert cal.ssm_state_bytes == pytest.approx(150_994_944, rel=1e-3)
    assert cal.weight_bytes == pytest.approx(MODELS["qwen3.6-27b"].weight_bytes, rel=1e-3)


def test_calibration_of_a_log_without_allocations_is_none(tmp_path: Path) -> None:
    log = tmp_path / "empty.log"
    log.write_text("[2026-05-09 22:18:01] Load weight begin. avail mem=169.83 GB\n")
    assert calibration_from_log(log) is None
    assert calibration_from_log(tmp_path / "missing.log") is None


def test_preflight_of_the_seed_aggressive_profile(profile_file: Path) -> None:
    profile = load_profile(profile_file)
    cal = calibration_from_log(FIXTURES / "aggressive_gpu0.log")
    plain = preflight(profile, 0)
    calibrated = preflight(profile, 0, calibration=cal)
    for result in (plain, calibrated):
        assert result.fits and result.why_not is None
        assert result.mamba_slots == 200
        assert result.max_running_requested == 64
        assert result.max_running_effective == 40 and result.capped
        # The seed's log: 798,080 KV tokens.
        assert result.kv_tokens == pytest.approx(798080, rel=0.01)
    assert calibrated.calibrated and not plain.calibrated
    assert "64 -> 40 (capped)" in calibrated.describe()


def test_preflight_says_does_not_fit(profile_file: Path) -> None:
    result = preflight(load_profile(profile_file), 2)  # the per-GPU override: fraction 0.35
    assert not result.fits
    assert result.why_not is not None and result.why_not.startswith("does not fit: ")
    assert "mem-fraction-static" in result.why_not
    assert "does not fit" in result.describe()


def test_preflight_names_the_mamba_pool_when_it_took_what_the_weights_left(
    profile_file: Path,
) -> None:
    """SGLang says "Raise --mem-fraction-static above 0.318" also at 0.5, where the weights left
    31 GiB and the 200 Mamba slots, carved first, took it all: raising it just above 0.318 would
    not help, so the line says what did happen and which flags move it."""
    text = profile_file.read_text().replace(
        "mem_fraction_static = 0.35", "mem_fraction_static = 0.5"
    )
    profile_file.write_text(text)
    result = preflight(load_profile(profile_file), 2)
    assert not result.fits and result.why_not is not None
    assert "Raise --mem-fraction-static above 0.318" in result.why_not  # SGLang's own words
    # Ours first: SGLang's asks for "above 0.318" at 0.5, which would not help (issue 30).
    hint, sglang = result.why_not.split("SGLang's own message", 1)
    assert hint.startswith("does not fit: the Mamba pool's 200 slots")
    assert "misleading here (the fraction is already 0.5)" in sglang
    assert "Raise --mem-fraction-static above 0.318" in sglang
    assert "31.0 GB static budget" in hint and "200 slots and their intermediate" in hint
    assert "--max-mamba-cache-size 118 or fewer fits" in hint
    # The fraction that would hold the 200 slots, from the plan (0.97 and up leave no room for
    # the CUDA graphs), not "raise it further".
    assert "--mem-fraction-static 0.63 to 0.96 fits" in hint and "further" not in hint
    assert "mamba-full-memory-ratio" not in hint  # the profile sets the slots: it sizes nothing
    fitted = profile_file.read_text().replace(
        "[gpu.2]\nmem_fraction_static = 0.5",
        "[gpu.2]\nmem_fraction_static = 0.5\nmax_mamba_cache_size = 118",
    )
    profile_file.write_text(fitted)
    assert preflight(load_profile(profile_file), 2).fits  # what the hint said does fit
    profile_file.write_text(
        fitted.replace("max_mamba_cache_size = 118", "max_mamba_cache_size = 119")
    )
    assert not preflight(load_profile(profile_file), 2).fits  # and one more does not
    below = preflight(load_profile(profile_file), 0)  # 0.93: fits, no hint anywhere
    assert below.fits and below.why_not is None


def test_preflight_offers_a_fraction_only_when_one_below_1_fits(profile_file: Path) -> None:
    """The Mamba pool alone needs more than any --mem-fraction-static could give (its budget at
    0.99 is still short): 'or raise --mem-fraction-static further' sent the operator to a value
    that cannot exist; at 0.5 with 200 slots the hint names the fractions that fit, and they do."""

    def gpu2(extra: str) -> Preflight:
        text = SIM_AGGRESSIVE.replace("mem_fraction_static = 0.35", extra)
        profile_file.write_text(text)
        return preflight(load_profile(profile_file), 2)

    hopeless = gpu2("mem_fraction_static = 0.88\nmax_mamba_cache_size = 1500")
    assert not hopeless.fits and hopeless.why_not is not None
    hint = hopeless.why_not.split("SGLang's own message", 1)[0]
    assert "1500 slots" in hint and "--max-mamba-cache-size 405 or fewer fits" in hint
    assert "--mem-fraction-static" not in hint
    assert not gpu2("mem_fraction_static = 0.99\nmax_mamba_cache_size = 1500").fits
    for fraction, fits in (("0.62", False), ("0.63", True), ("0.96", True), ("0.97", False)):
        result = gpu2(f"mem_fraction_static = {fraction}")  # the 200 slots of [server]
        assert result.fits is fits, fraction


def test_preflight_unknown_model_names_it(profile_file: Path) -> None:
    profile = load_profile(profile_file)
    real = dataclasses.replace(profile, engine=dataclasses.replace(profile.engine, kind="sglang"))
    real = dataclasses.replace(
        real, server=dataclasses.replace(real.server, model_path="some/unknown-model")
    )
    with pytest.raises(ValueError, match="unknown-model"):
        preflight(real, 0, gpu_total_bytes=183 * 10**9)


CONFIGS = repo_paths.FIXTURES / "model_configs"
H200 = 150_754_820_096  # 140.4 GiB, as NVML reports an H200


def _real(profile: Profile, model_path: str, **server: Any) -> Profile:
    engine = dataclasses.replace(profile.engine, kind="sglang")
    fields = dict(model_path=model_path, **server)
    return dataclasses.replace(
        profile, engine=engine, server=dataclasses.replace(profile.server, **fields)
    )


def test_preflight_of_any_model_folder(profile_file: Path) -> None:
    """A real profile serving a Qwen3.5-style folder gets a plan from its config.json (it used to
    be "unknown model; known: [...]"), the same plan ``plan_memory`` makes for the derived spec."""
    profile = _real(
        load_profile(profile_file),
        str(CONFIGS / "Qwen--Qwen3.5-35B-A3B"),
        mem_fraction_static=0.9,
        max_mamba_cache_size=None,
        speculative_algorithm=None,
        speculative_num_steps=None,
        speculative_eagle_topk=None,
        speculative_num_draft_tokens=None,
    )
    result = preflight(profile, 0, gpu_total_bytes=H200)
    assert result.fits, result.why_not
    spec = resolve_model(str(CONFIGS / "Qwen--Qwen3.5-35B-A3B"))
    assert result.plan.model == spec.name and result.plan.is_hybrid_mamba
    expected = plan_memory(
        spec, H200, mem_fraction_static=0.9, max_running_requests=64,
        mamba_full_memory_ratio=0.6, mamba_radix_cache_strategy="extra_buffer",
    )  # fmt: skip
    assert (result.mamba_slots, result.kv_tokens) == (
        expected.max_mamba_cache_size,
        expected.max_total_num_tokens,
    )
    assert result.kv_tokens > 0 and result.mamba_slots > 0


def test_preflight_of_a_cached_hub_id(
    profile_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``Qwen/Qwen3-Next-80B-A3B-Instruct`` from a (fake) Hugging Face cache: its estimated 148
    GiB of bf16 weights do not fit an H200, and the preflight says so in SGLang's words."""
    snapshot = tmp_path / "hub" / "models--Qwen--Qwen3-Next-80B-A3B-Instruct" / "snapshots" / "c1"
    snapshot.mkdir(parents=True)
    (snapshot.parent.parent / "refs").mkdir()
    (snapshot.parent.parent / "refs" / "main").write_text("c1")
    source = CONFIGS / "Qwen--Qwen3-Next-80B-A3B-Instruct" / "config.json"
    (snapshot / "config.json").write_text(source.read_text())
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    profile = _real(load_profile(profile_file), "Qwen/Qwen3-Next-80B-A3B-Instruct")
    result = preflight(profile, 0, gpu_total_bytes=H200)
    assert not result.fits and result.why_not is not None
    assert result.why_not.startswith("does not fit: torch.OutOfMemoryError: CUDA out of memory")


def test_preflight_reads_a_real_gpus_capacity_and_the_profiles_build(
    profile_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    profile = _real(load_profile(profile_file), str(CONFIGS / "gpufleet--tiny-qwen35"))
    monkeypatch.setattr(preflight_module, "gpu_capacity", lambda gpu: None)
    with pytest.raises(ValueError, match=r"gpu 0: memory capacity unknown \(no NVIDIA driver"):
        preflight(profile, 0)
    monkeypatch.setattr(preflight_module, "gpu_capacity", lambda gpu: H200 if gpu == 0 else None)
    assert preflight(profile, 0).plan.gpu_total_bytes == H200
    assert build_for(profile, 0) == (
        "0.5.23",
        "SGLang 0.5.23 (engine.sglang_version unset: the newest)",
    )
    old = dataclasses.replace(profile.engine, sglang_version="0.5.17")
    assert build_for(dataclasses.replace(profile, engine=old), 0) == (
        "0.5.17",
        "SGLang 0.5.17 (engine.sglang_version)",
    )
    # A release the planner has no arithmetic of is planned in 0.5.23's, and says so.
    mid = dataclasses.replace(profile.engine, sglang_version="0.5.20")
    assert build_for(dataclasses.replace(profile, engine=mid), 0) == (
        "0.5.23",
        "SGLang 0.5.20 (engine.sglang_version), in SGLang 0.5.23's arithmetic (the planner "
        "models 0.5.17 and 0.5.23 only)",
    )

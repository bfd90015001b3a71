"""The tuning form's preflight against a real SGLang 0.5.17 server: calibrated on one launch's
log, it predicts the next launch's pools (``tests/fixtures/real_sglang/0.5.17``, an H100).

Seen on the GPU machine: calibrated on a launch whose Mamba pool printed ``ssm_state size:
0.01GB`` (33 slots), the preflight took 0.01 GB / 33 as one slot's size and predicted 43,302
slots where the server made 68,056; and its CUDA context (0.6 GiB, fitted on a B200) put 0.6 %
more KV tokens in the pool than the H100 gave (it measured 78.50 GB free of 79.65 GiB).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from repo_paths import FIXTURES

from tui.profiles.store import load_profile
from tui.retune.plan_log import read_launch
from tui.retune.preflight import calibration_from_log, preflight

REAL = FIXTURES / "real_sglang" / "0.5.17"
H100_BYTES = 81559 * 1024**2
"""What NVML reported for the recording machine's card (nvidia-smi: 81559 MiB)."""


def _profile(tmp_path: Path, knobs: str) -> Path:
    path = tmp_path / "real.toml"
    path.write_text(
        f"""name = "real"
[engine]
kind = "sglang"
sglang_version = "0.5.17"
python = "python3"
[fleet]
gpus = [0]
ports = [30000]
[server]
model_path = "{REAL / "model"}"
{knobs}
[server.extra_flags]
load_format = "dummy"
context_length = 4096
disable_cuda_graph = true
"""
    )
    return path


@pytest.mark.parametrize(
    ("calibrated_on", "scenario", "knobs"),
    [
        # calibrated on a 32-slot pool (0.01 GB printed), the auto pool at ratio 2.0
        ("cap", "ratio", "mem_fraction_static = 0.25\nmamba_full_memory_ratio = 2.0\n"
         "max_running_requests = 8"),
        # calibrated on a 64-slot pool, everything auto
        ("base", "auto", "mem_fraction_static = 0.25"),
        # calibrated on an auto pool (48,355 slots: a precise print), the cap at 32 slots
        ("auto", "cap", "mem_fraction_static = 0.3\nmax_mamba_cache_size = 32\n"
         "max_running_requests = 64"),
    ],
)  # fmt: skip
def test_a_calibrated_preflight_predicts_the_next_real_launch(
    tmp_path: Path, calibrated_on: str, scenario: str, knobs: str
) -> None:
    calibration = calibration_from_log(REAL / calibrated_on / "server.log")
    assert calibration is not None and calibration.pre_bytes is not None
    profile = load_profile(_profile(tmp_path, knobs))
    predicted = preflight(profile, 0, gpu_total_bytes=H100_BYTES, calibration=calibration)
    real = read_launch(REAL / scenario / "server.log")
    assert predicted.fits
    # A prediction from another launch's two-decimal prints: within 0.5 % (before: 36 % off
    # on the ratio launch, 0.6 % on every KV pool). ``gpufleet plan --log``, which reads the
    # launch's own lines, is held to their rounding (tests/core/test_plan_real_0517.py).
    assert predicted.mamba_slots == pytest.approx(real.mamba_slots, rel=0.005), (predicted, real)
    assert predicted.kv_tokens == pytest.approx(real.kv_tokens, rel=0.005), (predicted, real)
    assert predicted.max_running_effective == real.max_running_requests

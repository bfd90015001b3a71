"""``bench/real_sglang/auto_check.py`` end to end here: the harness the lead runs on the GPU
machine (``device_auto.sh launch``), with the simulator as SGLang 0.5.17 (``--simulate``: a
stand-in ``sglang`` package on the profiles' ``[env] PYTHONPATH``, whose ``launch_server`` runs
``gpufleet sim --sim-build 0.5.17``). Two real launches through ``gpufleet apply``; the preflight
under ``auto`` predicts 26 (capped), then 64 (not capped), and the server runs exactly that.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from repo_paths import ROOT

from bench.ports import free_port
from tui.control.preflight import port_holder

MODEL = ROOT / "tests" / "fixtures" / "real_sglang" / "0.5.17" / "model"


def test_auto_check_predicts_what_the_simulated_0517_runs(tmp_path: Path) -> None:
    port = free_port()
    out = tmp_path / "aout"
    env = {**os.environ, "HARNESS_PORT": str(port)}
    argv = [sys.executable, "-m", "bench.real_sglang.auto_check", str(out), str(MODEL)]
    try:
        done = subprocess.run(
            [*argv, "--simulate", "--launch"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=420,
            check=False,
        )
    finally:
        # Whatever happened, the servers the run recorded are stopped by gpufleet's own door
        # (verified identities), then nothing may hold the port.
        subprocess.run(
            [sys.executable, "-m", "tui", "sim-fleet", "stop", "--mode", "kill"],
            cwd=ROOT,
            env={**env, "GPUFLEET_STATE_DIR": str(out / "state")},
            capture_output=True,
            timeout=120,
            check=False,
        )
    assert port_holder(port) is None
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    rows = [line for line in (out / "results.md").read_text().splitlines() if "| auto-" in line]
    assert len(rows) == 2 and all(row.endswith("| yes |") for row in rows), rows
    assert "| 26 (True), model constants | 26 (True) |" in rows[0]
    assert "| 64 (False), calibrated | 64 (False) |" in rows[1]
    assert all("SGLang 0.5.17 (auto: " in row for row in rows)

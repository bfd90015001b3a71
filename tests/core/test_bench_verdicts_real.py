"""The real-server verdict harness's own pieces (``bench/real_sglang/``), without a GPU: the
slot launcher (two servers of gpufleet's on one card), a slot's processes, and the comparison
of the canary and the autotune with the grid measured directly. The whole harness runs here
with ``--sim`` (simulated 0.5.17 servers through the same launcher): see
``bench/results-real-sglang.md``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.real_sglang.slots import SLOT_ENV, slot_pids, write_launcher
from bench.real_sglang.verdicts_grid import CANARY_PAIR, compare, key

pytestmark = [pytest.mark.timeout(60)]


def test_the_launcher_keeps_the_slot_and_runs_on_the_one_device(tmp_path: Path) -> None:
    launcher = write_launcher(tmp_path / "slot-python", 0, sim=False, sim_speed=1.0)
    probe = (
        "import os; e = os.environ; "
        "print(e['CUDA_VISIBLE_DEVICES'], e['GPUFLEET_HARNESS_SLOT'], os.getpid())"
    )
    child = subprocess.Popen(
        [str(launcher), "-c", probe],
        env={**os.environ, "CUDA_VISIBLE_DEVICES": "1"},
        stdout=subprocess.PIPE,
        text=True,
    )
    out, _ = child.communicate(timeout=30)
    device, slot, pid = out.split()
    assert (device, slot) == ("0", "1")
    assert int(pid) == child.pid  # exec'd in place: the pid gpufleet launched and records


def test_a_slot_s_processes_are_those_that_carry_it(tmp_path: Path) -> None:
    sleeper = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(30)"], env={**os.environ, SLOT_ENV: "7"}
    )
    try:
        assert sleeper.pid in slot_pids()(7)
        assert sleeper.pid not in slot_pids()(6)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert sleeper.pid not in slot_pids()(7)


def test_the_canary_is_held_to_the_grid_and_the_pick_to_the_grid_s_best() -> None:
    candidate, control = CANARY_PAIR
    start: dict[str, object] = {}
    record = {
        "grid": [
            {"setting": candidate, "label": "64", "mean": 7500.0},
            {"setting": control, "label": "16", "mean": 3250.0},
            {"setting": start, "label": "auto", "mean": 5000.0},
            {"setting": {"max_running_requests": 16, "max_mamba_cache_size": 80}, "skipped": True},
        ],
        "canary": {"verdict": "better", "rel_low": 1.1, "rel_high": 1.6},
        "autotune": {"pick": {"max_running_requests": 64, "max_mamba_cache_size": 200}},
    }
    out = compare(record)
    assert out["grid_difference"] == pytest.approx(7500 / 3250 - 1, abs=1e-4)
    assert out["canary_covers_grid"] and out["canary_better"]
    assert out["pick_over_best"] == 1.0 and out["pick_reaches_97"]
    # the start's settings match however they are spelled (its knobs on the start's)
    assert key({}) == key({"max_mamba_cache_size": 80})
    record["canary"] = {"verdict": "better", "rel_low": 0.2, "rel_high": 0.9}
    assert not compare(record)["canary_covers_grid"]

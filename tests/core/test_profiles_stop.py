"""A profile's ``[stop] drain_timeout_s``: validated in one line naming field and range, kept
through a save, and the deadline a stop takes unless the operator gave ``--drain-timeout``."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from repo_paths import ROOT

from tui.control.stop_release import StopTimeouts
from tui.profiles import ProfileError, load_profile, profile_from_dict, save_profile
from tui.state.fleet_state import GpuState

BASE: dict[str, Any] = {
    "name": "t",
    "engine": {"kind": "sglang", "python": "python3"},
    "fleet": {"gpus": [0], "base_port": 31000, "log_dir": "/logs"},
    "server": {"model_path": "Qwen/Qwen3.6-27B-FP8", "mem_fraction_static": 0.9},
}


def _doc(stop: object) -> dict[str, Any]:
    doc = copy.deepcopy(BASE)
    doc["stop"] = stop
    return doc


@pytest.mark.parametrize(
    "value, expected",
    [
        (-1, "stop.drain_timeout_s = -1: must be seconds in (0, 1000000]"),
        (0, "stop.drain_timeout_s = 0: must be seconds in (0, 1000000]"),
        (2e6, "stop.drain_timeout_s = 2000000.0: must be seconds in (0, 1000000]"),
        (float("nan"), "stop.drain_timeout_s = nan: must be seconds in (0, 1000000]"),
        (float("inf"), "stop.drain_timeout_s = inf: must be seconds in (0, 1000000]"),
        ("60", "stop.drain_timeout_s = '60': must be a number, not str"),
        (True, "stop.drain_timeout_s = True: must be a number, not bool"),
    ],
)
def test_a_bad_drain_timeout_is_one_line_naming_field_and_range(
    value: object, expected: str
) -> None:
    with pytest.raises(ProfileError) as err:
        profile_from_dict(_doc({"drain_timeout_s": value}), "t", "p.toml")
    assert str(err.value) == f"p.toml: {expected}"


def test_an_unknown_stop_key_and_a_stop_that_is_no_table_are_named() -> None:
    with pytest.raises(ProfileError) as err:
        profile_from_dict(_doc({"drain_timeout": 30}), "t", "p.toml")
    assert "stop.drain_timeout = 30: unknown key; did you mean 'drain_timeout_s'?" in str(err.value)
    with pytest.raises(ProfileError) as err:
        profile_from_dict(_doc(30), "t", "p.toml")
    assert str(err.value) == "p.toml: stop = 30: must be a table"


def test_the_drain_timeout_survives_a_save_and_is_what_runs(tmp_path: Path) -> None:
    profile = profile_from_dict(_doc({"drain_timeout_s": 120}), "t")
    assert profile.stop.drain_timeout_s == 120.0
    again = load_profile(save_profile(profile, tmp_path / "t.toml"))
    assert again.stop.drain_timeout_s == 120.0
    # The fleet state keeps the running profile's document: its server is stopped with it.
    from tui.profiles.store import profile_to_dict

    entry = GpuState(0, current=profile_to_dict(again))
    assert entry.drain_timeout_s == 120.0
    assert (
        GpuState(0, current=profile_to_dict(profile_from_dict(BASE, "t"))).drain_timeout_s is None
    )


def test_the_operator_s_drain_timeout_wins_over_the_profile_s() -> None:
    assert StopTimeouts().for_profile(120.0).drain_s == 120.0
    assert StopTimeouts().for_profile(None).drain_s == 60.0
    pinned = StopTimeouts().pinned(5.0)
    assert pinned.for_profile(120.0).drain_s == 5.0


def test_gpufleet_validate_and_apply_refuse_it_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text(
        '[engine]\nkind = "sim"\n[fleet]\ngpus = [0]\nbase_port = 31000\n'
        '[server]\nmodel_path = "Qwen/Qwen3.6-27B-FP8"\n[stop]\ndrain_timeout_s = -5\n'
    )
    env = {"GPUFLEET_STATE_DIR": str(tmp_path / "state"), "PATH": "/usr/bin:/bin"}
    # validate: 1 (the file is invalid); apply: 2 (refused before anything was stopped)
    for argv, code in (
        (["profile", "validate", str(path)], 1),
        (["apply", str(path), "--no-measure"], 2),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "tui", *argv], capture_output=True, text=True, env=env, cwd=ROOT
        )
        assert done.returncode == code, done
        lines = done.stderr.strip().splitlines()
        assert (
            len(lines) == 1
            and "stop.drain_timeout_s = -5: must be seconds in (0, 1000000]" in (lines[0])
        ), done.stderr
        assert "Traceback" not in done.stderr and "GPU 0: stopping" not in done.stdout

"""The simulated fleet end to end: start 2 servers from sim-baseline, ready, stop, all released."""

from __future__ import annotations

import asyncio
import importlib.util
from dataclasses import replace
from pathlib import Path

import pytest
from control_helpers import running
from repo_paths import ROOT

from bench.ports import free_port
from tui.control import StopTimeouts, sim_gpu_pids
from tui.ops import simfleet as fleet
from tui.ops.cli.sim_fleet import main as fleet_main
from tui.ops.journal import read_journal
from tui.ops.service import FleetOps, OpsOptions
from tui.profiles import load_named
from tui.state.fleet_state import read_fleet, read_records

SHIPPED = ROOT / "profiles"
HAVE_SIM = importlib.util.find_spec("tui.sim.cli") is not None


def test_cli_refuses_gpus_outside_profile_and_non_sim_profiles(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUFLEET_PROFILES_DIR", str(SHIPPED))
    assert fleet_main(["start", "--gpus", "7,8", "--wait", "0"]) == 2
    assert "--gpus [7, 8]: not in profile 'sim-baseline'" in capsys.readouterr().err
    assert fleet_main(["start", "--profile", "b200-baseline"]) == 2
    assert "engine.kind = 'sglang': sim-fleet starts only 'sim' profiles" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        fleet_main(["start", "--gpus", "a,b"])
    assert fleet_main(["status"]) == 0
    assert "no recorded simulated servers" in capsys.readouterr().out


def test_default_profile_is_seven_sim_b200s(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for directory in (SHIPPED, tmp_path):  # shipped file, then the built-in fallback
        monkeypatch.setenv("GPUFLEET_PROFILES_DIR", str(directory))
        profile = fleet.sim_profile()
        assert profile.gpus == tuple(range(7))
        assert profile.ports == tuple(range(30000, 30007))
        assert (profile.engine.kind, profile.engine.sim_gpu) == ("sim", "b200")


@pytest.mark.skipif(not HAVE_SIM, reason="the simulated server (tui.sim.cli) has not landed")
def test_two_server_sim_fleet_starts_ready_and_stops_clean() -> None:
    base = load_named("sim-baseline", SHIPPED)
    profile = replace(
        base,
        gpus=(0, 1),
        ports=(free_port(), free_port()),
        engine=replace(base.engine, sim_speed=1000.0),
    )
    ops = FleetOps(options=OpsOptions(settle_s=0.5, stop=StopTimeouts(drain_s=20, release_s=20)))
    why = asyncio.run(ops.start(profile))
    records = list(read_records().values())
    try:
        assert why == {0: None, 1: None}
        ready = fleet.wait_ready(records, timeout=60)
        assert [r.ready for r in ready] == [True, True], [r.message for r in ready]
        source = sim_gpu_pids()
        assert all(source(g) for g in (0, 1)), "simulated servers publish their GPU memory"
        # Started again with another profile (the demo reopened after 'keep' while an autotune
        # had moved the fleet on): the running servers are re-attached and keep the profile
        # recorded for them; it was overwritten with the one asked for, so the console and
        # `gpufleet status` named a profile the servers did not run.
        again = asyncio.run(ops.start(replace(profile, name="sim-other")))
        assert again == {0: None, 1: None}
        assert {g: r.pid for g, r in read_records().items()} == {r.gpu: r.pid for r in records}
        state = read_fleet()
        assert [state[g].current_name for g in (0, 1)] == ["sim-baseline", "sim-baseline"]
        starts = [e for e in read_journal().entries if e.type == "start"]
        assert "0 launched with sim-other, 2 re-attached" in starts[-1].summary
    finally:
        stopped = asyncio.run(ops.stop_fleet())
    assert [o.ok for o in stopped] == [True, True], [o.message for o in stopped]
    # Both drained: a server whose exit waits on anything (a request in flight, a thread) is
    # escalated to SIGTERM/SIGKILL; the lines and the logs' tails say which one and why.
    logs = [Path(r.log_path).read_text(errors="replace")[-1500:] for r in records]
    outcomes = [o.result.outcome for o in stopped if o.result]
    assert outcomes == ["drained", "drained"], ([o.message for o in stopped], logs)
    seen = {pid for o in stopped if o.result for pid in o.result.pids}
    assert seen and not any(running(pid) for pid in seen)
    assert all(not sim_gpu_pids()(g) for g in (0, 1))
    assert read_records() == {}

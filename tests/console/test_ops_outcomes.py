"""done / refused / failed, never "ok" for what did nothing, and no server left untracked (issue
31, part A). Real simulated fleets (``bench.simfleet``), real strangers (a sleep; a process
listening on a fleet port), the real CLI entry points, bounded waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from control_helpers import running, wait_for
from operator_helpers import gpufleet_status
from rollout_helpers import sim_fleet

from bench.ports import free_ports
from bench.simfleet import ROOT
from tui import paths
from tui.control.stop_release import StopTimeouts
from tui.ops.cli.sim_fleet import main as sim_fleet_main
from tui.ops.journal import JournalEntry, read_journal
from tui.ops.service import FleetOps, OperationError, OpsOptions
from tui.state.fleet_state import put_record, read_records, remove_record

SPEED = 40.0
FAST = OpsOptions(settle_s=0.3, stop=StopTimeouts(drain_s=5, kill_s=5, release_s=10))


def _shift_create_times(seconds: float) -> None:
    """What a step of the host's clock does to the recorded wall-clock start times (seen: +24 s):
    every one of them moves, in the state file on disk."""
    path = paths.fleet_state_file()
    doc = json.loads(path.read_text())
    for entry in doc["gpus"].values():
        if entry.get("server"):
            entry["server"]["create_time"] += seconds
    path.write_text(json.dumps(doc))


@contextlib.contextmanager
def listener(port: int) -> Iterator[subprocess.Popen[str]]:
    """A stranger holding ``port``: a plain process listening there, not launched by gpufleet."""
    script = (
        "import socket, sys, threading\n"
        "s = socket.create_server(('127.0.0.1', int(sys.argv[1])))\n"
        "print('listening', flush=True)\n"
        "threading.Event().wait()\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "GPUFLEET_LAUNCH_ID"}
    proc = subprocess.Popen(
        [sys.executable, "-c", script, str(port)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "listening"
        yield proc
    finally:
        proc.kill()
        proc.wait(timeout=10)


def _last_entry_of(kind: str) -> JournalEntry:
    return next(e for e in reversed(read_journal().entries) if e.type == kind)


def test_after_a_clock_step_relaunch_and_stop_act_on_the_fleet_s_own_servers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The measured case: every recorded start time moved +24 s. A relaunch replaces the GPU's
    own server; ``sim-fleet stop`` stops both, says done, exits 0; nothing keeps serving."""
    with sim_fleet(tmp_path, 2, SPEED):
        before = read_records()
        _shift_create_times(24.0)
        asyncio.run(FleetOps(options=FAST).relaunch([0], mode="terminate"))
        after = read_records()
        assert after[0].pid != before[0].pid and not running(before[0].pid)
        assert after[1].pid == before[1].pid
        _shift_create_times(24.0)
        capsys.readouterr()
        code = sim_fleet_main(["stop", "--timeout", "5"])
        out = capsys.readouterr().out
        assert code == 0, out
        assert out.count("done") == 2 and "REFUSED" not in out and "FAILED" not in out
        assert not running(after[0].pid) and not running(after[1].pid)
        assert read_records() == {}
        entry = _last_entry_of("kill")
        assert entry.ok


def test_a_foreign_record_is_refused_not_ok_and_its_server_adopted_next(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The record names a sleep of ours (other ticks, no launch id): ``sim-fleet stop`` says
    REFUSED with what did not match, exits 1, journals not ok, and signals nothing. The record
    is dropped (what it names is not the server), so the next stop finds the fleet's own server
    holding the port, adopts it by its launch id, and stops it."""
    with sim_fleet(tmp_path, 1, SPEED):
        real = read_records()[0]
        stranger = subprocess.Popen(["sleep", "2004"], start_new_session=True)
        try:
            put_record(replace(real, pid=stranger.pid, pgid=stranger.pid))
            capsys.readouterr()
            code = sim_fleet_main(["stop", "--mode", "kill"])
            out = capsys.readouterr().out
            assert code == 1, out
            assert f"REFUSED refusing to signal pid {stranger.pid} (GPU 0, port " in out
            assert "its start time (ticks" in out and "nothing was signalled" in out
            assert "reused" not in out and "ok " not in out
            assert running(stranger.pid) and running(real.pid)
            entry = _last_entry_of("kill")
            assert not entry.ok and "refused on GPU 0" in entry.summary

            code = sim_fleet_main(["stop", "--timeout", "5"])
            out = capsys.readouterr().out
            assert code == 0, out
            assert f"GPU 0 (pid {real.pid})" in out and not running(real.pid)
            assert running(stranger.pid) and read_records() == {}
        finally:
            stranger.kill()
            stranger.wait(timeout=10)


def test_a_stranger_on_a_fleet_port_is_named_refused_and_shown_unknown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Nothing recorded on GPU 0, and a process gpufleet did not launch listens on its port:
    the stop names it (pid, command line) and refuses (exit 1), a relaunch refuses too, and
    ``status`` shows it ``unknown`` (exit 1); it is never signalled."""
    with sim_fleet(tmp_path, 2, SPEED) as fleet:
        asyncio.run(FleetOps(options=FAST).kill([0], mode="terminate"))
        with listener(fleet.ports[0]) as stranger:
            capsys.readouterr()
            code = sim_fleet_main(["stop", "--gpus", "0"])
            out = capsys.readouterr().out
            assert code == 1, out
            assert f"REFUSED GPU 0: port {fleet.ports[0]} is held by pid {stranger.pid} (" in out
            assert "socket.create_server" in out and "nothing was signalled" in out

            # Refused before anything stops, naming it (issue 35: the run checks first).
            named = f"refused: GPU 0: port {fleet.ports[0]} is held by pid {stranger.pid} "
            with pytest.raises(OperationError, match=named) as refused:
                asyncio.run(FleetOps(options=FAST).relaunch([0]))
            assert "which is not an SGLang server: nothing was stopped" in str(refused.value)
            assert "gpufleet adopt" not in str(refused.value)  # it would refuse this holder

            status = gpufleet_status("--json")
            doc = json.loads(status.stdout)
            assert status.returncode == 1, status.stdout
            assert doc["ready"] == 1 and doc["gpus"][0]["state"] == "unknown"
            assert doc["gpus"][0]["unknown"]["pid"] == stranger.pid
            text = gpufleet_status()
            assert "fleet: 1/2 ready (exit 1)" in text.stdout
            assert f"unknown: pid {stranger.pid}" in text.stdout
            assert stranger.poll() is None


def test_a_server_that_lost_its_record_is_unknown_then_adopted_by_its_relaunch(
    tmp_path: Path,
) -> None:
    """GPU 1's record is gone while its server serves on (what the old identity check left
    after a clock step): ``status`` counts it unknown, not ready, exit 1. Its relaunch (the
    rollout's step) finds the port held, knows the holder by its launch id, adopts and stops
    it, and launches: ready again, exit 0."""
    with sim_fleet(tmp_path, 2, SPEED):
        served = read_records()[1]
        remove_record(1)
        status = gpufleet_status("--json")
        doc = json.loads(status.stdout)
        assert status.returncode == 1, status.stdout
        assert (doc["ready"], doc["servers"]) == (1, 2)
        assert [g["state"] for g in doc["gpus"]] == ["ready", "unknown"]
        assert doc["gpus"][1]["unknown"]["pid"] == served.pid
        assert "sim" in doc["gpus"][1]["unknown"]["cmdline"]

        asyncio.run(FleetOps(options=FAST).relaunch([1], mode="terminate"))
        new = read_records()[1]
        assert new.pid != served.pid and not running(served.pid) and running(new.pid)
        assert gpufleet_status().returncode == 0


def test_the_demo_says_what_it_left_running(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A start that fails on one GPU (its port held by a stranger): the demo stops what it
    started and checks before it speaks; the stranger still runs, so it says so."""
    from tui.ui import demo_cli

    monkeypatch.setenv("GPUFLEET_PROFILES_DIR", str(ROOT / "profiles"))
    base = free_ports(2, consecutive=True)[0]
    with listener(base + 1) as stranger:
        code = demo_cli.main(
            ["--gpus", "2", "--base-port", str(base), "--speed", "1000", "--no-pipeline"]
        )
        out = capsys.readouterr().out
        assert code == 1
        assert "nothing was left running" not in out
        assert f"GPU 1: port {base + 1} is still held by pid {stranger.pid}" in out
    wait_for(lambda: not read_records(), 10, "the demo's own server to be stopped")


def test_apply_and_rollout_print_a_refused_gpu_as_refused() -> None:
    """A GPU whose old server was not verified is REFUSED in the verify lines and the event
    lines of `apply`, `rollout` and `canary`, never FAILED-as-if-it-tried nor ok."""
    from tui.ops.cli.common import format_report, print_event
    from tui.retune.events import EffectiveValues, GpuFailed, RequestedValues, VerifyReport

    why = (
        "refused to stop the old server: refusing to signal pid 9 (GPU 0, port 1): its launch "
        "id differs"
    )
    report = VerifyReport(
        0, False, "p", RequestedValues(), EffectiveValues(), failure=why, error_reason="refused"
    )
    assert report.status == "refused"
    assert format_report({"gpu": 0, "ok": False, "failure": why, "error_reason": "refused"}) == (
        f"GPU 0: REFUSED {why}"
    )
    assert format_report({"gpu": 1, "ok": False, "failure": "OOM", "error_reason": "oom"}) == (
        "GPU 1: FAILED OOM"
    )
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        print_event(GpuFailed(0, report))
    assert out.getvalue() == f"GPU 0: REFUSED {why}\n"

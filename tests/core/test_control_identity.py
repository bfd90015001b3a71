"""Identity that no clock step moves, and signals only to what is verified (issue 31, part A).

Real processes, real signals: the stand-in server of ``control_helpers`` (a main pid with a child
in its group), strangers made of ``sleep`` in groups of their own (``setsid``), bounded waits.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import psutil
import pytest
from control_helpers import parent_argv, read_pids, reaper, running, wait_for
from repo_paths import ROOT

from bench.ports import free_port
from tui import paths
from tui.control import IdentityMismatch, ManagedProcess, launch, stop, verify
from tui.control.stop import StopMode
from tui.control.stop_release import stop_and_release
from tui.state.files import StateFileError
from tui.state.fleet_state import ProcessRecord, put_record, read_fleet, read_records


def _launch(tmp_path: Path, mode: str = "term", gpu: int = 0) -> tuple[ManagedProcess, Path]:
    pid_file = tmp_path / f"pids-{gpu}-{mode}"
    proc = launch(
        parent_argv(mode, pid_file),
        dict(os.environ),
        tmp_path / "srv.log",
        gpu=gpu,
        port=free_port(),
    )
    return proc, pid_file


def _group(pgid: int) -> set[int]:
    members = set()
    for proc in psutil.process_iter():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if os.getpgid(proc.pid) == pgid and running(proc.pid):
                members.add(proc.pid)
    return members


@contextlib.contextmanager
def foreign_group() -> Iterator[int]:
    """A stranger's process group of three (bash and two sleeps), as ``setsid bash -c '...'``."""
    leader = subprocess.Popen(
        ["bash", "-c", "sleep 2001 & sleep 2002 & wait"], start_new_session=True
    )
    try:
        wait_for(lambda: len(_group(leader.pid)) == 3, 10, "the foreign group's three processes")
        yield leader.pid
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(leader.pid, signal.SIGKILL)
        leader.wait(timeout=10)


def _write_state(record: ProcessRecord) -> None:
    """Put ``record`` in the fleet state file as written on disk (what an operator could edit)."""
    put_record(record)
    path = paths.fleet_state_file()
    doc = json.loads(path.read_text())
    doc["gpus"][str(record.gpu)]["server"] = record.to_json()
    path.write_text(json.dumps(doc))


# --- reading the kernel ----------------------------------------------------------------------


def test_start_ticks_are_read_past_a_command_name_with_spaces_and_parentheses() -> None:
    from tui.servers.procinfo import (
        boot_id,
        parse_boottime_offset_ns,
        parse_start_ticks,
        start_ticks,
    )

    fields = " ".join(["S"] + [str(n) for n in range(4, 22)] + ["987654"] + ["0"] * 30)
    assert parse_start_ticks(f"123 (a) b (c) {fields}") == 987654
    assert parse_start_ticks(f"123 ()) {fields}") == 987654
    with pytest.raises(ValueError):
        parse_start_ticks("123 no name here")
    # A real process that renamed itself "x) (y z" (prctl PR_SET_NAME): its ticks are psutil's.
    script = (
        "import ctypes, sys, threading\n"
        "ctypes.CDLL(None).prctl(15, b'x) (y z', 0, 0, 0)\n"
        "print('named', flush=True)\n"
        "threading.Event().wait()\n"
    )
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "named"
        assert psutil.Process(child.pid).name() == "x) (y z"
        # psutil's own parse of the stat line (private, untyped): the reference to compare with
        expected = psutil.Process(child.pid)._proc.create_time(monotonic=True)  # type: ignore[attr-defined]
        ticks = start_ticks(child.pid)
        assert ticks is not None
        assert ticks / os.sysconf("SC_CLK_TCK") == pytest.approx(expected)
    finally:
        child.kill()
        child.wait(timeout=10)
    assert boot_id() and len(boot_id()) == 36
    offsets = "monotonic           0         0\nboottime         1000         5\n"
    assert parse_boottime_offset_ns(offsets) == 1000 * 10**9 + 5
    assert parse_boottime_offset_ns("boottime x y\n") == parse_boottime_offset_ns("") == 0


def test_a_launch_id_is_read_even_at_the_very_end_of_an_exec() -> None:
    """Right after ``Popen`` returns, a process reads as having no environment for a moment
    (seen: one read in three): that is not "no launch id", nor "exiting"."""
    from tui.servers.procinfo import LAUNCH_ID_ENV, read_launch_id

    env = {**os.environ, LAUNCH_ID_ENV: "feedface"}
    for _ in range(10):
        child = subprocess.Popen(["sleep", "30"], env=env, start_new_session=True)
        try:
            read = read_launch_id(child.pid)
            assert (read.problem, read.launch_id) == (None, "feedface")
        finally:
            child.kill()
            child.wait(timeout=10)


# --- the clock --------------------------------------------------------------------------------


def test_a_clock_step_leaves_the_fleet_s_servers_its_own(tmp_path: Path) -> None:
    """The host's clock stepped 24 s: every wall-clock start time moved. The stop still verifies
    the server (start ticks, boot, launch id) and drains it, through the state file on disk."""
    with reaper() as groups:
        proc, pid_file = _launch(tmp_path)
        groups.append(proc.record.pgid)
        parent, child = read_pids(pid_file)
        _write_state(replace(proc.record, create_time=proc.record.create_time + 24))
        record = read_records()[0]
        assert verify(record).alive
        outcome = stop_and_release(0, record, lambda gpu: set())
        assert outcome.ok, outcome.message
        assert outcome.result is not None and outcome.result.outcome == "drained"
        assert not running(parent) and not running(child)
        assert 0 not in read_records()


def _time_namespace() -> list[str]:
    """The prefix that runs a command in a new time namespace whose boot is 1000 s earlier (as
    ``unshare --time --boottime 1000``), or skip where this machine permits none."""
    for prefix in (["unshare", "--time"], ["unshare", "--user", "--map-root-user", "--time"]):
        argv = [*prefix, "--boottime", "1000", "true"]
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            if subprocess.run(argv, capture_output=True, timeout=10).returncode == 0:
                return [*prefix, "--boottime", "1000"]
    pytest.skip("no time namespace can be made here (unshare --time)")


def test_a_time_namespace_leaves_the_fleet_s_servers_its_own(tmp_path: Path) -> None:
    """Read from a time namespace whose boot is 1000 s earlier, a live server's start ticks
    are 100,000 ticks later in /proc: they are still the host's, and the record verifies (it
    used to read "no longer runs")."""
    prefix = _time_namespace()
    with reaper() as groups:
        proc, _ = _launch(tmp_path)
        groups.append(proc.record.pgid)
        _write_state(proc.record)
        script = (
            "import json\n"
            "from tui.servers.procinfo import start_ticks\n"
            "from tui.control import verify\n"
            "from tui.state.fleet_state import read_records\n"
            "record = read_records()[0]\n"
            "raw = open(f'/proc/{record.pid}/stat').read().rsplit(')', 1)[1].split()[19]\n"
            "try:\n"
            "    alive = verify(record).alive\n"
            "except Exception as mismatch:\n"
            "    alive = str(mismatch)\n"
            "print(json.dumps([int(raw), start_ticks(record.pid), alive]))\n"
        )
        done = subprocess.run(
            [*prefix, sys.executable, "-c", script],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ROOT,
        )
        assert done.returncode == 0, done.stderr
        raw, ticks, alive = json.loads(done.stdout)
        hz = os.sysconf("SC_CLK_TCK")
        assert raw == proc.record.start_ticks + 1000 * hz  # the namespace moved what /proc says
        assert ticks == proc.record.start_ticks and alive is True, alive
        outcome = stop_and_release(0, read_records()[0], lambda gpu: set())
        assert outcome.ok, outcome.message


def test_other_start_ticks_are_refused_and_nothing_is_signalled(tmp_path: Path) -> None:
    with reaper() as groups:
        proc, pid_file = _launch(tmp_path)
        groups.append(proc.record.pgid)
        parent, child = read_pids(pid_file)
        other = replace(proc.record, start_ticks=proc.record.start_ticks - 1000)
        put_record(other)
        outcome = stop_and_release(0, other, lambda gpu: set(), mode="kill")
        assert outcome.status == "refused" and not outcome.ok
        assert f"its start time (ticks {proc.record.start_ticks}) differs from the record's " in (
            outcome.message
        )
        assert f"(ticks {other.start_ticks})" in outcome.message
        assert "reused" not in outcome.message and "nothing was signalled" in outcome.message
        assert running(parent) and running(child)


def test_a_truly_foreign_process_recorded_is_never_signalled(tmp_path: Path) -> None:
    """The record names a sleep we started ourselves (another start, another launch): refused,
    in every mode, and the sleep lives on."""
    from tui.servers.procinfo import start_ticks

    with reaper() as groups:
        proc, pid_file = _launch(tmp_path)
        groups.append(proc.record.pgid)
        read_pids(pid_file)  # the server's python is up: the sleep starts ticks later
        stranger = subprocess.Popen(["sleep", "2003"], start_new_session=True)
        groups.append(stranger.pid)
        try:
            assert start_ticks(stranger.pid) != proc.record.start_ticks
            forged = replace(proc.record, pid=stranger.pid, pgid=stranger.pid)
            for mode in ("drain", "terminate", "kill"):
                with pytest.raises(IdentityMismatch, match="its start time \\(ticks") as err:
                    stop(forged, term_timeout=1, kill_timeout=1, mode=mode)
                assert err.value.gone
                assert running(stranger.pid)
            legacy = replace(forged, start_ticks=0, boot_id="")
            with pytest.raises(IdentityMismatch, match="it carries no launch id"):
                stop(legacy, term_timeout=1, kill_timeout=1, mode="kill")
            assert running(stranger.pid) and running(proc.record.pid)
        finally:
            stranger.kill()
            stranger.wait(timeout=10)


def test_a_record_of_an_older_gpufleet_is_verified_by_launch_id_and_upgraded(
    tmp_path: Path,
) -> None:
    from tui.servers.procinfo import boot_id

    with reaper() as groups:
        proc, pid_file = _launch(tmp_path)
        groups.append(proc.record.pgid)
        read_pids(pid_file)
        legacy = replace(
            proc.record, start_ticks=0, boot_id="", create_time=proc.record.create_time - 3600
        )
        _write_state(legacy)
        identity = verify(read_records()[0])
        assert identity.alive and identity.upgraded is not None
        assert identity.upgraded.start_ticks == proc.record.start_ticks
        assert identity.upgraded.boot_id == boot_id()
        result = stop(read_records()[0], term_timeout=10, kill_timeout=5, forget=False)
        assert result.outcome == "drained"
        assert read_records()[0].start_ticks == proc.record.start_ticks  # written back


def test_an_environment_that_may_not_be_read_is_never_taken_for_ours(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another user's process: /proc/PID/environ is refused. Cannot verify: nothing signalled,
    and the record is kept (the server may still be ours)."""
    with reaper() as groups:
        proc, pid_file = _launch(tmp_path)
        groups.append(proc.record.pgid)
        parent, _ = read_pids(pid_file)

        def denied(self: psutil.Process) -> dict[str, str]:
            raise psutil.AccessDenied(self.pid)

        monkeypatch.setattr(psutil.Process, "environ", denied)
        outcome = stop_and_release(0, proc.record, lambda gpu: set(), mode="kill")
        assert outcome.status == "refused"
        assert "its environment may not be read" in outcome.message
        assert running(parent) and 0 in read_records()


# --- which group is signalled ------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["kill", "terminate"])
def test_a_live_server_with_a_foreign_pgid_gets_only_its_own_processes_signalled(
    tmp_path: Path, mode: StopMode
) -> None:
    """The measured case: the record's pgid names a stranger's group of three. The stop acts on
    the verified server (its pid and children, one by one) and says why; the group keeps all
    three of its processes."""
    with foreign_group() as stranger, reaper() as groups:
        proc, pid_file = _launch(tmp_path, "ignore" if mode == "kill" else "term")
        groups.append(proc.record.pgid)
        parent, child = read_pids(pid_file)
        _write_state(replace(proc.record, pgid=stranger))
        outcome = stop_and_release(
            0,
            read_records()[0],
            lambda gpu: set(),
            mode=mode,
        )
        assert outcome.status == "done", outcome.message
        assert not running(parent) and not running(child)
        assert len(_group(stranger)) == 3
        assert f"the record's process group {stranger} is not the server's own" in outcome.message


def test_the_drain_escalates_without_the_foreign_group(tmp_path: Path) -> None:
    with foreign_group() as stranger, reaper() as groups:
        proc, pid_file = _launch(tmp_path, "ignore")
        groups.append(proc.record.pgid)
        parent, child = read_pids(pid_file)
        result = stop(replace(proc.record, pgid=stranger), term_timeout=0.3, kill_timeout=5)
        assert result.outcome == "killed"
        assert not running(parent) and not running(child)
        assert len(_group(stranger)) == 3


def test_pgid_one_is_never_signalled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A record with pgid 1 (built in code: the parser refuses it) as root would be kill(-1),
    every process. The signal calls are recorded (and the group ones not made): no group but
    the server's own is ever signalled, and never 1."""
    groups_signalled: list[int] = []
    real_killpg = os.killpg

    def killpg(pgid: int, sig: int) -> None:
        groups_signalled.append(pgid)
        if pgid == 1:
            return  # never really: the assertion below fails the test
        real_killpg(pgid, sig)

    monkeypatch.setattr(os, "killpg", killpg)
    with reaper() as groups:
        proc, pid_file = _launch(tmp_path, "ignore")
        groups.append(proc.record.pgid)
        parent, child = read_pids(pid_file)
        for mode in ("kill", "terminate"):
            record = replace(proc.record, pgid=1)
            if running(parent):
                stop(record, term_timeout=0.3, kill_timeout=5, mode=mode)
        assert 1 not in groups_signalled and groups_signalled == []
        assert not running(parent) and not running(child)


def test_the_state_file_refuses_a_pgid_of_one(monkeypatch: pytest.MonkeyPatch) -> None:
    record = ProcessRecord(3, 30003, 4242, 4242, 1.0, ("x",), "/tmp/x.log", launch_id="a")
    put_record(record)
    path = paths.fleet_state_file()
    for field, value in (("pgid", 1), ("pgid", 0), ("pid", 1)):
        doc = json.loads(path.read_text())
        doc["gpus"]["3"]["server"] = {**record.to_json(), field: value}
        path.write_text(json.dumps(doc))
        with pytest.raises(StateFileError) as err:
            read_fleet()
        text = str(err.value)
        assert str(path) in text and f"gpus.3.server.{field} = {value}: must be > 1" in text
        assert "\n" not in text

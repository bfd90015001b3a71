"""A server gpufleet adopted (issue 35): no launch id; its identity is its main pid's start ticks,
boot and command line digest, and its process group, which a script's ``setsid`` may share with
every other server of the fleet, is never signalled whole.

Real processes, real signals: two stand-in servers (``control_helpers``: a main pid with a
child) started by one launcher in one session, as the seed's script starts its seven servers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import psutil
import pytest
from control_helpers import parent_argv, read_pids, reaper, running

from bench.ports import free_port
from tui.control import IdentityMismatch, stop, verify
from tui.control.stop import StopMode
from tui.control.stop_release import stop_and_release
from tui.servers.procinfo import boot_id, cmdline_digest, start_ticks
from tui.state.fleet_state import ProcessRecord, put_record, read_records

LAUNCHER = (
    "import json, subprocess, sys\n"
    "procs = [subprocess.Popen(argv) for argv in json.loads(sys.argv[1])]\n"
    "for proc in procs:\n"
    "    proc.wait()\n"
)
"""One session for both servers (the operator's ``setsid`` script): they share its group."""


def adopted(pid: int, gpu: int = 0, port: int | None = None) -> ProcessRecord:
    """The record ``gpufleet adopt`` writes for ``pid`` (``tui.control.takeover``), on a port
    nothing holds (a stop checks its port is free at the end; 30000 may be a neighbour's)."""
    proc = psutil.Process(pid)
    cmdline = tuple(proc.cmdline())
    ticks = start_ticks(pid)
    assert ticks
    return ProcessRecord(
        gpu=gpu,
        port=free_port() if port is None else port,
        pid=pid,
        pgid=os.getpgid(pid),
        create_time=proc.create_time(),
        cmdline=cmdline,
        log_path="",
        profile="mine",
        start_ticks=ticks,
        boot_id=boot_id(),
        cmdline_digest=cmdline_digest(cmdline),
    )


@pytest.fixture()
def two_servers(tmp_path: Path) -> Iterator[tuple[tuple[int, int], tuple[int, int], int]]:
    """((main, child) of server A, (main, child) of server B, their shared group)."""
    files = [tmp_path / "a.pids", tmp_path / "b.pids"]
    argvs = [parent_argv("term", f) for f in files]
    env = {k: v for k, v in os.environ.items() if k != "GPUFLEET_LAUNCH_ID"}
    with reaper() as groups:
        launcher = subprocess.Popen(
            [sys.executable, "-c", LAUNCHER, json.dumps(argvs)], start_new_session=True, env=env
        )
        groups.append(launcher.pid)
        a, b = read_pids(files[0]), read_pids(files[1])
        assert os.getpgid(a[0]) == os.getpgid(b[0]) == launcher.pid
        yield a, b, launcher.pid
        launcher.kill()
        launcher.wait(timeout=10)


def test_an_adopted_server_is_verified_without_a_launch_id(
    two_servers: tuple[tuple[int, int], tuple[int, int], int],
) -> None:
    (a_main, _), _, _ = two_servers
    identity = verify(adopted(a_main))
    assert identity.alive and identity.process is not None and identity.process.pid == a_main


@pytest.mark.parametrize("mode", ["terminate", "kill"])
def test_its_stop_signals_its_own_processes_never_the_shared_group(
    two_servers: tuple[tuple[int, int], tuple[int, int], int], mode: StopMode
) -> None:
    """Server A is stopped the fast way (the group's signal for a launched server): A and its
    child go; B, its child and the launcher, all in the same group, live on."""
    (a_main, a_child), (b_main, b_child), launcher = two_servers
    result = stop(adopted(a_main), term_timeout=5, kill_timeout=5, mode=mode)
    assert result.outcome in ("terminated", "killed") and not result.survivors
    assert not running(a_main) and not running(a_child)
    assert running(b_main) and running(b_child) and running(launcher)
    assert "its process group may hold other processes" in result.note
    if mode == "terminate":
        assert "stopped by SIGTERM to each of its verified processes" in result.describe()
        assert "to its process group" not in result.describe()


def test_a_drain_goes_through_its_main_pid_and_ends_done(
    two_servers: tuple[tuple[int, int], tuple[int, int], int],
) -> None:
    (a_main, a_child), (b_main, b_child), _ = two_servers
    record = adopted(a_main)
    put_record(record)
    outcome = stop_and_release(0, record, lambda gpu: set(), port=record.port)
    assert outcome.status == "done", outcome.message
    assert "drained and exited after SIGTERM to its main pid" in outcome.message
    assert not running(a_main) and not running(a_child)
    assert running(b_main) and running(b_child)
    assert 0 not in read_records()  # forgotten once nothing of it runs


def test_another_command_line_at_its_pid_is_refused_and_nothing_is_signalled(
    two_servers: tuple[tuple[int, int], tuple[int, int], int],
) -> None:
    (a_main, a_child), _, _ = two_servers
    forged = replace(adopted(a_main), cmdline_digest=cmdline_digest(["python", "-m", "other"]))
    for mode in ("drain", "terminate", "kill"):
        with pytest.raises(IdentityMismatch, match="its command line differs from the one adopted"):
            stop(forged, term_timeout=1, kill_timeout=1, mode=mode)
    assert running(a_main) and running(a_child)


def test_an_adopted_record_without_start_ticks_is_never_taken_for_the_fleet_s(
    two_servers: tuple[tuple[int, int], tuple[int, int], int],
) -> None:
    (a_main, a_child), _, _ = two_servers
    with pytest.raises(IdentityMismatch, match="no start time to verify it by"):
        stop(replace(adopted(a_main), start_ticks=0), term_timeout=1, kill_timeout=1, mode="kill")
    assert running(a_main) and running(a_child)


def test_the_record_keeps_its_digest_through_the_state_file(
    two_servers: tuple[tuple[int, int], tuple[int, int], int],
) -> None:
    (a_main, _), _, _ = two_servers
    record = adopted(a_main)
    put_record(record)
    again = read_records()[0]
    assert again == record and again.adopted and not again.launch_id

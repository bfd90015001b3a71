"""Process control with real processes: launch, group stop (SIGTERM and SIGKILL), identity."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import psutil
import pytest
from control_helpers import parent_argv, read_pids, reaper, running, wait_for

from tui.control import (
    IdentityMismatch,
    LaunchError,
    ManagedProcess,
    check_started,
    launch,
    stop,
)
from tui.control.stop import StopMode, stop_unverified
from tui.state.fleet_state import read_records


def _launch(tmp_path: Path, mode: str, gpu: int = 0) -> tuple[ManagedProcess, Path]:
    pid_file = tmp_path / f"pids-{gpu}-{mode}"
    proc = launch(
        parent_argv(mode, pid_file), dict(os.environ), tmp_path / "srv.log", gpu=gpu, port=30000
    )
    return proc, pid_file


def test_launch_records_identity_in_its_own_session(tmp_path: Path) -> None:
    with reaper() as groups:
        proc, pid_file = _launch(tmp_path, "term")
        groups.append(proc.record.pgid)
        parent, child = read_pids(pid_file)
        assert parent == proc.record.pid
        assert os.getpgid(parent) == parent == proc.record.pgid
        assert os.getsid(parent) == parent  # its own session, not ours
        assert os.getpgid(child) == parent
        recorded = read_records()[0]
        assert recorded == proc.record
        assert recorded.create_time == pytest.approx(psutil.Process(parent).create_time())
        assert recorded.cmdline == tuple(psutil.Process(parent).cmdline())
        wait_for(lambda: "server starting" in Path(recorded.log_path).read_text(), 10, "log")


def test_stop_drains_through_the_main_pid_only(tmp_path: Path) -> None:
    with reaper() as groups:
        proc, pid_file = _launch(tmp_path, "term")
        groups.append(proc.record.pgid)
        parent, child = read_pids(pid_file)
        result = stop(proc.record, term_timeout=10, kill_timeout=5)
        # The main pid stopped its own child: the group was never signalled (SGLang 0.5.23's
        # children die on a group SIGTERM and take the in-flight requests with them).
        assert result.outcome == "drained"
        assert {parent, child} <= set(result.pids)
        assert not running(parent) and not running(child)
        assert 0 not in read_records()


def test_terminate_mode_signals_the_whole_group(tmp_path: Path) -> None:
    with reaper() as groups:
        proc, pid_file = _launch(tmp_path, "term")
        groups.append(proc.record.pgid)
        parent, child = read_pids(pid_file)
        result = stop(proc.record, term_timeout=10, kill_timeout=5, mode="terminate")
        assert result.outcome == "terminated"
        assert {parent, child} <= set(result.pids)
        assert not running(parent) and not running(child)
        assert proc.popen.poll() is not None
        assert 0 not in read_records()


def test_stop_escalates_to_sigkill_after_deadline(tmp_path: Path) -> None:
    with reaper() as groups:
        proc, pid_file = _launch(tmp_path, "ignore")
        groups.append(proc.record.pgid)
        parent, child = read_pids(pid_file)
        started = time.monotonic()
        result = stop(proc.record, term_timeout=0.5, kill_timeout=5)
        assert result.outcome == "killed"
        assert time.monotonic() - started >= 0.5
        assert result.survivors == ()
        assert not running(parent) and not running(child)


def test_stop_kills_orphaned_children_when_leader_is_gone(tmp_path: Path) -> None:
    with reaper() as groups:
        proc, pid_file = _launch(tmp_path, "term")
        groups.append(proc.record.pgid)
        parent, child = read_pids(pid_file)
        psutil.Process(parent).kill()  # like a crash: the scheduler survives its parent
        proc.popen.wait(timeout=10)
        assert running(child)
        result = stop(proc.record, term_timeout=5, kill_timeout=5)
        assert child in result.pids
        assert not running(child)


def test_dead_pid_with_a_foreign_group_signals_nothing(tmp_path: Path) -> None:
    # A record whose server is gone, and whose pgid is now an unrelated group (a stranger that
    # became a group leader): nothing of that group is ours, so nothing may be signalled.
    stranger = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True
    )
    try:
        with reaper() as groups:
            proc, pid_file = _launch(tmp_path, "term")
            groups.append(proc.record.pgid)
            read_pids(pid_file)
            forged = replace(proc.record, pid=99999999, pgid=stranger.pid)
            result = stop(forged, term_timeout=1, kill_timeout=1)
            assert result.outcome == "already_exited"
            assert running(stranger.pid)
            assert running(proc.record.pid)
    finally:
        stranger.kill()
        stranger.wait(timeout=10)


def test_stop_refuses_process_not_started_by_fleet(tmp_path: Path) -> None:
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with reaper() as groups:
            proc, _pid_file = _launch(tmp_path, "term")
            groups.append(proc.record.pgid)
            forged = replace(proc.record, pid=stranger.pid, pgid=stranger.pid)
            with pytest.raises(IdentityMismatch, match=rf"refusing to signal pid {stranger.pid}"):
                stop(forged, term_timeout=1)
            assert running(stranger.pid)
    finally:
        stranger.kill()
        stranger.wait(timeout=10)


def test_stop_of_exited_server_reports_already_exited(tmp_path: Path) -> None:
    with reaper() as groups:
        proc, pid_file = _launch(tmp_path, "term")
        groups.append(proc.record.pgid)
        read_pids(pid_file)
        os.killpg(proc.record.pgid, 9)
        proc.popen.wait(timeout=10)
        wait_for(
            lambda: (
                not psutil.pid_exists(read_pids(pid_file)[1]) or not running(read_pids(pid_file)[1])
            ),
            10,
            "grandchild gone",
        )
        assert stop(proc.record).outcome == "already_exited"


def test_launch_that_dies_at_once_reports_exit_code_and_log(tmp_path: Path) -> None:
    script = (
        "import sys; print('RuntimeError: Not enough memory. Current value: 0.99'); sys.exit(3)"
    )
    proc = launch(
        [sys.executable, "-c", script], dict(os.environ), tmp_path / "x.log", gpu=4, port=1
    )
    with pytest.raises(LaunchError) as err:
        check_started(proc, settle_s=10)
    text = str(err.value)
    assert "GPU 4" in text and "code 3" in text and "Not enough memory" in text
    assert 4 not in read_records()


def test_launch_of_missing_program_is_clear(tmp_path: Path) -> None:
    with pytest.raises(LaunchError, match="cannot execute"):
        launch(["/nonexistent/python"], {}, tmp_path / "y.log", gpu=0, port=1)


def test_relaunch_keeps_previous_log(tmp_path: Path) -> None:
    log = tmp_path / "gpu0.log"
    for n in range(3):
        p = launch(
            [sys.executable, "-c", f"print('run {n}')"], dict(os.environ), log, gpu=0, port=1
        )
        p.popen.wait(timeout=10)
    assert log.read_text() == "run 2\n"
    assert (tmp_path / "gpu0.log.1").read_text() == "run 1\n"
    assert (tmp_path / "gpu0.log.2").read_text() == "run 0\n"


# A server whose main thread exits on SIGTERM while another thread, which shares the process's
# files (the listening socket), takes a moment more: the main pid reads as a zombie before the
# socket is closed. Seen under load: a relaunch on the same port failed its bind.
LINGERING = r"""
import ctypes, platform, signal, socket, threading, time
listener = socket.create_server(("127.0.0.1", 0))
stopping = threading.Event()
def linger():
    stopping.wait()
    time.sleep(1.0)  # the thread's own teardown, modelled: what the stop must wait out
def main_thread_exits(signum, frame):
    stopping.set()
    # exit(2), not exit_group(2): only the calling (main) thread ends.
    ctypes.CDLL(None).syscall(60 if platform.machine() == "x86_64" else 93, 0)
threading.Thread(target=linger).start()
signal.signal(signal.SIGTERM, main_thread_exits)
print(listener.getsockname()[1], flush=True)
threading.Event().wait()
"""


@pytest.mark.skipif(
    sys.platform != "linux" or os.uname().machine not in ("x86_64", "aarch64"),
    reason="exits one thread through the Linux syscall",
)
def test_a_stop_waits_for_every_thread_of_a_main_pid_that_reads_as_a_zombie(
    tmp_path: Path,
) -> None:
    log = tmp_path / "srv.log"
    with reaper() as groups:
        proc = launch([sys.executable, "-c", LINGERING], dict(os.environ), log, gpu=0, port=30000)
        groups.append(proc.record.pgid)
        wait_for(lambda: log.read_text().strip().isdigit(), 10, "the listening port")
        port = int(log.read_text())
        result = stop(proc.record, term_timeout=10, kill_timeout=5)
        assert result.outcome == "drained"
        # The socket is closed once the stop returns: the relaunch's bind succeeds at once.
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("127.0.0.1", port))


@pytest.mark.parametrize("mode", ["drain", "terminate"])
def test_a_confirmed_stranger_stopped_by_its_pid_is_not_said_to_get_a_group_signal(
    mode: StopMode,
) -> None:
    # stop_unverified signals the pid alone: its line must not say "its process group".
    popen = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True
    )
    try:
        result = stop_unverified(psutil.Process(popen.pid), 10, 5, mode=mode, gpu=0)
        assert popen.wait(timeout=10) is not None  # gone after the SIGTERM to its pid
        assert result.pids == (popen.pid,) and not result.survivors
        assert "SIGTERM to its main pid" in result.describe()
        assert "process group" not in result.describe()
    finally:
        popen.kill()
        popen.wait(timeout=10)

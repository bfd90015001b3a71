"""Discovery of server processes by command line and by listening socket (real processes)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from bench.ports import free_port
from tui.pidwatch import PidWatch
from tui.servers.discovery import (
    LiveCheck,
    find_servers,
    is_alive,
    is_server_cmdline,
    port_from_cmdline,
    stdout_path,
)

# A stand-in "server": sleeps; its argv carries the words discovery looks for after ``-c``'s code.
SLEEPER = (
    "import socket, sys, time\n"
    "s = socket.socket(); s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen()\n"
    "print('up', flush=True); time.sleep(60)"
)


def _wait_line(path: Path, text: str, deadline_s: float = 20.0) -> None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text():
            return
        time.sleep(0.02)  # polling a file with a deadline, not standing in for synchronisation
    raise AssertionError(f"{text!r} never appeared in {path}")


@pytest.fixture
def fake_server(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], int, Path]]:
    port = free_port()
    log = tmp_path / "sglang_gpu3.log"
    # argv: python -c CODE PORT -m tui sim --port PORT  -> looks like ``python -m tui sim``
    argv = [sys.executable, "-c", SLEEPER, str(port), "-m", "tui", "sim", "--port", str(port)]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "3"}
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        _wait_line(log, "up")
        yield proc, port, log
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_cmdline_patterns() -> None:
    assert is_server_cmdline(["python3", "-m", "sglang.launch_server", "--port", "30001"])
    assert is_server_cmdline(["/usr/bin/sglang", "serve", "--model-path", "m"])
    assert is_server_cmdline([".venv/bin/gpufleet", "sim", "--port", "1"])
    assert is_server_cmdline(["python", "-m", "tui", "sim"])
    assert not is_server_cmdline(["python", "-m", "tui", "gpus"])
    assert not is_server_cmdline(["vim", "sglang.launch_server"])
    assert port_from_cmdline(["-m", "sglang.launch_server", "--port=30004"]) == 30004
    assert port_from_cmdline(["-m", "sglang.launch_server"]) == 30000
    assert port_from_cmdline(["--port", "abc"]) is None


def test_finds_server_by_cmdline_with_env_and_log(
    fake_server: tuple[subprocess.Popen[bytes], int, Path],
) -> None:
    proc, port, log = fake_server
    found = find_servers([port, free_port()], use_listeners=False)
    assert list(found) == [port]
    server = found[port]
    assert server.pid == proc.pid and server.found_by == "cmdline"
    assert server.cuda_visible_devices == "3"
    assert server.log_path == str(log)  # from /proc/PID/fd/1
    assert is_alive(server.pid, server.create_time)
    hinted = find_servers([port], log_hints={port: "/var/log/fleet/gpu3.log"})[port]
    assert hinted.log_path == "/var/log/fleet/gpu3.log"
    proc.kill()
    proc.wait(timeout=10)
    assert not is_alive(server.pid, server.create_time)
    assert find_servers([port]) == {}


def test_finds_listener_when_cmdline_says_nothing(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "plain.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-c", SLEEPER, str(port)], stdout=out, stderr=subprocess.STDOUT
        )
    try:
        _wait_line(log, "up")
        found = find_servers([port])
        if port not in found:
            pytest.skip("the kernel socket table is not readable here (needs root)")
        assert found[port].pid == proc.pid and found[port].found_by == "listen"
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_stdout_path_of_a_terminal_or_pipe_is_none() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"], stdout=subprocess.PIPE
    )
    try:
        assert stdout_path(proc.pid) is None
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_live_check_asks_psutil_identity_and_reads_the_start_time_once(
    fake_server: tuple[subprocess.Popen[bytes], int, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The monitor's every-poll check: the recorded start time is compared once (as
    ``is_alive`` does); after that psutil's own identity of that process answers, without
    the wall-clock start time (its boot-time read) at every poll."""
    proc, port, _ = fake_server
    server = find_servers([port], use_listeners=False)[port]
    calls: list[int] = []
    original = psutil.Process.create_time

    def counted(self: psutil.Process) -> float:
        calls.append(1)
        return original(self)

    monkeypatch.setattr(psutil.Process, "create_time", counted)
    check = LiveCheck(server.pid, server.create_time)
    assert all(check() for _ in range(5))
    assert len(calls) == 1
    assert not LiveCheck(server.pid, server.create_time + 1.0)()  # another start: not it
    proc.kill()
    proc.wait(timeout=10)
    assert not check()
    assert not check()


def test_live_check_calls_a_zombie_gone() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])  # never reaped until the end
    try:
        handle = psutil.Process(child.pid)
        check = LiveCheck(child.pid, handle.create_time())
        deadline = time.monotonic() + 20
        while handle.status() != psutil.STATUS_ZOMBIE:
            assert time.monotonic() < deadline, "the child never exited"
            time.sleep(0.02)  # polling the process table with a deadline
        assert not check()
        assert not is_alive(child.pid, handle.create_time())
    finally:
        child.wait(timeout=10)


def test_live_check_after_its_first_look_reads_no_proc_and_sees_an_exit_as_gone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Later looks ask the pidfd opened at the first (no /proc reads); the process exiting
    (a zombie, not yet reaped) reads as gone."""
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    try:
        handle = psutil.Process(child.pid)
        check = LiveCheck(child.pid, handle.create_time())
        assert check()
        reads: list[int] = []
        original = psutil.Process.status

        def counted(self: psutil.Process) -> str:
            reads.append(1)
            return original(self)

        with monkeypatch.context() as patch:
            patch.setattr(psutil.Process, "status", counted)
            assert all(check() for _ in range(5))
        probe = PidWatch.open(child.pid)
        if probe is not None:  # pidfds here: psutil was not asked again
            probe.close()
            assert reads == []
        assert child.stdin is not None
        child.stdin.close()  # the child exits
        deadline = time.monotonic() + 20
        while handle.status() != psutil.STATUS_ZOMBIE:
            assert time.monotonic() < deadline, "the child never exited"
            time.sleep(0.02)  # polling the process table with a deadline
        assert not check()
        assert not check()
    finally:
        child.wait(timeout=10)


def test_a_pid_watch_sees_its_process_exit() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    watch = PidWatch.open(child.pid)
    try:
        if watch is None:
            pytest.skip("no pidfd_open here")
        assert not watch.exited()
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=20)
        assert watch.exited()
        assert watch.exited()  # stays exited, its pidfd closed
    finally:
        if watch is not None:
            watch.close()
        child.wait(timeout=10)

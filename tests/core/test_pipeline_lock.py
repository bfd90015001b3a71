"""One pipeline per output directory: a second is refused naming the holder; a dead one's lock is
taken over, the holder's identity checked by pid *and* process start time."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from pipeline_helpers import (
    ProcessServer,
    generate_argv,
    read_shards,
    run_generate,
    set_mode,
    start_generate,
    status_when,
    write_batch,
)

from tui.pipeline.out_lock import LOCK_NAME, Holder, OutDirBusy, OutDirLock, is_running
from tui.pipeline.status import read_status


def _write_holder(out: Path, pid: int, start_time: float, host: str | None = None) -> None:
    holder = {"pid": pid, "start_time": start_time, "host": host or socket.gethostname()}
    (out / LOCK_NAME).write_text(json.dumps({**holder, "since": time.time()}))


@pytest.fixture
def sleeper() -> Iterator[psutil.Process]:
    """A live process that is not a pipeline and holds no flock."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        yield psutil.Process(process.pid)
    finally:
        process.kill()
        process.wait()


def test_a_held_lock_refuses_a_second_holder_naming_the_first(tmp_path: Path) -> None:
    lock = OutDirLock.acquire(tmp_path)
    try:
        with pytest.raises(OutDirBusy, match=f"pid {os.getpid()} on host "):
            OutDirLock.acquire(tmp_path)
    finally:
        lock.release()
    OutDirLock.acquire(tmp_path).release()  # released: free again, nobody taken over
    assert OutDirLock.acquire(tmp_path).took_over is None


def test_a_dead_holders_lock_is_taken_over(tmp_path: Path) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    start = psutil.Process(gone.pid).create_time()
    gone.wait()
    _write_holder(tmp_path, gone.pid, start)
    lock = OutDirLock.acquire(tmp_path)
    assert lock.took_over is not None and lock.took_over.pid == gone.pid
    assert json.loads((tmp_path / LOCK_NAME).read_text())["pid"] == os.getpid()
    lock.release()


def test_a_recycled_pid_is_not_the_holder(tmp_path: Path, sleeper: psutil.Process) -> None:
    # The recorded pid runs, but it started later than the recorded holder: another process.
    recorded = Holder(sleeper.pid, sleeper.create_time() - 100.0, socket.gethostname(), 0.0)
    assert not is_running(recorded)
    _write_holder(tmp_path, recorded.pid, recorded.start_time)
    lock = OutDirLock.acquire(tmp_path)
    assert lock.took_over is not None
    assert (lock.took_over.pid, lock.took_over.start_time) == (recorded.pid, recorded.start_time)
    lock.release()


def test_a_running_holder_is_respected_without_its_flock(
    tmp_path: Path, sleeper: psutil.Process
) -> None:
    """Same pid and start time: it runs (a lockless file system), so it is not taken over."""
    _write_holder(tmp_path, sleeper.pid, sleeper.create_time())
    with pytest.raises(OutDirBusy, match=f"pid {sleeper.pid}"):
        OutDirLock.acquire(tmp_path)
    _write_holder(tmp_path, sleeper.pid, sleeper.create_time(), host="another-host")
    with pytest.raises(OutDirBusy, match="cannot be checked from here"):
        OutDirLock.acquire(tmp_path)


def test_two_pipelines_on_one_out_one_refused_then_a_killed_one_taken_over(
    tmp_path: Path, server: ProcessServer
) -> None:
    ids = [f"q{i}" for i in range(400)]
    prompts = write_batch(tmp_path / "p.jsonl", ids)
    argv = generate_argv(tmp_path, "--prompts", str(prompts), "--server", server.url)
    # Requests sent while the server hangs time out (1 s) and are sent again once it answers.
    argv += ["--shard-size", "50", "--request-timeout", "1", "--max-retries", "100"]
    status = tmp_path / "status.json"
    set_mode(server, "hang")  # the first run stays busy until the test lets it finish
    first = start_generate(argv)
    try:
        status_when(status, first.pid, lambda s: s.in_flight > 0, "the first run sending")
        second = run_generate(argv)
        assert second.returncode == 2
        assert f"in use by the pipeline pid {first.pid} on host" in second.stderr
        detached = run_generate([*argv, "--detach"])
        assert detached.returncode == 2 and f"pid {first.pid}" in detached.stderr
        # The refused runs wrote nothing: the status document is still the first run's.
        current = read_status(status)
        assert current is not None and current.pid == first.pid and current.state == "running"
        set_mode(server, "ok")
        _, stderr = first.communicate(timeout=60)
        assert first.returncode == 0, stderr
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    counts = Counter(str(r["custom_id"]) for r in read_shards(tmp_path / "out"))
    assert set(counts) == set(ids) and max(counts.values()) == 1

    more = write_batch(tmp_path / "p.jsonl", [*ids, *(f"r{i}" for i in range(400))])
    set_mode(server, "hang")
    killed = start_generate([*argv, "--resume-by-id"])
    try:
        status_when(status, killed.pid, lambda s: s.in_flight > 0, "the next run sending")
        killed.send_signal(signal.SIGKILL)
        killed.wait(timeout=10)
    finally:
        if killed.poll() is None:
            killed.kill()
            killed.wait()
    set_mode(server, "ok")
    taken = run_generate(generate_argv(tmp_path, "--prompts", str(more), "--server", server.url))
    assert taken.returncode == 0, taken.stderr
    assert f"took over the lock of pid {killed.pid}" in taken.stderr
    counts = Counter(str(r["custom_id"]) for r in read_shards(tmp_path / "out"))
    assert len(counts) == 800 and max(counts.values()) == 1

"""Helpers for the process-control tests: real child processes with grandchildren, free ports."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

# A server stand-in: announces its pid, spawns a grandchild in its own process group (as SGLang
# spawns its scheduler), writes both pids to a file, then waits. With "term" a SIGTERM to the main
# pid stops its child and exits 0 (SGLang's drain ends with kill_process_tree of its children);
# with "ignore" both ignore SIGTERM.
PARENT = r"""
import os, signal, subprocess, sys, threading
mode, pid_file = sys.argv[1], sys.argv[2]
def drained(signum, frame):
    child.kill()
    child.wait()
    os._exit(0)
signal.signal(signal.SIGTERM, signal.SIG_IGN if mode == "ignore" else drained)
child = subprocess.Popen([sys.executable, "-c", sys.argv[3], mode])
print("server starting", flush=True)
tmp = pid_file + ".tmp"
with open(tmp, "w") as f:
    f.write(f"{os.getpid()} {child.pid}")
os.replace(tmp, pid_file)
threading.Event().wait()
"""
GRANDCHILD = r"""
import signal, sys, threading
if sys.argv[1] == "ignore":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
threading.Event().wait()
"""


def parent_argv(mode: str, pid_file: Path) -> list[str]:
    """argv of the stand-in server ('term' exits on SIGTERM, 'ignore' ignores it)."""
    return [sys.executable, "-c", PARENT, mode, str(pid_file), GRANDCHILD]


def wait_for(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ``predicate`` until true or fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        pause.wait(0.02)


def read_pids(pid_file: Path, timeout: float = 10.0) -> tuple[int, int]:
    """Wait for the stand-in to write its and its grandchild's pids."""
    wait_for(pid_file.exists, timeout, f"{pid_file} to appear")
    parent, child = pid_file.read_text().split()
    return int(parent), int(child)


def running(pid: int) -> bool:
    """True while ``pid`` is a live (non-zombie) process."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@contextlib.contextmanager
def reaper() -> Iterator[list[int]]:
    """Yield a list to append process-group ids to; SIGKILL every one of them on exit."""
    groups: list[int] = []
    try:
        yield groups
    finally:
        for pgid in groups:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)

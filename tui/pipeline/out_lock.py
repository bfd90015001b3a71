"""The output directory's lock: one pipeline per ``--out``; a dead holder's lock is taken over.

Two pipelines on one output directory number their shards independently and rewrite each other's
done record: the next resume deletes the other's shards and the manifest stops matching the
bucket. So a pipeline holds ``OUT/.gpufleet-generate.lock`` for its whole run:

* the exclusion itself is an ``flock`` on that file: the kernel drops it when the holder dies,
  however it dies (SIGKILL included), so taking it over needs no guess and no race between two
  starters;
* the file names the holder (pid, the process's start time, host) so a refused pipeline can say
  who holds the directory, and so a holder that does not hold the ``flock`` (a file system
  without locks, another host) is still respected while it runs. It is "running" only when a
  process with that pid exists *and* started at the recorded time: a recycled pid is not the
  holder;
* the output directory may be writable by someone else: the lock file is opened through the one
  door for writes (``tui.outputs.open_lock``): a link in its place (``ln -s /etc/x
  OUT/.gpufleet-generate.lock``) is refused, never followed, and the file is never truncated:
  the holder record is written over in place, padded, and blanked on release.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

from tui.outputs import clear_holder, open_lock, write_holder

LOCK_NAME = ".gpufleet-generate.lock"
_START_TOLERANCE_S = 0.05
"""psutil derives start times from clock ticks and the boot time: equal within a tick or two."""


class OutDirBusy(Exception):
    """Another pipeline holds the output directory (the message names it)."""


@dataclass(frozen=True, slots=True)
class Holder:
    """Who holds an output directory."""

    pid: int
    """The pipeline's process id."""
    start_time: float
    """Its process start time (``psutil.Process.create_time()``)."""
    host: str
    """The machine it runs on."""
    since: float
    """``time.time()`` when it took the lock."""

    def describe(self) -> str:
        """e.g. 'pid 4242 on host gpu-7, holding it since 2026-05-09 12:00:03'."""
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.since))
        return f"pid {self.pid} on host {self.host}, holding it since {when}"


def start_time_of(pid: int) -> float | None:
    """A process's start time, or None when no such process exists."""
    try:
        return psutil.Process(pid).create_time()
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return None
    except psutil.AccessDenied:
        return None


def is_running(holder: Holder) -> bool:
    """Whether ``holder`` (on this host) still runs: same pid *and* same start time."""
    started = start_time_of(holder.pid)
    return started is not None and abs(started - holder.start_time) <= _START_TOLERANCE_S


def _read_holder(fd: int) -> Holder | None:
    try:
        data = json.loads(os.pread(fd, 4096, 0).strip() or b"null")
        return Holder(
            int(data["pid"]), float(data["start_time"]), str(data["host"]), float(data["since"])
        )
    except (ValueError, TypeError, KeyError, RecursionError):
        return None  # empty (released cleanly) or not ours: nobody to respect


class OutDirLock:
    """The lock of one output directory, held by this process until :meth:`release`."""

    def __init__(self, path: Path, fd: int, took_over: Holder | None) -> None:
        """Use :meth:`acquire`."""
        self.path = path
        """The lock file."""
        self.took_over = took_over
        """The dead holder whose lock this one replaced, if any."""
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, out_dir: Path) -> OutDirLock:
        """Take the lock of ``out_dir`` (which must exist).

        Args:
            out_dir: the output directory.

        Returns:
            The held lock.

        Raises:
            OutDirBusy: another running pipeline holds it.
            OSError: the lock file cannot be created (an unwritable directory), or is refused
                (``tui.outputs.UnsafePath``: a link, another user's file, an unsafe directory).
        """
        path = out_dir / LOCK_NAME
        fd = open_lock(path, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _read_holder(fd)
                who = holder.describe() if holder else "another process (starting up)"
                raise OutDirBusy(f"in use by the pipeline {who}") from None
            previous = _read_holder(fd)
            if previous is not None and previous.host != socket.gethostname():
                raise OutDirBusy(
                    f"in use by the pipeline {previous.describe()}: it cannot be checked from "
                    f"here; if it is gone, delete {path}"
                )
            if previous is not None and is_running(previous):
                raise OutDirBusy(f"in use by the pipeline {previous.describe()}")
            me = psutil.Process()
            holder = Holder(me.pid, me.create_time(), socket.gethostname(), time.time())
            write_holder(fd, json.dumps(asdict(holder)).encode())
            os.fsync(fd)
        except BaseException:
            os.close(fd)  # closing drops the flock too
            raise
        return cls(path, fd, previous)

    def release(self) -> None:
        """Give the directory up (the file stays, blanked: nobody holds it)."""
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            clear_holder(self._fd)
        os.close(self._fd)
        self._fd = None

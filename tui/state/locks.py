"""The state files' writer locks: taken with a deadline, refused naming the holder, never waited
on for ever.

A state file ``X`` is guarded by an exclusive ``flock`` on its side file ``X.lock`` (0600, in the
0700 state directory). A writer that finds it held polls until ``LOCK_TIMEOUT_S`` and then
refuses with ``LockBusy``, naming who holds it: the pid and command line from ``/proc/locks``
(which knows every ``flock`` holder, ``flock(1)`` included), else the pid the holder wrote into
the lock file. A wedged or hostile holder costs an operation a refusal, never a hang.

An operation takes every lock it will need *before* it stops anything (``hold``): the fleet
state and the cordons, after the operation lock, in that order (``tui.ops.door``). While this
process holds a lock that way, its own writers (the stop threads, the launches) take only an
in-process mutex: the file is already theirs, and a second ``flock`` from this process on a
new descriptor would wait on itself.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil

from tui.inputs import HOLDER_LIMIT, parse_json
from tui.outputs import clear_holder, open_lock, write_holder, write_reason
from tui.state.files import StateFileError
from tui.state.private import ensure_private_dir

LOCK_TIMEOUT_S = 10.0
"""How long a writer waits for a state file's lock (a holder keeps it for milliseconds: a
read-modify-write of a small JSON document), unless the caller says otherwise."""
POLL_S = (0.002, 0.05)
"""First and longest pause between two tries (doubling)."""


class LockBusy(StateFileError):
    """A lock stayed held past its deadline; the message names the lock file and its holder
    (a ``StateFileError``: whoever reports a damaged state file in one line reports this too)."""


def lock_path(path: Path) -> Path:
    """The side file whose ``flock`` guards ``path``."""
    return path.with_name(path.name + ".lock")


@dataclass
class _Held:
    fd: int
    mutex: threading.RLock


_HELD: dict[str, _Held] = {}
"""Lock files this process holds for a whole operation (``hold``), by absolute path."""
_REGISTRY = threading.Lock()


def _open(lock: Path) -> int:
    """The lock file (``tui.outputs.open_lock``: no link followed, never truncated).

    Raises:
        StateFileError: it cannot be opened or is refused (naming it).
    """
    try:
        ensure_private_dir(lock.parent)
        fd = open_lock(lock)
    except OSError as exc:
        raise StateFileError(lock, f"cannot be used as a lock ({write_reason(exc)})") from None
    with contextlib.suppress(OSError):  # a lock file of an earlier version, made 0644
        if os.fstat(fd).st_mode & 0o077:
            os.fchmod(fd, 0o600)
    return fd


def _holder_from_proc_locks(fd: int) -> int | None:
    st = os.fstat(fd)
    wanted = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as handle:
            for line in handle:
                parts = line.split()
                # "1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF" (a "->" marks a waiter)
                if "->" in parts or len(parts) < 6 or parts[1] != "FLOCK":
                    continue
                if parts[5] == wanted and parts[4].isdigit():
                    return int(parts[4])
    except OSError:
        pass
    return None


def _holder_from_file(fd: int) -> int | None:
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        data = parse_json(os.pread(fd, HOLDER_LIMIT, 0) or b"null")
        pid = data["pid"]
        if isinstance(pid, int) and pid > 0 and psutil.pid_exists(pid):
            return pid
    return None


def describe_holder(fd: int) -> str:
    """'pid 123 (flock -x /x/fleet_state.json.lock sleep 600)', or why the holder is unknown."""
    pid = _holder_from_proc_locks(fd) or _holder_from_file(fd)
    if pid is None:
        return "another process (its pid is not visible here)"
    try:
        # One line, whatever the arguments hold (a "-c" program spans several).
        cmdline = " ".join(" ".join(psutil.Process(pid).cmdline()).split())[:200]
    except psutil.AccessDenied:
        return f"pid {pid} (another user's process)"
    except psutil.NoSuchProcess:
        return f"pid {pid} (exited just now)"
    return f"pid {pid} ({cmdline})" if cmdline else f"pid {pid}"


def _acquire(lock: Path, timeout_s: float | None) -> int:
    timeout_s = LOCK_TIMEOUT_S if timeout_s is None else timeout_s
    fd = _open(lock)
    deadline = time.monotonic() + timeout_s
    pause = POLL_S[0]
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise LockBusy(
                        lock,
                        f"is held by {describe_holder(fd)} for more than {timeout_s:g} s: refused",
                    ) from None
                time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
                pause = min(pause * 2, POLL_S[1])
        # Who holds it, for a refused writer on a system where /proc/locks is not readable
        # (best effort: a full disk must not stop a lock from being taken; the flock is it).
        with contextlib.suppress(OSError):
            write_holder(fd, json.dumps({"pid": os.getpid(), "since": time.time()}).encode())
    except BaseException:
        os.close(fd)
        raise
    return fd


def _release(fd: int) -> None:
    try:
        with contextlib.suppress(OSError):
            clear_holder(fd)
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


@contextlib.contextmanager
def locked(path: Path, timeout_s: float | None = None) -> Iterator[None]:
    """Hold the exclusive writer lock of ``path`` (its side file ``<name>.lock``).

    Args:
        path: The state file.
        timeout_s: How long to wait for another holder (None: ``LOCK_TIMEOUT_S``).

    Raises:
        LockBusy: still held by another process after ``timeout_s`` (naming it).
    """
    lock = lock_path(path)
    key = os.path.abspath(lock)
    while True:
        with _REGISTRY:
            held = _HELD.get(key)
        if held is None:
            break
        with held.mutex:
            with _REGISTRY:
                still = _HELD.get(key) is held
            if still:  # not let go between the look-up and the mutex
                yield
                return
    fd = _acquire(lock, timeout_s)
    try:
        yield
    finally:
        _release(fd)


@contextlib.contextmanager
def hold(paths: Iterable[Path], timeout_s: float | None = None) -> Iterator[None]:
    """Hold the writer locks of ``paths`` (in the order given) until the block ends; this
    process's ``locked`` calls on them meanwhile take only an in-process mutex.

    Args:
        paths: The state files (the caller keeps one order everywhere).
        timeout_s: Deadline for each lock (None: ``LOCK_TIMEOUT_S``).

    Raises:
        LockBusy: one stayed held past its deadline (the ones already taken are let go).
    """
    taken: list[tuple[str, int]] = []
    try:
        for path in paths:
            lock = lock_path(path)
            key = os.path.abspath(lock)
            with _REGISTRY:
                if key in _HELD:
                    continue  # already held by an enclosing hold of this process
            fd = _acquire(lock, timeout_s)
            with _REGISTRY:
                _HELD[key] = _Held(fd, threading.RLock())
            taken.append((key, fd))
        yield
    finally:
        for key, fd in reversed(taken):
            with _REGISTRY:
                held = _HELD.pop(key)
            with held.mutex:  # a writer of this process still inside finishes first
                _release(fd)

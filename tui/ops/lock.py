"""The operation lock: one operation changes the fleet at a time, and the others are told who.

An apply, canary, rollout, relaunch, kill, rollback or fleet stop holds an exclusive ``flock`` on
``tui.paths.operation_lock_file()`` for its whole run, and writes into the file who holds it
(operation, pid, process start time, since when). A second operation, from this process or any
other, is refused at once with that holder named. The kernel drops a ``flock`` when its holder
dies, so a lock whose holder was SIGKILLed is free again; the stale holder information it left
is recognised (its pid is gone, or belongs to another process now) and reported as taken over.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil

from tui import paths
from tui.inputs import HOLDER_LIMIT, kind_of, parse_json
from tui.outputs import UnsafePath, clear_holder, open_writable, write_holder, write_reason
from tui.state.private import ensure_private_dir


class OperationBusy(RuntimeError):
    """Another operation holds the fleet; the message names it."""


@dataclass(frozen=True, slots=True)
class Holder:
    """Who holds (or held) the operation lock."""

    operation: str
    """e.g. 'apply sim-aggressive to GPUs [0, 1]'."""
    pid: int
    """Holder's process id."""
    create_time: float
    """Holder's process start time (a reused pid has another)."""
    since: float
    """time.time() when it took the lock."""

    def alive(self) -> bool:
        """Whether the holder process still runs (same pid and start time)."""
        try:
            return abs(psutil.Process(self.pid).create_time() - self.create_time) < 0.05
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            return False

    def describe(self) -> str:
        """'apply ... (pid 123, for 42 s)'."""
        return f"{self.operation} (pid {self.pid}, for {max(0.0, time.time() - self.since):.0f} s)"


def _read_holder(handle: int) -> Holder | None:
    try:
        data = parse_json(os.pread(handle, HOLDER_LIMIT, 0))
        return Holder(
            str(data["operation"]),
            int(data["pid"]),
            float(data["create_time"]),
            float(data["since"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _me() -> tuple[int, float]:
    pid = os.getpid()
    return pid, psutil.Process(pid).create_time()


def _open(target: Path, create: bool) -> int:
    """The lock file, 0600 in the private state directory (``tui.outputs.open_lock``: a link
    in its place is refused, never followed; the file is never truncated); a FIFO or device in
    its place is refused (reading its holder would block for ever).

    Raises:
        FileNotFoundError: it does not exist and ``create`` is False.
        OperationBusy: it cannot be used as a lock file (naming it).
    """
    try:
        if create:
            ensure_private_dir(target.parent)
        handle = open_writable(target, create=create)
    except FileNotFoundError:
        raise
    except UnsafePath as exc:
        if exc.path == target and exc.problem.startswith("is not a regular file"):
            try:
                mode = os.stat(target).st_mode
            except OSError:
                mode = 0
            raise OperationBusy(f"{target}: is {kind_of(mode)}, not a lock file: refused") from None
        raise OperationBusy(f"{target}: cannot be used as the lock ({exc.problem})") from None
    except OSError as exc:
        raise OperationBusy(f"{target}: cannot be used as the lock ({write_reason(exc)})") from None
    with contextlib.suppress(OSError):  # made 0644 by an earlier version
        if os.fstat(handle).st_mode & 0o077:
            os.fchmod(handle, 0o600)
    return handle


@dataclass(frozen=True, slots=True)
class Acquired:
    """A held lock."""

    holder: Holder
    """This holder."""
    took_over: Holder | None
    """The dead holder whose stale entry was found (None: the lock was clean)."""


@contextlib.contextmanager
def operation_lock(operation: str, path: Path | None = None) -> Iterator[Acquired]:
    """Hold the fleet's operation lock for the ``with`` block.

    Args:
        operation: What is being done, in words (shown to whoever is refused).
        path: The lock file (default ``tui.paths.operation_lock_file()``).

    Yields:
        The acquisition (with the stale holder it replaced, if any).

    Raises:
        OperationBusy: another live operation holds it (named in the message).
    """
    target = path or paths.operation_lock_file()
    handle = _open(target, create=True)
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(handle)
            who = holder.describe() if holder else "another operation"
            raise OperationBusy(
                f"refused: {who} is changing the fleet; try again when it has finished"
            ) from None
        previous = _read_holder(handle)
        pid, create_time = _me()
        me = Holder(operation, pid, create_time, time.time())
        record = {"operation": operation, "pid": pid, "create_time": create_time, "since": me.since}
        try:
            write_holder(handle, json.dumps(record).encode())
        except OSError as exc:  # a full state disk: refused before anything is stopped
            fcntl.flock(handle, fcntl.LOCK_UN)
            raise OperationBusy(
                f"{target}: cannot record the operation's holder ({write_reason(exc)}): refused"
            ) from None
        stale = previous if previous is not None and not previous.alive() else None
        try:
            yield Acquired(me, stale)
        finally:
            with contextlib.suppress(OSError):
                clear_holder(handle)
            fcntl.flock(handle, fcntl.LOCK_UN)
    finally:
        os.close(handle)


def current_holder(path: Path | None = None) -> Holder | None:
    """Who holds the lock now (None when it is free). Never blocks."""
    target = path or paths.operation_lock_file()
    try:
        handle = _open(target, create=False)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read_holder(handle)
        fcntl.flock(handle, fcntl.LOCK_UN)
        return None
    finally:
        os.close(handle)

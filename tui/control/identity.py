"""Is this still the process gpufleet started? (pid alive, same start time, same command line)."""

from __future__ import annotations

import os
from dataclasses import dataclass

import psutil

from tui.state.fleet_state import ProcessRecord

LAUNCH_ID_ENV = "GPUFLEET_LAUNCH_ID"
"""Environment variable that marks every process of one launch (children inherit it)."""

CREATE_TIME_TOLERANCE_S = 0.05
"""psutil derives create_time from boot time and clock ticks; allow its rounding."""


class IdentityMismatch(RuntimeError):
    """The recorded pid now belongs to a process the fleet did not start: it is never signalled."""


class PidReused(IdentityMismatch):
    """The recorded pid runs a process started at another time: the fleet's server is gone."""


@dataclass(frozen=True, slots=True)
class Identity:
    """Outcome of an identity check."""

    alive: bool
    """The recorded process is running (and is ours)."""
    process: psutil.Process | None
    """The live process when ``alive``."""


def running(proc: psutil.Process) -> bool:
    """Whether anything of ``proc`` still runs: a zombie counts as gone only once its other
    threads are gone too.

    A process whose main thread has exited reads as a zombie while its other threads still
    exit, and those threads hold its files: its listening socket among them. Seen under load
    on two cores: a stop called a server gone, and the relaunch on the same port failed its
    bind ("port ... is still held by (unknown process)", the socket closed by the time the
    kernel's tables were read).
    """
    try:
        if proc.status() != psutil.STATUS_ZOMBIE:
            return True
    except psutil.NoSuchProcess:
        return False
    try:
        return len(os.listdir(f"/proc/{proc.pid}/task")) > 1
    except OSError:  # reaped meanwhile, or no /proc (not Linux): the status is all there is
        return False


def verify(record: ProcessRecord) -> Identity:
    """Check that ``record.pid`` is still the process the fleet launched.

    Args:
        record: the fleet record entry.

    Returns:
        ``Identity(alive=False)`` when the process is gone (or a zombie); the process otherwise.

    Raises:
        IdentityMismatch: the pid is alive but its start time or command line differ.
    """
    try:
        proc = psutil.Process(record.pid)
        if not running(proc):
            return Identity(False, None)
        create_time = proc.create_time()
        cmdline = tuple(proc.cmdline())
    except psutil.NoSuchProcess:
        return Identity(False, None)
    who = f"pid {record.pid} (GPU {record.gpu}, port {record.port})"
    if abs(create_time - record.create_time) > CREATE_TIME_TOLERANCE_S:
        raise PidReused(
            f"refusing to signal {who}: it started at {create_time:.2f}, the fleet's server at "
            f"{record.create_time:.2f}; the pid was reused by another process, not ours"
        )
    if not cmdline:
        # An exec'd process reads an empty command line only while it exits (its memory map is
        # gone, it is not yet a zombie): the fleet's own server on its way out, not a stranger.
        return Identity(False, None)
    if cmdline != record.cmdline:
        raise IdentityMismatch(
            f"refusing to signal {who}: its command line {' '.join(cmdline)!r} is not the one "
            f"the fleet launched ({' '.join(record.cmdline)!r})"
        )
    return Identity(True, proc)


def group_members(pgid: int, not_before: float) -> list[psutil.Process]:
    """Live processes of process group ``pgid`` started no earlier than ``not_before``.

    A pgid cannot be reused while any member lives, so members that started after the leader
    are the server's own children (the scheduler), even once the leader is gone.
    """
    members = []
    for proc in psutil.process_iter():
        try:
            if (
                _pgid(proc.pid) == pgid
                and proc.create_time() >= not_before - CREATE_TIME_TOLERANCE_S
                and running(proc)
            ):
                members.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return members


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except (ProcessLookupError, PermissionError):
        return None

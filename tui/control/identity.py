"""Is this still the process gpufleet started? Decided by what no clock step can change.

A recorded server is the fleet's when, at its pid, runs a process with the same start in clock
ticks since boot, in the same boot (``tui.control.procinfo``), whose environment carries the
same launch id. A server gpufleet adopted (``gpufleet adopt``: started by the operator's own
script, it never had a launch id) is the fleet's when, at its pid, runs a process with the same
start ticks in the same boot whose command line has the recorded digest. Wall-clock start times
(psutil's ``create_time``) are kept for display only: a step of the host's clock moves them for
every process. A record of an older gpufleet (no start ticks) is verified by its launch id
alone, and upgraded.

A process that cannot be verified (its environment may not be read: another user's) is never
taken for the fleet's. A refusal says what did not match, never a guess about why.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

import psutil

from tui.servers.procinfo import (
    LAUNCH_ID_ENV,
    boot_id,
    read_cmdline_digest,
    read_launch_id,
    start_ticks,
)
from tui.state.fleet_state import ProcessRecord

__all__ = [
    "CREATE_TIME_TOLERANCE_S",
    "LAUNCH_ID_ENV",
    "Identity",
    "IdentityMismatch",
    "group_members",
    "running",
    "verify",
]


CREATE_TIME_TOLERANCE_S = 0.05
"""psutil derives create_time from boot time and clock ticks; allow its rounding. (No server
identity uses it any more; the agent's pid file still does.)"""


class IdentityMismatch(RuntimeError):
    """The recorded pid runs a process that is not (or cannot be shown to be) the fleet's
    server: it is never signalled. The message says what did not match."""

    def __init__(self, message: str, *, gone: bool) -> None:
        super().__init__(message)
        self.gone = gone
        """The recorded server certainly no longer runs (another start time or boot, or
        another launch): its record describes nothing alive. False: it may still run (what
        was read is inconsistent, or could not be read)."""


@dataclass(frozen=True, slots=True)
class Identity:
    """Outcome of an identity check."""

    alive: bool
    """The recorded process is running (and is ours)."""
    process: psutil.Process | None
    """The live process when ``alive``."""
    upgraded: ProcessRecord | None = None
    """The record with its start ticks and boot id filled in, when it lacked them (a record of
    an older gpufleet, verified by its launch id): the caller writes it back."""


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


def _who(record: ProcessRecord) -> str:
    return f"pid {record.pid} (GPU {record.gpu}, port {record.port})"


def verify(record: ProcessRecord) -> Identity:
    """Check that ``record.pid`` is still the process the fleet launched.

    Args:
        record: the fleet record entry.

    Returns:
        ``Identity(alive=False)`` when nothing runs at the pid (or a zombie); the process
        otherwise (the recorded one on its way out included: the stop waits for it), with the
        upgraded record when it was recorded without start ticks.

    Raises:
        IdentityMismatch: something runs at the pid that is not verified as the recorded
            server (the message says what differs).
    """
    try:
        proc = psutil.Process(record.pid)
        if not running(proc):
            return Identity(False, None)
    except psutil.NoSuchProcess:
        return Identity(False, None)
    ticks = start_ticks(record.pid)
    if ticks is None:
        return Identity(False, None)  # gone between the two looks
    refusing = f"refusing to signal {_who(record)}"
    boot = boot_id()
    if record.start_ticks:
        if record.boot_id and boot and record.boot_id != boot:
            raise IdentityMismatch(
                f"{refusing}: the machine was restarted since it was recorded (boot id "
                f"{boot} differs from the record's {record.boot_id})",
                gone=True,
            )
        if ticks != record.start_ticks:
            raise IdentityMismatch(
                f"{refusing}: its start time (ticks {ticks}) differs from the record's "
                f"(ticks {record.start_ticks})",
                gone=True,
            )
    matched_ticks = bool(record.start_ticks)
    if record.adopted:
        return _verify_adopted(record, proc, refusing)
    if not record.launch_id:
        raise IdentityMismatch(
            f"{refusing}: the record has no launch id to verify it by", gone=False
        )
    read = read_launch_id(record.pid)
    if read.problem == "gone":
        return Identity(False, None)
    if read.problem == "empty" and matched_ticks:
        # The recorded process itself (same start ticks in the same boot) whose environment
        # stayed empty: it is exiting (its memory map is gone; its files, the GPU's and the
        # listening socket, are still being closed). Ours, alive until it is a zombie: the stop
        # waits for it.
        return Identity(True, proc)
    if read.problem is not None:
        why = "may not be read" if read.problem == "denied" else "is empty"
        raise IdentityMismatch(
            f"{refusing}: its environment {why}, so its launch id cannot be verified",
            gone=False,
        )
    if read.launch_id != record.launch_id:
        found = (
            "it carries no launch id"
            if read.launch_id is None
            else "its launch id differs from the record's"
        )
        # Same start ticks: the recorded process itself, the record inconsistent (it may still
        # be ours). Without start ticks: another launch runs at the pid, so ours is gone.
        raise IdentityMismatch(f"{refusing}: {found}", gone=not matched_ticks)
    upgraded = None
    if not matched_ticks:
        upgraded = replace(record, start_ticks=ticks, boot_id=boot)
    return Identity(True, proc, upgraded)


def _verify_adopted(record: ProcessRecord, proc: psutil.Process, refusing: str) -> Identity:
    """An adopted server (no launch id): its start ticks and boot matched (``verify``), its
    command line must still have the recorded digest. Without start ticks it is never taken
    for the fleet's: a command line alone names no process."""
    if not record.start_ticks:
        raise IdentityMismatch(
            f"{refusing}: the adopted record has no start time to verify it by", gone=False
        )
    digest = read_cmdline_digest(record.pid)
    if digest is None:
        if not running(proc):
            return Identity(False, None)
        raise IdentityMismatch(
            f"{refusing}: its command line may not be read, so it cannot be verified",
            gone=False,
        )
    if digest != record.cmdline_digest:
        # Same start ticks in the same boot: the adopted process itself, renamed since (a
        # process may rewrite its own argv). Not verified: never signalled, the record kept.
        raise IdentityMismatch(
            f"{refusing}: its command line differs from the one adopted", gone=False
        )
    return Identity(True, proc)


def group_members(pgid: int, not_before_ticks: int) -> list[psutil.Process]:
    """Live processes of process group ``pgid`` started no earlier than ``not_before_ticks``
    (clock ticks since boot).

    A pgid cannot be reused while any member lives, so members that started after the leader
    are the server's own children (the scheduler), even once the leader is gone.
    """
    members = []
    for proc in psutil.process_iter():
        try:
            if _pgid(proc.pid) != pgid:
                continue
            ticks = start_ticks(proc.pid)
            if ticks is not None and ticks >= not_before_ticks and running(proc):
                members.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return members


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except (ProcessLookupError, PermissionError):
        return None

"""Who holds a GPU's port, and taking a server of the fleet that lost its record back into it.

A server of the fleet can end up running without a record (a record dropped by a wrong identity
verdict of an older gpufleet, a state file edited by hand, a crash between a launch and its
record): nothing would then stop it, and a relaunch on its port fails. When a step finds its
port held, the holder is named (pid and command line); when the holder carries a launch id this
fleet gave (``GpuState.launches``), it is the fleet's own and is **adopted**: recorded as the
GPU's server, with its start ticks, boot and launch id, so stops and relaunches act on it again.
A holder that cannot be verified is never adopted, and never signalled without the operator's
confirmation (``ConfirmedServer``), and then only its pid, never its group.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import psutil

from tui.control.identity import IdentityMismatch, verify
from tui.control.preflight import PortHolder, PreflightError, port_holder
from tui.servers.discovery import stdout_path
from tui.servers.procinfo import boot_id, read_launch_id, start_ticks
from tui.state.fleet_state import FleetState, ProcessRecord, put_record, read_fleet


@dataclass(frozen=True, slots=True)
class ConfirmedServer:
    """A process the operator confirmed stopping although the fleet cannot verify it as its own
    (the console's ``unknown`` server): only this pid, still this process, is signalled."""

    gpu: int
    """The GPU whose port it holds."""
    pid: int
    """Its pid, as the confirmation named it."""
    start_ticks: int
    """Its start in clock ticks since boot when it was shown: another process at the pid later
    has other ticks and is not signalled."""
    cmdline: str = ""
    """Its command line as shown."""

    def still_it(self) -> bool:
        """Whether the pid still runs the process the operator confirmed."""
        return self.start_ticks > 0 and start_ticks(self.pid) == self.start_ticks


@dataclass(frozen=True, slots=True)
class Holder:
    """Who holds a GPU's port, and whether the fleet took it back."""

    holder: PortHolder
    """The listening process (pid None when the kernel does not say)."""
    adopted: ProcessRecord | None = None
    """Its new record, when it was the fleet's own and is now the GPU's server."""
    why_not: str = ""
    """Why it was not adopted (not the fleet's, or cannot be verified)."""

    def describe(self) -> str:
        """'pid 123 (python -m tui sim ...)' or what the kernel allows to say."""
        h = self.holder
        return f"pid {h.pid} ({h.cmdline})" if h.pid is not None else h.cmdline


def _launched_here(launch_id: str, state: FleetState) -> bool:
    return any(launch_id in entry.launches for entry in state.values()) or any(
        entry.server is not None and entry.server.launch_id == launch_id for entry in state.values()
    )


def _record_alive(record: ProcessRecord | None) -> bool:
    if record is None:
        return False
    try:
        return verify(record).alive
    except IdentityMismatch as mismatch:
        return not mismatch.gone


def listens(pid: int, port: int) -> bool:
    """Whether ``pid``'s own sockets include one listening on ``port`` now."""
    try:
        conns = psutil.Process(pid).net_connections(kind="inet")
    except (psutil.Error, OSError):
        return False
    return any(c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port for c in conns)


def holder_record(gpu: int, holder: PortHolder, host: str) -> tuple[ProcessRecord | None, str]:
    """The record ``holder`` would have as ``gpu``'s server, when it is the fleet's own.

    Returns:
        (record, "") or (None, why it is not adopted).
    """
    pid = holder.pid
    if pid is None:
        return None, "the kernel does not say which process it is"
    read = read_launch_id(pid)
    if read.problem == "denied":
        return None, "its environment may not be read, so it cannot be verified as the fleet's"
    if read.problem == "empty":
        return None, "its environment is empty (it is exiting), so it cannot be verified"
    if read.problem is not None or not read.launch_id:
        return None, "it carries no launch id of this fleet"
    state = read_fleet()
    if not _launched_here(read.launch_id, state):
        return None, "its launch id is not one this fleet gave"
    entry = state.get(gpu)
    recorded = entry.server if entry is not None else None
    if recorded is not None and recorded.pid != pid and _record_alive(recorded):
        return None, f"GPU {gpu}'s record names another live server (pid {recorded.pid})"
    ticks = start_ticks(pid)
    try:
        proc = psutil.Process(pid)
        pgid = os.getpgid(pid)
        create_time, cmdline = proc.create_time(), tuple(proc.cmdline())
    except (psutil.Error, OSError):
        return None, "it exited while being looked at"
    if not ticks or pgid <= 1:
        return None, "its start time or process group cannot be read"
    if not listens(pid, holder.port):
        # Who holds a socket is read from every process's fds, and a process forked by a
        # launch holds all of its parent's for a moment before its exec closes them: a
        # neighbour GPU's server, found so, carries a launch id of this fleet (seen under load:
        # the demo's GPU 0 server adopted as GPU 1's while the test held GPU 1's port).
        return None, "it does not hold the port's listening socket itself"
    profile = entry.current_name if entry is not None and entry.current_name else ""
    return (
        ProcessRecord(
            gpu=gpu,
            port=holder.port,
            pid=pid,
            pgid=pgid,
            create_time=create_time,
            cmdline=cmdline,
            log_path=stdout_path(pid) or "",
            profile=profile,
            host=host,
            launch_id=read.launch_id,
            start_ticks=ticks,
            boot_id=boot_id(),
        ),
        "",
    )


def port_holder_adopting(gpu: int, port: int, host: str) -> Holder | None:
    """Who holds ``port``; when it is a server of this fleet, adopt it as ``gpu``'s server.

    Returns:
        None when the port is free; else the holder, with its new record when adopted.
    """
    holder = port_holder(port, host)
    if holder is None:
        return None
    record, why = holder_record(gpu, holder, host)
    if record is None:
        return Holder(holder, None, why)
    put_record(record)
    return Holder(holder, record)


def check_port_adopting(gpu: int, port: int, host: str) -> ProcessRecord | None:
    """A launch's port check that leaves no server of the fleet untracked.

    Returns:
        None when the port is free; the new record when its holder was the fleet's own server
        (adopted: the caller decides whether that GPU now runs, or its step failed).

    Raises:
        PreflightError: the port is held by a process not verified as the fleet's (named with
            its pid and command line, and why it is not adopted).
    """
    held = port_holder_adopting(gpu, port, host)
    if held is None:
        return None
    if held.adopted is not None:
        return held.adopted
    raise PreflightError(
        f"GPU {gpu}: port {port} is still held by {held.describe()}, not a server of this "
        f"fleet ({held.why_not}); stop it or choose another port"
    )


def adopted_text(record: ProcessRecord) -> str:
    """What a step says when it found its port held by the fleet's own unrecorded server."""
    return (
        f"GPU {record.gpu}: port {record.port} is held by pid {record.pid} "
        f"({' '.join(record.cmdline)}), a server of this fleet that had no record: adopted as "
        "the GPU's server (stop or relaunch it)"
    )

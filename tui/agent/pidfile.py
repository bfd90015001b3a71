"""The pid file of a node's detached agent: who it is (pid, start, command line) and where.

``gpufleet agent --detach`` writes it after starting the agent in its own session; ``--stop`` and
``--running`` read it. A pid alone names whatever process holds that number now; the agent is the
process with that pid, that start in clock ticks since boot in that boot (``tui.servers.procinfo``,
as the fleet's servers are identified) and that command line, and only that process is ever
signalled.

Why not the wall-clock start (``psutil.Process.create_time()``): a step of the host's clock moves
it for every process. Seen with ``create_time`` +24 s in the file: ``--running`` said not running
(exit 3), ``--stop`` removed the file while the agent kept serving, and ``--detach`` then failed
with "address in use". A pid file of an older gpufleet (no start ticks) is still judged by its
``create_time``.
"""

from __future__ import annotations

import contextlib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import psutil

from tui import paths
from tui.control.identity import CREATE_TIME_TOLERANCE_S
from tui.servers.procinfo import boot_id, start_ticks
from tui.state.files import expect, read_document, write_document


def pid_file() -> Path:
    """Where the node's detached agent is recorded (one agent per state directory)."""
    return paths.state_dir() / "agent.pid.json"


def log_file() -> Path:
    """Where a detached agent's output goes (appended)."""
    return paths.state_dir() / "agent.log"


@dataclass(frozen=True, slots=True)
class AgentRecord:
    """A detached agent as its pid file records it."""

    pid: int
    """Its process id."""
    create_time: float
    """Its wall-clock start time (``psutil.Process.create_time()``): shown, and the identity of
    a pid file written before start ticks were (``start_ticks`` 0)."""
    cmdline: tuple[str, ...]
    """The argv it was started with (what ``/proc/PID/cmdline`` shows for it)."""
    node: str
    """The node's name (its ``--node``)."""
    url: str
    """Where it serves (``http://127.0.0.1:9400``)."""
    token_file: str
    """The token file it checks requests against (absolute)."""
    log: str
    """Its output file."""
    started_at: float
    """``time.time()`` of the start."""
    start_ticks: int = 0
    """Its start in clock ticks since boot (``tui.servers.procinfo.start_ticks``): a reused pid
    has another; no clock step moves it. 0: a pid file of an older gpufleet."""
    boot_id: str = ""
    """The boot it started in ("" where the kernel gives none)."""

    def to_json(self) -> dict[str, Any]:
        """The pid file's document."""
        doc = asdict(self)
        doc["cmdline"] = list(self.cmdline)
        return doc


def _parse(doc: Any) -> AgentRecord:
    expect(isinstance(doc, dict), "not a JSON object")
    cmdline = doc["cmdline"]
    expect(isinstance(cmdline, list) and all(isinstance(a, str) for a in cmdline), "cmdline")
    return AgentRecord(
        pid=int(doc["pid"]),
        create_time=float(doc["create_time"]),
        cmdline=tuple(cmdline),
        node=str(doc["node"]),
        url=str(doc["url"]),
        token_file=str(doc["token_file"]),
        log=str(doc["log"]),
        started_at=float(doc["started_at"]),
        start_ticks=int(doc.get("start_ticks", 0)),
        boot_id=str(doc.get("boot_id", "")),
    )


def read_record(path: Path | None = None) -> AgentRecord | None:
    """The recorded agent, or None without a pid file (call under ``locked(pid_file())``).

    Raises:
        StateFileError: the pid file is damaged (naming it).
    """
    return read_document(path or pid_file(), _parse, None)


def write_record(record: AgentRecord, path: Path | None = None) -> None:
    """Replace the pid file with ``record`` (atomically)."""
    write_document(path or pid_file(), record.to_json())


def remove_record(path: Path | None = None) -> None:
    """Remove the pid file (absent is fine)."""
    (path or pid_file()).unlink(missing_ok=True)


@dataclass(frozen=True, slots=True)
class Liveness:
    """Whether the recorded agent still runs."""

    process: psutil.Process | None
    """The agent's live process (its identity verified), or None."""
    why: str
    """Why not, in words (empty when it runs)."""


def _gone(proc: psutil.Process) -> bool:
    """Exited, or a zombie: exited but not yet reaped (its sockets and port are released)."""
    try:
        return proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _other_start(record: AgentRecord, proc: psutil.Process) -> str:
    """Why the process at the recorded pid started at another time than the agent ("" when it
    did not): start ticks and boot id, or for an older pid file its create_time."""
    if record.start_ticks:
        boot = boot_id()
        if record.boot_id and boot and record.boot_id != boot:
            return f"the machine was restarted since (boot id {boot}, the agent's {record.boot_id})"
        ticks = start_ticks(record.pid)
        if ticks is not None and ticks != record.start_ticks:
            return f"started at tick {ticks}, the agent at tick {record.start_ticks}"
        return ""
    create_time = proc.create_time()
    if abs(create_time - record.create_time) > CREATE_TIME_TOLERANCE_S:
        return f"started {create_time:.2f}, the agent {record.create_time:.2f}"
    return ""


def check(record: AgentRecord) -> Liveness:
    """Is the process ``record`` names the agent it recorded (pid, start, command line)?

    Args:
        record: The pid file's record.

    Returns:
        The live process when it is that agent; otherwise None and why (exited, or the pid now
        belongs to another process, which is never to be signalled).
    """
    try:
        proc = psutil.Process(record.pid)
        if _gone(proc):
            return Liveness(None, f"pid {record.pid} has exited")
        other = _other_start(record, proc)
        cmdline = tuple(proc.cmdline())
    except psutil.NoSuchProcess:
        return Liveness(None, f"pid {record.pid} has exited")
    except psutil.AccessDenied:
        return Liveness(None, f"pid {record.pid} belongs to another user: not this agent")
    if other:
        return Liveness(
            None, f"pid {record.pid} now runs another process ({other}): the agent has exited"
        )
    if cmdline != record.cmdline:
        return Liveness(
            None, f"pid {record.pid} runs {' '.join(cmdline)!r}, not the recorded agent"
        )
    return Liveness(proc, "")


def exited(proc: psutil.Process) -> bool:
    """Whether ``proc`` (a verified agent) has exited (a zombie counts: it serves nothing)."""
    with contextlib.suppress(psutil.AccessDenied):
        return _gone(proc) or not proc.is_running()
    return False

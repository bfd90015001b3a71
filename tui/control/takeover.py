"""Taking over a server gpufleet did not launch: who holds a port, whether it is an SGLang
server, and the record that makes it the fleet's (``gpufleet adopt``).

The seed's operator starts with servers already running from a script of their own (``setsid``,
``CUDA_VISIBLE_DEVICES``, their own log files). Such a server carries no launch id
(``tui.control.identity``), so nothing of gpufleet would ever signal it. Adopting it records
an identity that needs none: its main pid, that pid's start in clock ticks since boot, the boot,
and a digest of its command line (``tui.servers.procinfo.cmdline_digest``). Every stop verifies
all of them again before any signal (``identity.verify``).

A port's holder is the process holding its listening socket (``port_holder``, confirmed from the
process's own sockets: a process forked by a launch holds its parent's fds for a moment). It is
taken over only when its command line launches SGLang or gpufleet's simulator (a drop-in for
it), and its start ticks, process group and command line can be read; otherwise the port is
refused, named. Nothing here signals anything.

``tui.control.adopt`` is the other way in: a server of gpufleet's own fleet that lost its
record, known by its launch id.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import psutil

from tui.control.adopt import ConfirmedServer, holder_record, listens
from tui.control.identity import IdentityMismatch, verify
from tui.control.preflight import port_holder
from tui.servers.discovery import describe_process, is_server_cmdline, stdout_path
from tui.servers.procinfo import boot_id, cmdline_digest, start_ticks
from tui.state.fleet_state import ProcessRecord


class NotAdoptable(ValueError):
    """A port whose holder cannot be taken over; the message is one line naming the port."""


@dataclass(frozen=True, slots=True)
class RunningServer:
    """An SGLang (or simulated) server found holding a port, as it runs now."""

    port: int
    """The port it listens on."""
    pid: int
    """Its main process (the one holding the listening socket)."""
    pgid: int
    """Its process group (recorded for display: an adopted server's group is never signalled)."""
    start_ticks: int
    """Its start in clock ticks since boot: with the boot id and the digest, its identity."""
    create_time: float
    """psutil's wall-clock start time (for display)."""
    cmdline: tuple[str, ...]
    """Its argv."""
    environ: Mapping[str, str] | None
    """Its environment as it started (None: it may not be read)."""
    log_path: str | None
    """The regular file its stdout goes to (None: a terminal, a pipe, or not readable)."""
    children: tuple[int, ...] = ()
    """Its descendants when found (scheduler, detokenizer)."""
    cwd: str | None = None
    """Its working directory (None: may not be read)."""
    exe: str | None = None
    """The executable the kernel runs for it (``/proc/PID/exe``; None: may not be read)."""

    @property
    def interpreter(self) -> str:
        """Its ``argv[0]`` as a path a relaunch can run: as given when absolute, from its own
        working directory when relative, looked up on its own ``PATH`` when a bare name, else
        the executable the kernel runs; "" when none of these is known.

        Why not the kernel's executable first: a virtual environment's ``python`` is a link to
        the base interpreter, and run by that path it would not see the environment's
        packages (SGLang among them).
        """
        first = self.cmdline[0] if self.cmdline else ""
        if os.path.isabs(first):
            return first
        if "/" in first and self.cwd:
            return os.path.normpath(os.path.join(self.cwd, first))
        path = None if self.environ is None else self.environ.get("PATH")
        found = shutil.which(first, path=path) if first and path is not None else None
        return found or self.exe or ""

    @property
    def digest(self) -> str:
        """``cmdline_digest`` of its command line."""
        return cmdline_digest(self.cmdline)

    @property
    def cuda_visible_devices(self) -> str | None:
        """``CUDA_VISIBLE_DEVICES`` of its environment (None: unset or not readable)."""
        return None if self.environ is None else self.environ.get("CUDA_VISIBLE_DEVICES")

    def describe(self) -> str:
        """'pid 123 (python -m sglang.launch_server ...)'."""
        return f"pid {self.pid} ({' '.join(self.cmdline)})"


def _holder_words(pid: int | None, cmdline: str) -> str:
    return f"pid {pid} ({cmdline})" if pid is not None else cmdline


def running_server(port: int, host: str = "127.0.0.1") -> RunningServer:
    """The server holding ``port``, when it is one gpufleet may take over.

    Args:
        port: The port.
        host: The address to test the port on.

    Returns:
        What runs there.

    Raises:
        NotAdoptable: nothing listens, the kernel does not say who, it is not an SGLang server
            (nor gpufleet's simulator), or its identity cannot be read (each named).
    """
    where = f"--ports: port {port}"
    try:
        holder = port_holder(port, host)
    except OSError as exc:
        raise NotAdoptable(f"{where}: cannot be tested on {host} ({exc.strerror or exc})") from None
    if holder is None:
        raise NotAdoptable(f"{where}: nothing listens there (no server to adopt)")
    if holder.pid is None:
        raise NotAdoptable(
            f"{where}: held by {holder.cmdline}: the kernel does not say which process it is "
            "(another user's or another namespace's), so it cannot be adopted"
        )
    try:
        proc = psutil.Process(holder.pid)
        argv = tuple(proc.cmdline())
    except psutil.NoSuchProcess:
        raise NotAdoptable(f"{where}: its holder pid {holder.pid} exited meanwhile") from None
    except psutil.AccessDenied:
        raise NotAdoptable(
            f"{where}: held by pid {holder.pid}, whose command line may not be read"
        ) from None
    if not is_server_cmdline(argv):
        raise NotAdoptable(
            f"{where}: held by {_holder_words(holder.pid, holder.cmdline)}, which is not an SGLang "
            "server (python -m sglang.launch_server, sglang serve) nor gpufleet's simulator: "
            "not adopted"
        )
    if not listens(holder.pid, port):
        raise NotAdoptable(
            f"{where}: pid {holder.pid} does not hold the listening socket itself (a process "
            "forked from it may): look again in a moment"
        )
    return _read(proc, port, argv)


def _read(proc: psutil.Process, port: int, argv: tuple[str, ...]) -> RunningServer:
    where = f"--ports: port {port}"
    try:
        found = describe_process(proc, port, None, "listen")
        pgid = os.getpgid(proc.pid)
    except (psutil.NoSuchProcess, ProcessLookupError):
        raise NotAdoptable(f"{where}: its holder pid {proc.pid} exited meanwhile") from None
    except PermissionError:
        pgid = 0
    ticks = found.start_ticks
    if not ticks or pgid <= 1:
        raise NotAdoptable(
            f"{where}: the start time or process group of pid {proc.pid} cannot be read, so its "
            "identity could not be verified later: not adopted"
        )
    try:
        environ: Mapping[str, str] | None = dict(proc.environ())
    except (psutil.AccessDenied, psutil.ZombieProcess, OSError):
        environ = None
    except psutil.NoSuchProcess:
        raise NotAdoptable(f"{where}: its holder pid {proc.pid} exited meanwhile") from None
    return RunningServer(
        cwd=_readable(proc.cwd),
        exe=_readable(proc.exe),
        port=port,
        pid=proc.pid,
        pgid=pgid,
        start_ticks=ticks,
        create_time=found.create_time,
        cmdline=argv,
        environ=environ,
        log_path=stdout_path(proc.pid),
        children=found.children,
    )


def _readable(read: Callable[[], str]) -> str | None:
    try:
        return read() or None
    except (psutil.Error, OSError):
        return None


def still_running(server: RunningServer) -> bool:
    """Whether ``server``'s pid still runs the very process that was read (same start ticks,
    same command line): checked again right before its record is written."""
    if start_ticks(server.pid) != server.start_ticks:
        return False
    try:
        return cmdline_digest(psutil.Process(server.pid).cmdline()) == server.digest
    except (psutil.Error, OSError):
        return False


def adopted_record(
    server: RunningServer,
    gpu: int,
    host: str,
    log_path: str,
    profile: str,
    device: int | None = None,
) -> ProcessRecord:
    """The fleet record that makes ``server`` the server of ``gpu``: no launch id, its identity
    its start ticks, boot id and command line digest (``ProcessRecord.adopted``).

    Args:
        server: What was found.
        gpu: The GPU it serves.
        host: The address it serves on.
        log_path: Its log file (the one the console follows).
        profile: The profile written from its command line.
        device: The card it runs on (None or ``gpu``: its slot's own).
    """
    return ProcessRecord(
        gpu=gpu,
        port=server.port,
        pid=server.pid,
        pgid=server.pgid,
        create_time=server.create_time,
        cmdline=server.cmdline,
        log_path=log_path,
        profile=profile,
        host=host,
        start_ticks=server.start_ticks,
        boot_id=boot_id(),
        cmdline_digest=server.digest,
        device=None if device == gpu else device,
    )


def stranger_on_port(
    gpu: int,
    port: int,
    host: str,
    record: ProcessRecord | None,
    confirmed: ConfirmedServer | None = None,
) -> tuple[str, bool] | None:
    """Why an operation must not begin on ``gpu``: its port is held by a process gpufleet
    neither launched nor adopted (its stop would be refused, and its launch would find the port
    held, after other GPUs were already stopped). Reads only.

    Args:
        gpu: The GPU.
        port: Its port.
        host: Its address.
        record: Its recorded server (None: nothing recorded).
        confirmed: A holder the operator confirmed stopping (the console's named stranger).

    Returns:
        One line naming the port and the holder's pid and command line, and whether the holder
        is an SGLang server (``gpufleet adopt`` takes it over) or something else; None when the
        port is free, held by the GPU's own recorded server, by a server of this fleet that
        lost its record (``tui.control.adopt`` takes it back), or by the process the operator
        confirmed.
    """
    if record is not None and record.port == port:
        try:
            if verify(record).alive:
                return None  # the fleet's own: the operation's stop verifies it again
        except IdentityMismatch:
            pass  # the stop would refuse it, naming why: what holds the port is said here
    try:
        holder = port_holder(port, host)
    except OSError:
        return None  # not an address of this host: not checked, as a launch does not
    if holder is None or (confirmed is not None and confirmed.pid == holder.pid):
        return None
    if holder_record(gpu, holder, host)[0] is not None:
        return None
    who = f"GPU {gpu}: port {port} is held by {_holder_words(holder.pid, holder.cmdline)}"
    try:
        server = holder.pid is not None and is_server_cmdline(psutil.Process(holder.pid).cmdline())
    except (psutil.Error, OSError):
        server = False
    if server:
        return (
            f"{who}, a server gpufleet did not launch and has not adopted: nothing was stopped",
            True,
        )
    return f"{who}, which is not an SGLang server: nothing was stopped; stop it or move", False

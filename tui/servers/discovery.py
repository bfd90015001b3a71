"""Finding the server processes of a fleet that may have been started before the console.

A server is recognised by its command line (``python -m sglang.launch_server``, ``sglang serve``,
``gpufleet sim``, ``python -m tui sim``) and its ``--port``; when the command line says nothing
useful, the process listening on the port is asked of the kernel (``psutil.net_connections``,
which may need root). Reading another process's environment or fds may be refused: those fields
are then None, never an error.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import psutil

from tui.pidwatch import PidWatch
from tui.servers.procinfo import start_ticks

SGLANG_DEFAULT_PORT = 30000
"""The port SGLang uses when ``--port`` is not given."""


@dataclass(frozen=True, slots=True)
class ServerProcess:
    """A server's main process as found on this host."""

    pid: int
    """Main process id (the one that serves HTTP)."""
    create_time: float
    """psutil create_time(): with pid, the process's identity (pids are reused)."""
    port: int
    """HTTP port it serves."""
    cmdline: tuple[str, ...] = ()
    """Its argv."""
    children: tuple[int, ...] = ()
    """Descendant pids (scheduler, detokenizer), at discovery time."""
    cuda_visible_devices: str | None = None
    """CUDA_VISIBLE_DEVICES from its environment, when readable."""
    log_path: str | None = None
    """Its log file: from the fleet definition, else where its stdout points."""
    found_by: str = "cmdline"
    """'cmdline' or 'listen' (discovery), or 'record' (the fleet record of ``tui.control``)."""
    start_ticks: int | None = None
    """Its start in clock ticks since boot (``tui.servers.procinfo``): with the pid, its
    identity, which no clock step moves (None: not read)."""


def _is_module_launch(argv: Sequence[str], module: str, sub: str | None) -> bool:
    for i, arg in enumerate(argv[:-1]):
        if arg == "-m" and argv[i + 1] == module:
            return sub is None or (i + 2 < len(argv) and argv[i + 2] == sub)
    return False


def is_server_cmdline(argv: Sequence[str]) -> bool:
    """True when argv launches an SGLang server or gpufleet's simulated one.

    Args:
        argv: A process's command line.

    Returns:
        Whether it is ``-m sglang.launch_server``, ``sglang serve``, ``gpufleet sim`` or
        ``-m tui sim``.
    """
    if not argv:
        return False
    if _is_module_launch(argv, "sglang.launch_server", None):
        return True
    if _is_module_launch(argv, "tui", "sim"):
        return True
    for i, arg in enumerate(argv[:-1]):
        base = os.path.basename(arg)
        if base == "sglang" and argv[i + 1] == "serve":
            return True
        if base == "gpufleet" and argv[i + 1] == "sim":
            return True
    return False


def port_from_cmdline(argv: Sequence[str]) -> int | None:
    """The ``--port`` a server command line asks for (SGLang's default when absent).

    Args:
        argv: A server command line.

    Returns:
        The port, or None when ``--port`` has an unreadable value.
    """
    for i, arg in enumerate(argv):
        value: str | None = None
        if arg == "--port" and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith("--port="):
            value = arg.split("=", 1)[1]
        if value is not None:
            return int(value) if value.isdigit() else None
    return SGLANG_DEFAULT_PORT


def stdout_path(pid: int) -> str | None:
    """Where a process's stdout points, when it is a regular file (its log).

    Args:
        pid: The process.

    Returns:
        The file path, or None for a terminal, pipe, socket, or when /proc refuses.
    """
    try:
        target = os.readlink(f"/proc/{pid}/fd/1")
    except OSError:
        return None
    if not target.startswith("/") or target.startswith("/dev/"):
        return None
    return target.removesuffix(" (deleted)")


def is_alive(pid: int, create_time: float) -> bool:
    """True when ``pid`` still runs and is the same process (same start time, not a zombie)."""
    try:
        proc = psutil.Process(pid)
        return (
            abs(proc.create_time() - create_time) < 0.05 and proc.status() != psutil.STATUS_ZOMBIE
        )
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


class LiveCheck:
    """``is_alive`` of one process, asked again and again (the monitor's every poll).

    The first look is ``is_alive``'s: the recorded start time against psutil's, with a pidfd on
    the pid opened just before (``tui.pidwatch``). Later looks ask that pidfd whether the process
    exited: one ``poll(2)``, and a pidfd names the process, so a reused pid reads as gone. Where
    there is no pidfd, later looks ask psutil's own identity of the process found then (pid and
    start time since boot, what ``psutil.Process.is_running`` and its signals rely on) and
    whether it became a zombie.

    Why: ``is_alive`` makes a new ``psutil.Process``, and its wall-clock start time reads the
    boot time from ``/proc/stat`` at every call (a read that grows with the core count) on top of
    two ``/proc/PID/stat`` reads: 0.19 ms a server a poll; psutil's identity check still reads
    ``/proc/PID/stat`` twice (a new ``Process``, then the status): 0.036 ms, and 8% of the
    console's CPU under load with 7 servers (py-spy). Re-deriving the start time by hand was
    tried and reverted (it drifted from psutil's); psutil stays the judge of identity.
    """

    def __init__(self, pid: int, create_time: float, ticks: int | None = None) -> None:
        """Args:
        pid: The process.
        create_time: Its psutil ``create_time()`` when found (with pid, its identity when
            ``ticks`` is not known).
        ticks: Its start in clock ticks since boot: the identity the first look checks when
            given (a clock step since the process was found moves ``create_time``, not these).
        """
        self.pid = pid
        self.create_time = create_time
        self.ticks = ticks
        self._proc: psutil.Process | None = None
        self._watch: PidWatch | None = None

    def __call__(self) -> bool:
        """True while the process runs and is the same one (not a zombie)."""
        if self._watch is not None:
            return not self._watch.exited()
        watch = PidWatch.open(self.pid) if self._proc is None else None
        try:
            proc = self._proc
            if proc is None:
                proc = psutil.Process(self.pid)
                if self.ticks is not None:
                    if start_ticks(self.pid) != self.ticks:
                        return False
                elif abs(proc.create_time() - self.create_time) >= 0.05:
                    return False
                self._proc = proc
            elif not proc.is_running():  # psutil's identity: a reused pid reads as gone
                return False
            if proc.status() == psutil.STATUS_ZOMBIE:
                return False
            self._watch, watch = watch, None  # the process the pidfd was opened on
            return True
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            return False
        finally:
            if watch is not None:
                watch.close()


def describe_process(
    proc: psutil.Process, port: int, log_hint: str | None, found_by: str
) -> ServerProcess:
    """What can be read of a server's main process: argv, children, CUDA_VISIBLE_DEVICES, log
    (``log_hint``, else where its stdout points) and start ticks; an unreadable field is None
    or empty, never an error.

    Raises:
        psutil.NoSuchProcess: it is gone.
    """
    try:
        children = tuple(c.pid for c in proc.children(recursive=True))
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        children = ()
    try:
        cuda: str | None = proc.environ().get("CUDA_VISIBLE_DEVICES")
    except (psutil.NoSuchProcess, psutil.AccessDenied, OSError):
        cuda = None
    try:
        argv = tuple(proc.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        argv = ()
    return ServerProcess(
        pid=proc.pid,
        create_time=proc.create_time(),
        port=port,
        cmdline=argv,
        children=children,
        cuda_visible_devices=cuda,
        log_path=log_hint or stdout_path(proc.pid),
        found_by=found_by,
        start_ticks=start_ticks(proc.pid),
    )


def _listeners(ports: set[int]) -> dict[int, int]:
    """Map port -> pid of the listening socket; empty when the kernel table is not readable."""
    found: dict[int, int] = {}
    try:
        connections = psutil.net_connections(kind="tcp")
    except (psutil.AccessDenied, OSError):
        return found
    for conn in connections:
        if (
            conn.status == psutil.CONN_LISTEN
            and conn.laddr
            and conn.laddr.port in ports
            and conn.pid
        ):
            found.setdefault(conn.laddr.port, conn.pid)
    return found


def find_servers(
    ports: Iterable[int],
    log_hints: dict[int, str] | None = None,
    use_listeners: bool = True,
) -> dict[int, ServerProcess]:
    """Find the running server of each port.

    Args:
        ports: The fleet's ports.
        log_hints: Log path per port from the fleet definition (wins over /proc/PID/fd/1).
        use_listeners: Ask the kernel's socket table for ports no command line claimed.

    Returns:
        port -> ServerProcess for every port whose server runs; missing ports are absent.
    """
    wanted = set(ports)
    hints = log_hints or {}
    candidates: dict[int, list[psutil.Process]] = {}
    for proc in psutil.process_iter(["cmdline"]):
        argv = proc.info.get("cmdline") or []
        if not is_server_cmdline(argv):
            continue
        port = port_from_cmdline(argv)
        if port in wanted:
            candidates.setdefault(port, []).append(proc)
    result: dict[int, ServerProcess] = {}
    for port, procs in candidates.items():
        # A wrapper (bash -c, timeout, nohup) has the same words in its argv: keep the innermost.
        pids = {p.pid for p in procs}
        inner = [p for p in procs if not _has_descendant_in(p, pids)] or procs
        proc = min(inner, key=lambda p: p.pid)
        try:
            result[port] = describe_process(proc, port, hints.get(port), "cmdline")
        except psutil.NoSuchProcess:
            continue
    missing = wanted - set(result)
    if missing and use_listeners:
        for port, pid in _listeners(missing).items():
            try:
                proc = psutil.Process(pid)
                result[port] = describe_process(proc, port, hints.get(port), "listen")
            except psutil.NoSuchProcess:
                continue
    return result


def _has_descendant_in(proc: psutil.Process, pids: set[int]) -> bool:
    try:
        return any(c.pid in pids for c in proc.children(recursive=True))
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False

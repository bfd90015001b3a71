"""Checks before a launch, each with a message an operator can act on.

* the launch argv holds something SGLang would refuse (its own flag table says what and why);
* the port is still held (by whom: pid and command line);
* a server from an earlier run is still alive on this GPU or port (from the fleet record);
* other processes still hold memory on the GPU (NVML or simulated telemetry), but for the fleet's
  own servers of the other slots sharing its device (``tui.control.neighbours``).
"""

from __future__ import annotations

import errno
import socket
from collections.abc import Callable, Collection
from dataclasses import dataclass

import psutil

from tui.control.identity import IdentityMismatch, verify
from tui.control.neighbours import neighbours, on_device
from tui.profiles.flag_check import launch_problems
from tui.profiles.model import Profile
from tui.state.fleet_state import ProcessRecord, read_records

_TCP_TABLES = ("/proc/net/tcp", "/proc/net/tcp6")
"""The kernel's TCP tables (Linux): what ``psutil.net_connections`` reads its sockets from."""
_TCP_LISTEN = "0A"
"""The table's state code of a listening socket."""


@dataclass(frozen=True, slots=True)
class PortHolder:
    """Who listens on a port (pid None when the kernel does not say, e.g. another namespace)."""

    port: int
    """The port."""
    pid: int | None
    """Listening process."""
    cmdline: str
    """Its command line, or a placeholder."""


def port_holder(port: int, host: str = "127.0.0.1") -> PortHolder | None:
    """Who holds ``port`` (listening), or None when it is free to bind.

    Args:
        port: TCP port.
        host: the address the server will bind.

    Returns:
        The holder, or None.
    """
    # The bind attempt comes first: it is the truth about whether the server can bind (the
    # connection table can miss sockets, e.g. of other namespaces) and costs microseconds, where
    # reading the kernel's TCP tables took 13 ms a call here (1,600 rows of other suites'
    # TIME_WAIT sockets), 40-140 ms with a fleet's seven launches at once, on each GPU's way
    # from its stop to its launch. Only a port that is held is looked up, to name its holder.
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno not in (errno.EADDRINUSE, errno.EACCES):
                raise
        else:
            return None
    # psutil finds a socket's pid by reading every process's fds (30 ms a call on the 2-core
    # machine under tests, against 12 ms for reading the tables): ask it only when the tables
    # list a listener on the port, or cannot be read.
    try:
        conns = psutil.net_connections(kind="inet") if _listed(port) is not False else []
    except (psutil.AccessDenied, OSError):
        conns = []
    for conn in conns:
        if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port:
            return PortHolder(port, conn.pid, _cmdline(conn.pid))
    return PortHolder(port, None, "(unknown process)")


def _listed(port: int) -> bool | None:
    """Whether the kernel's TCP tables list a listening socket on ``port`` (any address).

    Returns:
        True or False; None when no table can be read (not Linux).
    """
    suffix = f":{port:04X}"
    readable = False
    for path in _TCP_TABLES:
        try:
            with open(path) as table:
                rows = table.read().splitlines()[1:]
        except OSError:
            continue
        readable = True
        for row in rows:
            fields = row.split(maxsplit=4)
            if len(fields) > 3 and fields[3] == _TCP_LISTEN and fields[1].endswith(suffix):
                return True
    return False if readable else None


def _cmdline(pid: int | None) -> str:
    if pid is None:
        return "(unknown process)"
    try:
        return " ".join(psutil.Process(pid).cmdline()) or psutil.Process(pid).name()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return "(exited)"


class PreflightError(RuntimeError):
    """A launch would collide with something still running; the message names it."""


def check_flags(profile: Profile, gpu: int) -> None:
    """Raise ``PreflightError`` when SGLang would refuse GPU ``gpu``'s launch argv.

    The profile loader already refuses such a profile; this guards profiles built in code.
    """
    problems = launch_problems(profile, [gpu])
    if problems:
        raise PreflightError(f"GPU {gpu}: " + "; ".join(str(p) for p in problems))


def check_port(port: int, host: str = "127.0.0.1", gpu: int | None = None) -> None:
    """Raise ``PreflightError`` when ``port`` is held, naming the holder's pid and command line."""
    holder = port_holder(port, host)
    if holder is None:
        return
    where = f"GPU {gpu}: " if gpu is not None else ""
    who = f"pid {holder.pid} ({holder.cmdline})" if holder.pid else holder.cmdline
    raise PreflightError(
        f"{where}port {port} is still held by {who}; stop it or choose another port"
    )


def stale_servers(
    gpu: int, port: int, records: dict[int, ProcessRecord] | None = None
) -> list[ProcessRecord]:
    """Recorded servers from an earlier run still alive on ``gpu`` or ``port``."""
    found = []
    for record in (read_records() if records is None else records).values():
        if record.gpu != gpu and record.port != port:
            continue
        try:
            if verify(record).alive:
                found.append(record)
        except IdentityMismatch:
            continue  # the pid is someone else's now: our server is gone
    return found


def check_stale(gpu: int, port: int) -> None:
    """Raise ``PreflightError`` when an earlier run's server still runs on this GPU or port."""
    stale = stale_servers(gpu, port)
    if stale:
        r = stale[0]
        raise PreflightError(
            f"GPU {gpu}: a server from an earlier run is still running (pid {r.pid}, GPU {r.gpu}, "
            f"port {r.port}, profile {r.profile or '?'}); stop it first"
        )


def check_gpu_free(
    gpu: int,
    gpu_pids: Callable[[int], Collection[int]],
    ignore: Collection[int] = (),
    device: int | None = None,
) -> None:
    """Raise ``PreflightError`` when processes other than ``ignore`` hold memory on the slot's
    device, besides the fleet's own servers of the other slots sharing it.

    Anything resident shrinks SGLang's measured free memory and so silently shrinks its KV pool:
    a neighbour of the fleet's is expected there (its memory is planned for: the preflight
    subtracts it), anything else is named and refused.

    Args:
        gpu: The slot.
        gpu_pids: Who holds memory on a device now.
        ignore: Pids expected there besides.
        device: The physical GPU it runs on (None: ``gpu``).
    """
    device = gpu if device is None else device
    held = set(gpu_pids(device)) - set(ignore)
    if not held:
        return
    near = [n for n in neighbours(gpu, device) if n.pids & held]
    others = sorted(held.difference(*(n.pids for n in near)))
    if others:
        named = ", ".join(f"pid {p} ({_cmdline(p)})" for p in others)
        besides = "".join(
            f"; {n.describe()} shares device {device} and is expected there" for n in near
        )
        raise PreflightError(
            f"{on_device(gpu, device)} still has processes holding memory: {named}{besides}"
        )

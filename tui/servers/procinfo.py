"""What the kernel says about a process that no clock step can change: its start in clock ticks
since boot, the boot it belongs to, the launch id in its environment, and the digest of its
command line (the identity of a server gpufleet adopted, which has no launch id).

Why not psutil's ``create_time``: it is wall-clock (``/proc/stat``'s ``btime``, which the kernel
moves with every clock step, plus the start ticks), so a step of the host's clock moves the
start time of every running process. Seen: a 24 s step made every server of the fleet fail its
identity check, and gpufleet stopped managing them. The start ticks (``/proc/PID/stat`` field
22) never change for the life of a process and, with the boot id, name it uniquely.

A time namespace (``unshare --time --boottime 1000``) moves them for its readers: the kernel adds
the reader's boottime offset to every start time it shows (``/proc/PID/stat``), so the same
server reads 100,000 ticks later from inside. ``start_ticks`` subtracts the reader's own offset
(``/proc/self/timens_offsets``): every reader, in any namespace, sees the host's ticks. Seen:
a console in such a namespace dropped the record of a live server ("no longer runs"). The boot
id is the kernel's and no namespace moves it.
"""

from __future__ import annotations

import functools
import hashlib
import os
import signal
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import psutil

LAUNCH_ID_ENV = "GPUFLEET_LAUNCH_ID"
"""Environment variable that marks every process of one launch (children inherit it)."""

_BOOT_ID = "/proc/sys/kernel/random/boot_id"
_TIMENS_OFFSETS = "/proc/self/timens_offsets"
_START_FIELD = 22
"""``starttime`` in proc(5)'s numbering of ``/proc/PID/stat`` (1-based, ``pid`` is 1)."""


def parse_start_ticks(stat: str) -> int:
    """The start time in clock ticks since boot, from the text of ``/proc/PID/stat``.

    The second field, the command name, is in parentheses and may itself hold spaces and
    parentheses (``prctl(PR_SET_NAME)`` takes any 15 bytes): the fields after it are counted
    from the *last* closing parenthesis.

    Raises:
        ValueError: the text is not a stat line.
    """
    close = stat.rfind(")")
    if close < 0 or "(" not in stat[:close]:
        raise ValueError("no command name in parentheses")
    rest = stat[close + 1 :].split()
    index = _START_FIELD - 3  # field 3 (state) is the first after the name
    if len(rest) <= index or not rest[index].isdigit():
        raise ValueError(f"no start time at field {_START_FIELD}")
    return int(rest[index])


def parse_boottime_offset_ns(text: str) -> int:
    """The boottime offset in nanoseconds, from the text of ``/proc/PID/timens_offsets``
    (``boottime <seconds> <nanoseconds>``; 0 when the line is missing or not numbers)."""
    for line in text.splitlines():
        words = line.split()
        if len(words) == 3 and words[0] == "boottime":
            try:
                return int(words[1]) * 1_000_000_000 + int(words[2])
            except ValueError:
                return 0
    return 0


@functools.cache
def boottime_offset_ticks() -> int:
    """This process's time namespace's boottime offset, in clock ticks (0 outside one, or on a
    kernel without time namespaces). Fixed for a process's life: a namespace's offsets cannot
    change once a process is in it."""
    try:
        with open(_TIMENS_OFFSETS, encoding="ascii") as handle:
            offset_ns = parse_boottime_offset_ns(handle.read())
    except (OSError, UnicodeDecodeError):
        return 0
    # Whole ticks: unshare's offsets are whole seconds. An offset that is not a whole number of
    # ticks could read one tick off, which the comparison would call another process.
    return offset_ns * os.sysconf("SC_CLK_TCK") // 1_000_000_000


def start_ticks(pid: int) -> int | None:
    """The start of ``pid`` in clock ticks since the host's boot, or None when it does not exist
    (or there is no ``/proc``, or its stat line cannot be read). The same number in any time
    namespace: the reader's boottime offset, which the kernel added, is taken off."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as handle:
            return parse_start_ticks(handle.read()) - boottime_offset_ticks()
    except (OSError, ValueError):
        return None


_EXIT_FIELD = 52
"""``exit_code`` in proc(5)'s numbering of ``/proc/PID/stat``: the status ``waitpid`` would
return, readable while the process is a zombie (Linux 3.5+)."""


def parse_exit_status(stat: str) -> str | None:
    """How a zombie died, from its ``/proc/PID/stat``: ``killed by SIGKILL``, ``exit code 1``
    (None when the process is not a zombie, or the line has no such field)."""
    close = stat.rfind(")")
    rest = stat[close + 1 :].split() if close >= 0 else []
    index = _EXIT_FIELD - 3
    if not rest or rest[0] != "Z" or len(rest) <= index or not rest[index].isdigit():
        return None
    status = int(rest[index])
    if status & 0x7F:
        number = status & 0x7F
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        return f"killed by {name}"
    return f"exit code {(status >> 8) & 0xFF}"


def exit_status(pid: int, ticks: int | None) -> str | None:
    """How ``pid`` died, while it is a zombie (its parent has not reaped it yet) and is still
    the process that started at ``ticks``; None when that cannot be known: once reaped (a
    process gpufleet did not parent is reaped by its own parent, or by init), the kernel keeps
    nothing of its end."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as handle:
            stat = handle.read()
    except OSError:
        return None
    try:
        if ticks is not None and parse_start_ticks(stat) != ticks:
            return None
    except ValueError:
        return None
    return parse_exit_status(stat)


@functools.cache
def boot_id() -> str:
    """This boot's id (the kernel's random UUID); "" where there is none to read."""
    try:
        with open(_BOOT_ID, encoding="ascii") as handle:
            return handle.read().strip()
    except (OSError, UnicodeDecodeError):
        return ""


DIGEST_PREFIX = "sha256:"
"""How ``cmdline_digest`` names its hash (a record says which digest it holds)."""


def cmdline_digest(argv: Sequence[str]) -> str:
    """A digest of a command line, each argument NUL-terminated as the kernel keeps them (so
    ``["a b"]`` and ``["a", "b"]`` differ).

    Args:
        argv: The command line, as ``psutil.Process.cmdline()`` gives it.

    Returns:
        ``sha256:<hex>``.
    """
    data = b"".join(arg.encode("utf-8", "surrogateescape") + b"\0" for arg in argv)
    return DIGEST_PREFIX + hashlib.sha256(data).hexdigest()


def read_cmdline_digest(pid: int) -> str | None:
    """``cmdline_digest`` of ``pid``'s command line now; None when it is gone or may not be
    read (another user's process), or has none (a zombie, a kernel thread)."""
    try:
        argv = psutil.Process(pid).cmdline()
    except (psutil.Error, OSError):
        return None
    return cmdline_digest(argv) if argv else None


EnvRead = Literal["gone", "denied", "empty"]
"""Why no launch id could be read: the process is gone, its environment may not be read (another
user's process), or it is empty (a process on its way out has no memory map left)."""


@dataclass(frozen=True, slots=True)
class LaunchIdRead:
    """The launch id in a process's environment, or why there is none to compare."""

    launch_id: str | None
    """The value of ``GPUFLEET_LAUNCH_ID`` (None: the variable is not set, or not read)."""
    problem: EnvRead | None = None
    """Why the environment was not read (None: it was)."""


ENV_SETTLE_S = 0.5
"""How long an empty environment is read again before it counts as empty. Why: a process reads
as having no environment for a moment at the end of its exec (seen: one read in three right
after ``Popen`` returned, under load), and again while it exits (its memory map is gone before
it becomes a zombie); the first resolves within milliseconds."""


def read_launch_id(
    pid: int, settle_s: float = ENV_SETTLE_S, variable: str = LAUNCH_ID_ENV
) -> LaunchIdRead:
    """Read ``GPUFLEET_LAUNCH_ID`` (or ``variable``: a pipeline job's id) from the environment
    ``pid`` started with.

    A refused read is "denied", never "not ours" nor "ours": the caller cannot verify. An empty
    environment is read again for up to ``settle_s`` (until it is there, or the process is gone)
    before "empty" is returned.
    """
    read = _read_launch_id(pid, variable)
    deadline = time.monotonic() + settle_s
    pause = threading.Event()
    while read.problem == "empty" and time.monotonic() < deadline:
        pause.wait(0.005)  # a poll with a deadline: nothing signals the end of an exec
        read = _read_launch_id(pid, variable)
    return read


def _read_launch_id(pid: int, variable: str) -> LaunchIdRead:
    try:
        environ = psutil.Process(pid).environ()
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return LaunchIdRead(None, "gone")
    except (psutil.AccessDenied, PermissionError):
        return LaunchIdRead(None, "denied")
    except OSError:
        return LaunchIdRead(None, "denied")
    if not environ:
        return LaunchIdRead(None, "empty")
    return LaunchIdRead(environ.get(variable))

"""Run a terminal program in a real pty and measure what it costs: CPU, memory, bytes to the tty.

The program gets a pseudo-terminal of a fixed size (the same kernel pty an SSH session or tmux
gives it); we read the master side and count every byte it writes (what an SSH link would
carry). CPU is the user+system time of the program's whole process tree over the measured
window (after a warm-up that is excluded), read from each process's CPU clock in nanoseconds
(``process_cpu_s``), and RSS is the peak of the tree's sum, sampled.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import select
import signal
import struct
import subprocess
import termios
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import psutil


@dataclass(frozen=True, slots=True)
class PtyCost:
    """What one program cost over the measured window."""

    seconds: float
    """Length of the measured window."""
    cpu_s: float
    """CPU seconds (user + system) of the process tree in the window."""
    peak_rss: int
    """Peak resident set size of the tree, bytes."""
    tty_bytes: int
    """Bytes written to the terminal in the window."""
    refreshes: int
    """Writes observed (bursts separated by idle time), a proxy for screen refreshes."""
    start_cpu_s: float = 0.0
    """CPU seconds of the tree from its start to the window (imports, first frames, warm-up)."""

    @property
    def cpu_per_minute(self) -> float:
        """CPU seconds per minute of wall time."""
        return self.cpu_s * 60.0 / self.seconds

    @property
    def bytes_per_second(self) -> float:
        """Terminal bytes per second."""
        return self.tty_bytes / self.seconds


def _tree(proc: psutil.Process) -> list[psutil.Process]:
    try:
        return [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return []


def process_cpu_s(pid: int) -> float:
    """CPU seconds (user + system, every thread, live or ended) of process ``pid``, in
    nanoseconds' resolution: the kernel's CPU clock of that process (``clock_getcpuclockid``'s
    id, ``CPUCLOCK_SCHED``).

    Why not psutil's ``cpu_times``: it counts 10 ms ticks, and a console at 0.6 CPU-s/min spends
    0.2 s in a 20 s window: one tick is 5 % of it, as much as the differences measured.

    Raises:
        OSError: no such process (or not ours to read).
    """
    clock = ((~pid << 3) | 2) & 0xFFFFFFFF  # MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED)
    return time.clock_gettime(clock - (1 << 32) if clock >= 1 << 31 else clock)  # a C int


def _cpu(procs: list[psutil.Process]) -> float:
    total = 0.0
    for p in procs:
        try:
            total += process_cpu_s(p.pid)
        except OSError:  # gone, or a kernel without the clock: psutil's ticks
            with contextlib.suppress(psutil.Error):
                t = p.cpu_times()
                total += t.user + t.system
    return total


def _rss(procs: list[psutil.Process]) -> int:
    total = 0
    for p in procs:
        with contextlib.suppress(psutil.Error):
            total += p.memory_info().rss
    return total


def measure(
    argv: Sequence[str],
    *,
    seconds: float,
    warmup: float,
    rows: int = 50,
    cols: int = 200,
    env: Mapping[str, str] | None = None,
    ready_marker: bytes | None = None,
    ready_timeout: float = 60.0,
    on_window: Callable[[int, bool], object] | None = None,
) -> PtyCost:
    """Run argv in a rows x cols pty; measure the window after warm-up (and ready_marker).

    Args:
        argv: the program (an argv list: no shell).
        seconds: length of the measured window.
        warmup: seconds to let it settle after start (or after ready_marker appears).
        rows: terminal rows.
        cols: terminal columns.
        env: extra environment.
        ready_marker: bytes whose appearance on the tty marks the start of the warm-up.
        ready_timeout: longest wait for ready_marker.
        on_window: called with the program's pid and True as the measured window opens, and
            with False as it closes (before the kill): a profiler attaches there.

    Returns:
        The measured cost. The program is killed (its process group) at the end.
    """
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    full_env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": str(cols), "LINES": str(rows)}
    full_env.update(env or {})
    proc = subprocess.Popen(
        list(argv),
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=full_env,
        start_new_session=True,
        close_fds=True,
    )
    os.close(slave)
    root = psutil.Process(proc.pid)
    try:
        seen = b""

        def pump(until: float, count: bool) -> tuple[int, int]:
            nonlocal seen
            total = writes = 0
            while (now := time.monotonic()) < until:
                ready, _, _ = select.select([master], [], [], min(0.1, until - now))
                if not ready:
                    continue
                try:
                    chunk = os.read(master, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                writes += 1
                total += len(chunk)
                if ready_marker is not None and not count:
                    seen = (seen + chunk)[-65536:]
            return total, writes

        if ready_marker is not None:
            deadline = time.monotonic() + ready_timeout
            while ready_marker not in seen and time.monotonic() < deadline:
                pump(time.monotonic() + 0.5, count=False)
            if ready_marker not in seen:
                raise RuntimeError(f"{argv[0]} never showed {ready_marker!r} on its terminal")
        pump(time.monotonic() + warmup, count=False)
        if on_window is not None:
            on_window(proc.pid, True)
        procs = _tree(root)
        cpu0, t0 = _cpu(procs), time.monotonic()
        peak = _rss(procs)
        end = t0 + seconds
        tty = writes = 0
        while time.monotonic() < end:
            n, w = pump(min(end, time.monotonic() + 1.0), count=True)
            tty += n
            writes += w
            procs = _tree(root)
            peak = max(peak, _rss(procs))
        cpu1, t1 = _cpu(procs), time.monotonic()
        if on_window is not None:
            on_window(proc.pid, False)
        return PtyCost(t1 - t0, cpu1 - cpu0, peak, tty, writes, cpu0)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        os.close(master)

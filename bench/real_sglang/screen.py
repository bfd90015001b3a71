"""A program in a real pty, its screen kept by a terminal emulator, each change timestamped.

The harness reads the console the way an operator does: what the screen shows, not the bytes
Textual writes (its line diff redraws only the changed cells of a row, so a word seldom arrives
whole in the byte stream). ``pyte`` is the emulator (pure Python; a bench-only need, carried to the
GPU machine as a wheel, not a dependency of gpufleet).
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
import threading
import time
from collections.abc import Callable, Mapping, Sequence

import pyte

Predicate = Callable[[str], bool]
"""A test on the whole screen's text (rows joined by newlines)."""


class PtyScreen:
    """Run ``argv`` in a pty of ``size`` (columns, rows); keep (time, screen) at each change."""

    def __init__(
        self, argv: Sequence[str], env: Mapping[str, str], size: tuple[int, int] = (160, 45)
    ) -> None:
        self.argv = list(argv)
        self.env = dict(env, TERM="xterm-256color", COLUMNS=str(size[0]), LINES=str(size[1]))
        self.size = size
        self.screen = pyte.Screen(*size)
        self.stream = pyte.ByteStream(self.screen)
        self.timeline: list[tuple[float, str]] = []
        self._mark = 0.0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._proc: subprocess.Popen[bytes] | None = None
        self._thread: threading.Thread | None = None
        self._master = -1

    def start(self) -> None:
        master, slave = pty.openpty()
        cols, rows = self.size
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self._proc = subprocess.Popen(
            self.argv,
            env=self.env,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            start_new_session=True,
        )
        os.close(slave)
        self._master = master
        self._thread = threading.Thread(target=self._pump, name="pty-pump", daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        while not self._stop.is_set():
            ready, _, _ = select.select([self._master], [], [], 0.05)
            if not ready:
                continue
            try:
                data = os.read(self._master, 65536)
            except OSError:
                return
            if not data:
                return
            self.stream.feed(data)
            text = "\n".join(self.screen.display)
            with self._lock:
                if not self.timeline or self.timeline[-1][1] != text:
                    self.timeline.append((time.monotonic(), text))

    def text(self) -> str:
        with self._lock:
            return self.timeline[-1][1] if self.timeline else ""

    def mark(self) -> None:
        """Start of the window that ``first_since_mark`` looks at."""
        self._mark = time.monotonic()

    def first_since_mark(self, pred: Predicate) -> float | None:
        return self.first_after(self._mark, pred)

    def first_after(self, since: float | None, pred: Predicate) -> float | None:
        """The time of the first screen at or after ``since`` that satisfies ``pred``."""
        if since is None:
            return None
        with self._lock:
            # the screen in force at ``since`` counts too: it was on show then
            before = [t for t, s in self.timeline if t <= since]
            candidates = self.timeline[len(before) - 1 if before else 0 :]
        for t, s in candidates:
            if pred(s):
                return max(t, since)
        return None

    def wait_for(self, pred: Predicate, limit_s: float) -> float | None:
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            if pred(self.text()):
                return time.monotonic()
            time.sleep(0.05)
        return None

    def stop(self) -> dict[str, object]:
        """Quit the program (its group, after 'q' had its chance); the last screen and counts."""
        last = self.text()
        if self._proc is not None and self._proc.poll() is None:
            with contextlib.suppress(OSError):
                os.killpg(self._proc.pid, signal.SIGTERM)
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self._proc.pid, signal.SIGKILL)
                self._proc.wait(10)
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2)
        with contextlib.suppress(OSError):
            os.close(self._master)
        return {"screens": len(self.timeline), "last_screen": last}

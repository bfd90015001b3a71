"""Drive a program in a real terminal: tmux with send-keys to type and capture-pane to read."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import pytest


def require_tmux() -> str:
    """Path of tmux, or skip (make test installs it; a bare pytest run may lack it)."""
    path = shutil.which("tmux")
    if path is None:
        pytest.skip("tmux is not installed (make test installs it)")
    return path


@dataclass
class TmuxSession:
    """A detached tmux session running one command in a terminal of a fixed size."""

    name: str
    """tmux session name (unique per test)."""
    socket: str
    """tmux -L socket name, so tests never touch the user's tmux server."""

    def _tmux(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=20
        )

    def screen(self, ansi: bool = False) -> str:
        """The visible screen as text (with its colour escapes when ``ansi``: focus shows there)."""
        flags = ["-e"] if ansi else []
        return self._tmux("capture-pane", "-p", *flags, "-t", self.name).stdout

    def send(self, *keys: str) -> None:
        """Send keys (tmux key names such as 'Enter', 'Escape', 'Down', or literal text)."""
        self._tmux("send-keys", "-t", self.name, *keys)

    def alive(self) -> bool:
        """Whether the session (and so the program) still runs."""
        return self._tmux("has-session", "-t", self.name).returncode == 0

    def pane_pid(self) -> int | None:
        """PID of the program in the pane."""
        out = self._tmux("display-message", "-p", "-t", self.name, "#{pane_pid}").stdout.strip()
        return int(out) if out.isdigit() else None

    def wait_for(
        self,
        predicate: Callable[[str], bool],
        timeout: float,
        interval: float = 0.2,
        ansi: bool = False,
    ) -> str:
        """Poll the screen until predicate(screen) holds; fail with the last screen if not."""
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen(ansi)
            if predicate(screen):
                return screen
            time.sleep(interval)
        raise AssertionError(f"screen never matched within {timeout:.0f}s; last screen:\n{screen}")

    def wait_exit(self, timeout: float) -> bool:
        """Wait until the program (and so the session) ends."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive():
                return True
            time.sleep(0.1)
        return False

    def kill(self) -> None:
        """End the session and its tmux server."""
        self._tmux("kill-server")


@contextmanager
def tmux_session(
    argv: Sequence[str], width: int, height: int, env: dict[str, str] | None = None
) -> Iterator[TmuxSession]:
    """Run argv in a fresh tmux server with a width x height terminal; always torn down."""
    require_tmux()
    session = TmuxSession(
        name=f"t{uuid.uuid4().hex[:8]}", socket=f"gpufleet-{uuid.uuid4().hex[:8]}"
    )
    full_env = {**os.environ, **(env or {}), "TERM": "xterm-256color"}
    # A terminal program must learn its size from its terminal: COLUMNS/LINES (pytest-xdist's
    # workers have COLUMNS=80 LINES=24) win over the pty in shutil.get_terminal_size, which
    # Textual asks, and a 200x50 session drew an 80x24 console.
    for name in ("COLUMNS", "LINES"):
        full_env.pop(name, None)
    # With more than one word after the options, tmux execs the argv directly (no shell). The
    # size is pinned: with tmux's default ``window-size latest`` and no
    # client attached, a later size recalculation falls back to ``default-size`` (80x24), and a
    # 200x50 test found itself in 80 columns mid-run. ";" alone in argv separates tmux commands.
    subprocess.run(
        [
            "tmux", "-L", session.socket, "-f", "/dev/null",
            "new-session", "-d", "-s", session.name, "-x", str(width), "-y", str(height), *argv,
            ";", "set-option", "-g", "window-size", "manual",
            ";", "set-option", "-g", "default-size", f"{width}x{height}",
            ";", "resize-window", "-t", session.name, "-x", str(width), "-y", str(height),
        ],
        check=True, env=full_env, timeout=20,
    )  # fmt: skip
    session._tmux("set-option", "-t", session.name, "remain-on-exit", "off")
    try:
        yield session
    finally:
        session.kill()

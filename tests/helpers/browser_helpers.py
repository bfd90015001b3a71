"""Drive ``gpufleet serve`` in a real headless Chromium (Debian's, through Playwright).

The page draws the console with xterm.js on a canvas, so the text is read from xterm's own
buffer: the test serves the page's script with the terminal object also kept on ``window`` (the
one change to what the browser runs), and reads every row back. Every request the page makes
outside this machine's loopback is aborted and recorded, so a test also proves the page needs
nothing from outside.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import psutil
import pytest

CHROMIUM = "/usr/bin/chromium"
"""Debian's chromium (``make test`` installs it; Playwright never downloads a browser here)."""

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
"""Flags that work here as root, with no network beyond loopback."""

URL_LINE = re.compile(r"gpufleet serve: open (http://\S+/\?token=(\S+))")


def require_chromium() -> str:
    """Path of Debian's chromium; in CI a missing one fails, elsewhere the test is skipped."""
    if os.path.exists(CHROMIUM) or shutil.which("chromium"):
        return CHROMIUM if os.path.exists(CHROMIUM) else str(shutil.which("chromium"))
    reason = "chromium is not installed (make test installs it: apt-get install chromium)"
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


def wait_until(condition: Callable[[], object], timeout: float, what: str) -> object:
    """Poll ``condition`` every 50 ms until it is truthy; fail naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.05)


@dataclass
class Served:
    """A running ``gpufleet serve``."""

    process: subprocess.Popen[bytes]
    """The server."""
    url: str
    """The URL it printed (with the token)."""
    token: str
    """The token."""
    output: Path
    """Its stdout and stderr."""
    consoles: set[int] = field(default_factory=set)
    """Console pids seen as its children."""

    @property
    def base(self) -> str:
        """``http://host:port`` without the token."""
        parts = urlsplit(self.url)
        return f"{parts.scheme}://{parts.netloc}"

    def console_pids(self) -> set[int]:
        """The consoles the server runs now (its children running ``tui console``)."""
        found = set()
        for child in psutil.Process(self.process.pid).children(recursive=False):
            try:
                if "console" in child.cmdline():
                    found.add(child.pid)
            except psutil.Error:
                continue
        self.consoles |= found
        return found


@contextmanager
def served(args: list[str], port: int, workdir: Path, timeout: float = 20.0) -> Iterator[Served]:
    """Run ``gpufleet serve --port PORT ARGS``; SIGTERM it afterwards and check that it and every
    console it started are gone."""
    output = workdir / "serve.log"
    argv = [sys.executable, "-m", "tui", "serve", "--port", str(port), *args]
    with output.open("wb") as sink:
        process = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT)
    served_: Served | None = None
    try:

        def printed() -> re.Match[str] | None:
            assert process.poll() is None, f"serve exited:\n{output.read_text()}"
            return URL_LINE.search(output.read_text())

        match = wait_until(printed, timeout, "the URL gpufleet serve prints")
        assert isinstance(match, re.Match)
        served_ = Served(process, match.group(1), match.group(2), output)
        yield served_
    finally:
        if served_ is not None:
            served_.console_pids()
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)  # our own child, by its Popen handle
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
                raise AssertionError(f"serve ignored SIGTERM:\n{output.read_text()}") from None
        if served_ is not None:
            alive = [pid for pid in served_.consoles if psutil.pid_exists(pid)]
            alive = [pid for pid in alive if psutil.Process(pid).status() != "zombie"]
            assert alive == [], f"consoles left running: {alive}"


TERMINAL_SCRIPT = re.compile(r"this\.terminal=new (\w+)\.Terminal\(")

READ_SCREEN = """() => {
  const term = window.__gpufleetTerminal;
  if (!term) { return ""; }
  const buffer = term.buffer.active;
  const rows = [];
  for (let y = 0; y < term.rows; y++) {
    const line = buffer.getLine(buffer.viewportY + y);
    rows.push(line ? line.translateToString(true) : "");
  }
  return rows.join("\\n");
}"""
"""Every row of the terminal as the page shows it."""


def guard_page(page: object, allowed_host: str) -> list[str]:
    """Abort every request that leaves ``allowed_host``; keep the terminal on ``window``.

    Returns:
        The list the aborted URLs are appended to.
    """
    from playwright.sync_api import Page, Route

    assert isinstance(page, Page)
    outside: list[str] = []

    def guard(route: Route) -> None:
        if urlsplit(route.request.url).hostname == allowed_host:
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    def expose_terminal(route: Route) -> None:
        response = route.fetch()
        script, count = TERMINAL_SCRIPT.subn(
            r"this.terminal=window.__gpufleetTerminal=new \1.Terminal(", response.text()
        )
        assert count == 1, "textual-serve's script changed: the terminal cannot be found"
        route.fulfill(response=response, body=script)

    page.route("**/*", guard)
    page.route("**/static/js/textual.js", expose_terminal)  # the later route is asked first
    return outside


def screen_text(page: object) -> str:
    """The terminal's rows, as text."""
    from playwright.sync_api import Page

    assert isinstance(page, Page)
    return str(page.evaluate(READ_SCREEN))


def keep_artefact(path: Path) -> None:
    """Copy ``path`` into ``$GPUFLEET_ARTEFACTS`` when it is set (CI keeps that folder)."""
    target = os.environ.get("GPUFLEET_ARTEFACTS")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, Path(target) / path.name)

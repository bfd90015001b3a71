"""The headless alert watcher end to end: ``gpufleet alerts --watch`` on a simulated server, a
webhook served on loopback; the server killed by the test: the webhook receives the crash within
its rule's time, and the journal has it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from sim_helpers import ROOT, running_sim, wait_until
from webhook_helpers import webhook

from tui import paths
from tui.ops.journal import read_journal

FOR_S = 0.0
"""The crash rule's ``for_s`` in this test (fires at the first poll that sees it)."""
POLL_S = 0.5


def test_the_webhook_receives_the_crash_of_a_killed_server(tmp_path: Path) -> None:
    args = ["--sim-speed", "20", "--sim-startup-seconds", "1", "--enable-metrics"]
    with webhook() as (url, hook), running_sim(args, tmp_path) as sim:
        settings = paths.settings_file()
        settings.parent.mkdir(parents=True, exist_ok=True)
        settings.write_text(
            f'[alerts]\nwebhook = "{url}"\nwebhook_timeout_s = 2\n'
            f"[alerts.crashed]\nfor_s = {FOR_S}\nclear_s = 0\n"
            "[alerts.capped]\nenabled = true\nfor_s = 0\n"
        )
        argv = [sys.executable, "-m", "tui", "alerts", "--watch", str(POLL_S),
                "--ports", str(sim.port), "--gpus", "0"]  # fmt: skip
        watcher = subprocess.Popen(
            argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        try:
            # The demo model's concurrency is capped by its Mamba cache: that alert says the
            # watcher sees the server ready (a crash is a server that was serving).
            deadline = time.monotonic() + 60
            while not any(b["rule"] == "capped" for b in hook.bodies):
                assert time.monotonic() < deadline and watcher.poll() is None, watcher.stderr
                hook.received.wait(0.5)
            os.killpg(sim.proc.pid, signal.SIGKILL)
            killed = time.monotonic()
            while not any(b["rule"] == "crashed" for b in hook.bodies):
                assert time.monotonic() - killed < FOR_S + 15, hook.bodies
                hook.received.clear()
                hook.received.wait(0.5)
            took = time.monotonic() - killed
        finally:
            watcher.send_signal(signal.SIGINT)
            out, err = watcher.communicate(timeout=30)
    crash = next(b for b in hook.bodies if b["rule"] == "crashed")
    assert crash["state"] == "firing" and crash["gpu"] == 0
    assert crash["message"].startswith(f"GPU 0 server on :{sim.port} crashed: ")
    assert took < FOR_S + 15
    assert watcher.returncode == 130 and "Traceback" not in err
    assert "FIRING    crashed: GPU 0 server on" in out
    journalled = read_journal(paths.alerts_journal_file()).entries
    assert {(e.detail["rule"], e.verdict) for e in journalled} >= {("crashed", "firing")}


IGNORING_SIGINT = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
    "os.execv(sys.executable, [sys.executable, '-m', 'tui', *sys.argv[1:]])"
)
"""Runs gpufleet with SIGINT ignored, as a background job of a script inherits it (``make test
&``, ``gpufleet alerts --watch &`` in a shell script): exec keeps an ignored signal ignored."""


def test_sigint_ends_the_watcher_at_once_even_inherited_ignored_and_a_webhook_hung(
    tmp_path: Path,
) -> None:
    """The watcher's own SIGINT: it ended only through asyncio.run's handler, which is not
    installed where SIGINT came ignored (it never ended); and the webhook that never answers
    holds its alert: the watcher gives it a second, says it was not posted, and exits 130."""
    args = ["--sim-speed", "20", "--sim-startup-seconds", "1", "--enable-metrics"]
    with socket.socket() as hung, running_sim(args, tmp_path) as sim:
        hung.bind(("127.0.0.1", 0))
        hung.listen(8)  # takes the connection, never answers
        settings = paths.settings_file()
        settings.parent.mkdir(parents=True, exist_ok=True)
        settings.write_text(
            f'[alerts]\nwebhook = "http://127.0.0.1:{hung.getsockname()[1]}/hook"\n'
            "webhook_timeout_s = 30\n[alerts.capped]\nenabled = true\nfor_s = 0\n"
        )
        argv = [sys.executable, "-c", IGNORING_SIGINT, "alerts", "--watch", str(POLL_S),
                "--ports", str(sim.port), "--gpus", "0"]  # fmt: skip
        watcher = subprocess.Popen(
            argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        try:

            def fired() -> bool:
                journalled = read_journal(paths.alerts_journal_file()).entries
                return any(e.detail["rule"] == "capped" for e in journalled)

            # journalled, then handed to the webhook's thread, which waits on the hung endpoint
            assert wait_until(lambda: fired() or watcher.poll() is not None, 60), "no alert"
            sent = time.monotonic()
            watcher.send_signal(signal.SIGINT)
            out, err = watcher.communicate(timeout=30)
            took = time.monotonic() - sent
        finally:
            if watcher.poll() is None:
                watcher.kill()
                watcher.communicate()
    assert watcher.returncode == 130 and "Traceback" not in err, err
    assert "FIRING    capped: GPU 0" in out
    assert "1 alert(s) not posted to the webhook" in err
    assert took < 10  # its grace (1 s) and a second, far under the webhook's 30 s timeout

"""The headless alert watcher end to end: ``gpufleet alerts --watch`` on a simulated server, a
webhook served on loopback; the server killed by the test: the webhook receives the crash within
its rule's time, and the journal has it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from sim_helpers import ROOT, running_sim
from test_ops_alerts import webhook

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

"""Quit -> Stop fleet in a real terminal (tmux) after the clock stepped and with a record that
names a stranger (issue 31, part A): the console stays open while a server it could not stop
still runs, says which and why, and closes once a retry stopped everything.

Measured before: with every recorded start time 24 s off, Stop fleet exited 0 in 2 s and left
6 of 7 servers running.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from operator_helpers import cleaned, free_port_run, leftovers, pid_alive
from repo_paths import ROOT
from tmux_helpers import require_tmux, tmux_session

from tui import paths
from tui.state.fleet_state import put_record, read_records

pytestmark = [pytest.mark.tmux, pytest.mark.timeout(180)]

GPUS = 2
READY = re.compile(r"ready\s+:(\d+) pid (\d+)")
"""A panel that says ready (its port and pid)."""


def test_stop_fleet_stays_open_on_a_refusal_then_a_retry_stops_everything(
    isolated_state: Path,
) -> None:
    require_tmux()
    base = free_port_run(GPUS)
    ports = list(range(base, base + GPUS))
    argv = [
        sys.executable, "-m", "tui", "demo", "--gpus", str(GPUS), "--speed", "200",
        "--base-port", str(base), "--no-pipeline",
    ]  # fmt: skip
    env = {paths.STATE_ENV: str(isolated_state), paths.PROFILES_ENV: str(ROOT / "profiles")}
    stranger = subprocess.Popen(["sleep", "2006"], start_new_session=True)
    try:
        with cleaned(isolated_state, ports), tmux_session(argv, 120, 32, env) as term:
            term.wait_for(lambda s: len(READY.findall(s)) >= GPUS, 90)
            servers = read_records()
            assert sorted(r.port for r in servers.values()) == ports
            # The host's clock stepped +24 s (every recorded wall-clock start moves), and GPU
            # 0's record now names a stranger (another start, no launch id).
            state = paths.fleet_state_file()
            doc = json.loads(state.read_text())
            for entry in doc["gpus"].values():
                entry["server"]["create_time"] += 24.0
            state.write_text(json.dumps(doc))
            put_record(replace(read_records()[0], pid=stranger.pid, pgid=stranger.pid))

            term.send("q")
            term.wait_for(lambda s: "Quit the console?" in s, 20)
            term.send("s")
            screen = term.wait_for(lambda s: "The fleet was not stopped" in s, 60)
            assert "refused on GPU 0" in screen and f"pid {stranger.pid}" in screen
            assert term.alive()  # it did not quit while a server it could not stop runs
            assert pid_alive(servers[0].pid) and not pid_alive(servers[1].pid)
            assert pid_alive(stranger.pid)

            term.send("r")  # retry: GPU 0's server holds its port, known by its launch id
            assert term.wait_exit(60), f"the console did not exit:\n{term.screen()}"
        assert not pid_alive(servers[0].pid) and pid_alive(stranger.pid)
        assert leftovers(isolated_state, ports) == []
    finally:
        stranger.kill()
        stranger.wait(timeout=10)

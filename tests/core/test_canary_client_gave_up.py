"""A canary whose client gave up on its restart is not measured (real processes, real HTTP).

The issue's fleet: three simulated GPUs, each fed by its own closed-loop client that gives up
when its server goes away (an operator's script that does not reconnect, ``bench.closed_loop``).
``gpufleet canary`` of the profile already running, on GPU 0, read ``worse: canary GPU 0 0 tok/s
vs control mean 36,750 tok/s per GPU: -100.0%``, with an interval beyond -100%: the canary had
no load at all. Now the verdict reads the load and says so; the journal keeps it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from rollout_helpers import SimFleet, sim_fleet

from bench.simfleet import ROOT
from tui.ops.journal import read_journal
from tui.retune.counters import parse_counter
from tui.rollout.sampling import QUEUED_GAUGE, RUNNING_GAUGE

pytestmark = [pytest.mark.timeout(240)]

SPEED = 10.0
CLIENTS = 24
"""Requests each client keeps in flight: above the baseline's 16 running, so each queues."""


def held(port: int) -> float:
    """Running + queued on one server now (0 when it does not answer)."""
    try:
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2).text
    except httpx.HTTPError:
        return 0.0
    return (parse_counter(text, RUNNING_GAUGE) or 0.0) + (parse_counter(text, QUEUED_GAUGE) or 0.0)


@pytest.fixture()
def fed_fleet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SimFleet]:
    monkeypatch.setenv("GPUFLEET_STATE_DIR", str(tmp_path / "state"))
    stop = tmp_path / "stop-clients"
    with sim_fleet(tmp_path, 3, SPEED) as fleet:
        clients = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "bench.closed_loop",
                    str(port),
                    "--clients",
                    str(CLIENTS),
                    "--max-new",
                    "2048",
                    "--out",
                    str(tmp_path / f"client-{port}.json"),
                    "--stop-file",
                    str(stop),
                ],
                cwd=ROOT,
                stdout=subprocess.DEVNULL,
            )
            for port in fleet.ports
        ]
        try:
            deadline = time.monotonic() + 60
            while min(held(p) for p in fleet.ports) < CLIENTS - 2:
                assert time.monotonic() < deadline, "the clients did not load every server"
                time.sleep(0.2)  # a poll with a deadline: the servers' gauges
            yield fleet
        finally:
            stop.touch()
            for client in clients:
                try:
                    client.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    client.kill()
                    client.wait()


def test_a_canary_whose_client_gave_up_is_not_measured(fed_fleet: SimFleet, tmp_path: Path) -> None:
    fleet = fed_fleet
    args = [
        *("--gpu", "0", "--window", "3", "--warmup", "1", "--max-window", "6"),
        *("--interval", "0.5", "--min-intervals", "4", "--baseline", "2", "--settle", "0"),
        *("--timeout", "60", "--term-timeout", "3", "--release-timeout", "20"),
    ]
    done = subprocess.run(
        [sys.executable, "-m", "tui", "canary", str(fleet.files["baseline"]), *args],
        cwd=ROOT,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    print(done.stdout[-3000:], done.stderr[-2000:])
    # Its client kept sending through the drain (SGLang accepts while it drains): what the
    # server held when the deadline came is lost, and the canary says so with exit 3.
    assert done.returncode == 3, done.stderr
    said = done.stdout
    assert "in-flight requests lost (exit 3)" in said
    assert "not measured: the load changed (the canary GPU was offered 0 requests against " in said
    assert "did its client give up on the restart?" in said
    assert "worse" not in said and "-100.0%" not in said
    # the canary's server is up again and empty; its controls still hold their clients' load
    assert held(fleet.ports[0]) == 0.0 and min(held(p) for p in fleet.ports[1:]) > CLIENTS / 2
    (entry,) = [e for e in read_journal().entries if e.type == "canary"]
    assert entry.verdict == "not measured" and entry.summary.startswith("not measured: the load")
    assert entry.detail["load_change"]["idle"] is False
    assert entry.detail["load"]["canary_offered"] == 0.0
    gave_up = json.loads((tmp_path / f"client-{fleet.ports[0]}.json").read_text())
    assert gave_up["refused"] >= 1  # its client met the restart and gave up

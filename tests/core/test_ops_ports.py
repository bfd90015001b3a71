"""Ports belong to the fleet: a canary, a relaunch or a rollout of a profile written for other
ports keeps every GPU on the port the console and the pipeline watch (issue 14).

A real 3-GPU simulated fleet under a real pipeline. The candidate profile's file says other
ports; after each operation the fleet state, the listening socket, the console's monitor and the
pipeline all agree on the fleet's port, and nothing listens on the file's.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from rollout_helpers import PipelineRun, SimFleet, pipeline, sim_fleet, wait_done_at_least

from bench.simfleet import AGGRESSIVE, free_ports, sim_profile_text
from tui.fleet.monitor import FleetMonitor
from tui.fleet.snapshot import ServerState
from tui.gpu.simulated import SimulatedSource
from tui.ops.demo import spec_for_profile
from tui.ops.service import FleetOps, OpsOptions
from tui.profiles import load_profile
from tui.retune.options import ApplyOptions
from tui.rollout.canary import CanaryOptions
from tui.rollout.rollout import RolloutOptions
from tui.state.fleet_state import read_fleet, read_records

SPEED = 20.0
FAST = ApplyOptions(timeout_s=60, release_timeout_s=20, measure=False)
CANARY = CanaryOptions(
    window_s=2.0,
    warmup_s=0.5,
    max_window_s=3.0,
    interval_s=0.25,
    min_intervals=4,
    baseline_s=0.5,
    settle_s=1.0,
    apply=FAST,
)


@pytest.fixture()
def loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[SimFleet, PipelineRun, Path]]:
    monkeypatch.setenv("GPUFLEET_STATE_DIR", str(tmp_path / "state"))
    with (
        sim_fleet(tmp_path, 3, SPEED) as fleet,
        pipeline(tmp_path, fleet.urls, prompts=20_000, max_tokens=2000) as run,
    ):
        moved = tmp_path / "moved.toml"
        elsewhere = free_ports(3)
        moved.write_text(
            sim_profile_text(
                "t-moved", fleet.gpus, elsewhere, str(tmp_path / "logs"), AGGRESSIVE, SPEED
            )
        )
        wait_done_at_least(run, 20, timeout=60)
        yield fleet, run, moved


def listening(port: int) -> bool:
    try:
        httpx.get(f"http://127.0.0.1:{port}/model_info", timeout=2.0)
        return True
    except httpx.HTTPError:
        return False


def status(run: PipelineRun) -> dict[str, dict[str, Any]]:
    doc = json.loads(run.status.read_text())
    return {str(s["url"]): s for s in doc["servers"]}


async def agree(fleet: SimFleet, run: PipelineRun, moved: Path) -> None:
    """Fleet state, sockets, the console's monitor and the pipeline agree on the fleet's ports."""
    records = read_records()
    file_ports = load_profile(moved).ports
    for gpu, port in zip(fleet.gpus, fleet.ports, strict=True):
        assert records[gpu].port == port and read_fleet()[gpu].port == port
        assert listening(port) and not listening(file_ports[gpu])
    monitor = FleetMonitor(
        spec_for_profile(load_profile(fleet.files["baseline"])), SimulatedSource()
    )
    try:
        snapshot = await monitor.poll()
        for _ in range(20):
            if all(p.server and p.server.state == ServerState.READY for p in snapshot.panels):
                break
            snapshot = await monitor.poll()
    finally:
        await monitor.aclose()
    for panel in snapshot.panels:
        assert panel.server is not None and panel.server.state == ServerState.READY
        assert panel.server.pid == records[panel.gpu_index].pid
    before = {url: int(s["done"]) for url, s in status(run).items()}
    wait_done_at_least(run, int(json.loads(run.status.read_text())["done"]) + 30, timeout=60)
    # The pipeline takes a relaunched server back after its /health answers (>= 1 s) and a
    # backoff: the last GPU a rollout relaunched may still be on its way back when 30 more
    # prompts are done on the others.
    deadline = time.monotonic() + 60
    while not all(status(run)[url]["healthy"] is True for url in fleet.urls):
        assert time.monotonic() < deadline, f"not every server healthy: {status(run)}"
        await asyncio.sleep(0.2)
    after = status(run)
    for url in fleet.urls:
        assert after[url]["healthy"] is True
    assert sum(int(s["done"]) for s in after.values()) > sum(before.values())


async def test_canary_relaunch_and_rollout_keep_every_gpu_on_the_fleets_port(
    loaded: tuple[SimFleet, PipelineRun, Path],
) -> None:
    fleet, run, moved = loaded
    ops = FleetOps(options=OpsOptions(apply=FAST, canary=CANARY))
    fitted = ops.load(str(moved))
    assert fitted.ports == tuple(fleet.ports)  # what the dialogs name is what will run
    assert load_profile(moved).ports != fitted.ports

    canary = await ops.canary(str(moved), 2)
    assert canary.report is not None and canary.report.ok, canary.describe()
    assert read_records()[2].profile == "t-moved"
    await agree(fleet, run, moved)

    await ops.relaunch([2])
    assert read_records()[2].profile == "t-moved"
    await agree(fleet, run, moved)

    result = await ops.rollout(
        str(moved), 1, options=replace(RolloutOptions(), apply=FAST, measure_cost=False)
    )
    assert result.ok, result.describe()
    assert result.skipped == (2,)  # the canary GPU already runs the fitted profile
    assert {r.profile for r in read_records().values()} == {"t-moved"}
    await agree(fleet, run, moved)

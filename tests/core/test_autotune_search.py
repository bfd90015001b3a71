"""The autotune search on a small simulated fleet under the real pipeline (real processes).

Three GPUs, the seed's baseline, sim speed 10. Each search has a tiny space, so the test knows
what it must do: a candidate the preflight rejects is never launched (no server, no canary in
the journal); a candidate that regresses is rolled back (the canary GPU is on the incumbent
again); a better one is adopted by a rollout, with a pause and a resume on the way; a stop
during a canary of a detached search (``gpufleet autotune start --detach``, then ``stop``)
cancels it and leaves every GPU on the incumbent.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from rollout_helpers import PipelineRun, SimFleet, pipeline, sim_fleet, wait_done_at_least

from tui import paths
from tui.autotune import cli as autotune_cli
from tui.autotune.budget import Budget
from tui.autotune.options import AutotuneOptions
from tui.autotune.search import Autotuner
from tui.autotune.space import space_from
from tui.autotune.status import holder_alive, read_status, request
from tui.control.stop_release import StopTimeouts
from tui.ops.events import OpEvent
from tui.ops.journal import read_journal
from tui.ops.service import FleetOps, OpsOptions
from tui.retune.events import GpuReady
from tui.retune.options import ApplyOptions
from tui.rollout.canary import CanaryOptions
from tui.rollout.fleet_verdict import VerdictWindows
from tui.rollout.rollout import RolloutOptions
from tui.state.fleet_state import read_fleet

SPEED = 10.0
GPUS = 3
APPLY = ApplyOptions(timeout_s=60, release_timeout_s=20, measure=False)
CANARY = CanaryOptions(
    window_s=6.0,
    warmup_s=3.5,  # the pipeline takes the relaunched GPU back after /health (>= 1 s) + backoff
    max_window_s=12.0,
    interval_s=0.5,
    min_intervals=6,
    margin=0.05,
    baseline_s=2.0,
    settle_s=4.0,
    apply=APPLY,
)
ROLLOUT = RolloutOptions(
    apply=APPLY, interval_s=0.5, baseline_s=1.0, settle_s=2.0, verdict=VerdictWindows(window_s=0)
)
"""The search's rollouts take no fleet verdict here: these tests judge the search."""


@pytest.fixture()
def fleet(tmp_path: Path) -> Iterator[tuple[SimFleet, PipelineRun]]:
    with (
        sim_fleet(tmp_path, GPUS, SPEED) as sims,
        pipeline(tmp_path, sims.urls, prompts=50_000, max_tokens=3000) as run,
    ):
        wait_done_at_least(run, 30, timeout=30)
        yield sims, run


def ops() -> FleetOps:
    stop = StopTimeouts(drain_s=5.0, kill_s=5.0, release_s=20.0)
    return FleetOps(options=OpsOptions(apply=APPLY, stop=stop, canary=CANARY), by="autotune")


def options(*knobs: tuple[str, tuple[float, ...]], max_regression: float = 0.9) -> AutotuneOptions:
    return AutotuneOptions(
        space=space_from([(k, tuple(v)) for k, v in knobs]),
        budget=Budget(wall_s=300.0, explore_gpu_s=500.0, max_regression=max_regression),
        gpu=0,
        canary=CANARY,
        rollout=ROLLOUT,
        poll_s=0.1,
    )


def on_baseline(gpus: range) -> None:
    state = read_fleet()
    for gpu in gpus:
        assert state[gpu].current_name == "t-baseline", (gpu, state[gpu].current_name)
        server = state[gpu].server
        assert server is not None and psutil.pid_exists(server.pid)


async def test_rejected_never_launched_and_regression_rolled_back(
    fleet: tuple[SimFleet, PipelineRun],
) -> None:
    _, run = fleet
    # 0.35 and 0.99 of memory do not fit (no KV room; CUDA OOM); 4 running requests fit and
    # are about 3x slower than the baseline's 16.
    # A regression beyond 40% ends the search (after the rollback).
    opts = options(
        ("mem_fraction_static", (0.35, 0.88, 0.99)),
        ("max_running_requests", (4,)),
        max_regression=0.4,
    )
    launched: list[str] = []

    def sink(event: OpEvent) -> None:
        if isinstance(event, GpuReady):
            launched.append(event.report.profile)

    result = await Autotuner(ops(), opts, sink).run()
    print(result.phase, result.reason, [(r.key, r.decision, r.why) for r in result.records])
    assert result.phase == "finished" and result.reason.startswith("regression budget")
    by_key = {r.key: r for r in result.records}
    for key in ("mem_fraction_static=0.35", "mem_fraction_static=0.99"):
        assert by_key[key].decision == "rejected" and not by_key[key].launched
        assert "does not fit" in by_key[key].why
    worse = by_key["max_running_requests=4"]
    assert worse.decision == "dropped" and worse.verdict == "worse", worse
    assert worse.rel_high is not None and worse.rel_high < 0
    # Only the regressing candidate ever ran, then the incumbent again on the canary GPU.
    assert launched == [worse.profile, "t-baseline"]
    on_baseline(range(GPUS))
    entries = read_journal().entries
    canaries = [e for e in entries if e.type == "canary"]
    assert [e.target for e in canaries] == [worse.profile]
    rejected = [e for e in entries if e.type == "autotune-candidate" and e.refused]
    assert {e.detail["key"] for e in rejected} == {
        "mem_fraction_static=0.35",
        "mem_fraction_static=0.99",
    }
    assert all(e.gpus == () for e in rejected)
    summary = entries[-1]
    assert summary.type == "autotune-summary" and summary.target == "t-baseline"
    assert summary.lost_gpu_seconds is not None and summary.lost_gpu_seconds > 0
    assert run.proc.poll() is None, "the pipeline kept running"


async def test_a_better_line_is_followed_then_adopted_by_one_rollout_after_pause_and_resume(
    fleet: tuple[SimFleet, PipelineRun],
) -> None:
    # 80 Mamba slots run 16 requests, 120 run 24, 160 run 32: each step up is better, so the
    # line search goes on to 160 on the canary GPU and adopts it with ONE rollout.
    opts = options(("max_mamba_cache_size", (80, 120, 160)))
    paused: list[bool] = []

    def sink(event: OpEvent) -> None:
        # Pause while the first canary runs: it takes effect after it, between steps.
        if isinstance(event, GpuReady) and event.gpu == 0 and not paused:
            paused.append(True)
            request("pause")

    task = asyncio.create_task(Autotuner(ops(), opts, sink).run())
    await _until(lambda: (read_status() or {}).get("phase") == "paused", 90)
    doc = read_status()
    assert doc is not None and [h["verdict"] for h in doc["history"]] == ["better"]
    await asyncio.sleep(1.0)
    assert (read_status() or {}).get("phase") == "paused" and not task.done()
    request("resume")
    result = await asyncio.wait_for(task, 150)
    print([(r.key, r.decision, r.why, r.relative) for r in result.records])
    first, kept = result.records
    assert first.key == "max_mamba_cache_size=120" and first.decision == "superseded"
    assert (first.index, kept.index) == (1, 2) and first.profile != kept.profile
    assert f"#{kept.index}, further along the same move" in first.why
    assert kept.key == "max_mamba_cache_size=160" and kept.decision == "kept"
    assert kept.verdict == "better" and (kept.rel_low or 0) > 0
    assert (kept.relative or 0) > (first.relative or 0)
    assert result.incumbent == kept.profile and result.phase == "finished"
    assert "local optimum" in result.reason
    state = read_fleet()
    assert {state[g].current_name for g in range(GPUS)} == {kept.profile}
    doc = read_status()
    assert doc is not None and doc["phase"] == "finished"
    assert doc["incumbent"]["knobs"]["max_mamba_cache_size"] == 160
    types = [e.type for e in read_journal().entries]
    assert types.count("canary") == 2 and types.count("rollout") == 1  # one rollout, not two
    assert types.index("canary") < types.index("rollout") < types.index("autotune-summary")


def test_detached_search_stopped_during_a_canary_leaves_the_fleet_on_the_incumbent(
    fleet: tuple[SimFleet, PipelineRun], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["start", "--detach", "--knob", "max_mamba_cache_size=80,120", "--gpu", "0"]
    argv += ["--window", "6", "--max-window", "12", "--warmup", "3.5", "--interval", "0.5"]
    argv += ["--min-intervals", "6", "--margin", "0.05", "--baseline", "2", "--settle", "4"]
    argv += ["--timeout", "60", "--release-timeout", "20", "--term-timeout", "5"]
    argv += ["--wall", "300", "--explore-gpu-seconds", "500", "--max-regression", "0.9"]
    assert autotune_cli.main(argv) == 0
    assert "autotune search started (pid" in capsys.readouterr().out
    doc = read_status()
    assert doc is not None and holder_alive(doc)
    try:
        # The canary GPU is up on the candidate and measuring: the operator stops the search.
        doc = _poll(lambda d: d.get("canary_up") is True, 90)
        assert doc["phase"] == "canary" and doc["current"]["key"] == "max_mamba_cache_size=120"
        assert autotune_cli.main(["stop"]) == 0
        doc = _poll(lambda d: d.get("phase") == "stopped" and not holder_alive(d), 60)
    finally:
        _kill_search()
    (stopped,) = doc["candidates"]
    assert stopped["decision"] == "stopped" and stopped["launched"]
    on_baseline(range(GPUS))
    entries = read_journal().entries
    assert not [e for e in entries if e.type == "canary"], "the canary was cancelled, not run"
    assert entries[-1].type == "autotune-summary" and entries[-1].target == "t-baseline"
    assert autotune_cli.main(["status"]) == 0
    assert "autotune: stopped" in capsys.readouterr().out


def _poll(check: Callable[[dict[str, Any]], bool], timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    doc: dict[str, Any] = {}
    while time.monotonic() < deadline:
        doc = read_status() or {}
        if doc and check(doc):
            return doc
        time.sleep(0.1)
    log = paths.autotune_dir() / "search.log"
    raise AssertionError(f"status not reached in {timeout} s: {doc}\n{log.read_text()[-3000:]}")


def _kill_search() -> None:
    """Teardown: a search process still alive (verified by pid and start time) is killed."""
    doc = read_status()
    if doc is not None and holder_alive(doc):
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(doc["pid"]), signal.SIGKILL)


async def _until(check: object, timeout: float) -> None:
    assert callable(check)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not check():
        assert loop.time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.05)

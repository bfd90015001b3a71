"""Rolling rollout on a simulated fleet (real processes): the job goes on, a failure stops it.

(d) On 3 GPUs under the real pipeline, the seed's aggressive profile rolls out one GPU at a
time, each verified; the pipeline never stops and its outputs hold every prompt exactly once.
(e) On 4 GPUs, a profile whose GPU 2 override does not fit: GPUs 0 and 1 move, GPU 2 fails (OOM)
and is relaunched on the old profile, GPU 3 is never touched, the journal says so, and
``--rollback`` walks GPU 1 then GPU 0 back.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from rollout_helpers import PipelineRun, SimFleet, pipeline, sim_fleet, wait_done_at_least

from tui.ops.cli import rollout as rollout_cli
from tui.ops.journal import read_journal
from tui.ops.service import FleetOps
from tui.profiles import load_profile
from tui.retune.options import ApplyOptions
from tui.rollout.fleet_verdict import VerdictWindows
from tui.rollout.rollout import RolloutOptions, rollout_plan
from tui.state.fleet_state import read_records, read_running

SPEED = 20.0


TOTAL = 2000


@pytest.fixture()
def loaded_fleet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[SimFleet, PipelineRun]]:
    monkeypatch.setenv("GPUFLEET_STATE_DIR", str(tmp_path / "state"))
    with (
        sim_fleet(tmp_path, 3, SPEED) as fleet,
        pipeline(tmp_path, fleet.urls, prompts=TOTAL, max_tokens=2500) as run,
    ):
        wait_done_at_least(run, 20, timeout=30)
        yield fleet, run


async def test_rollout_keeps_the_pipeline_running_and_loses_no_request(
    loaded_fleet: tuple[SimFleet, PipelineRun],
) -> None:
    fleet, run = loaded_fleet
    total = TOTAL
    profile = load_profile(fleet.files["aggressive"])
    plan, skipped = rollout_plan(profile)
    assert [g for g, _ in plan] == fleet.gpus and skipped == []
    ops = FleetOps()
    options = RolloutOptions(
        batch=1,
        apply=ApplyOptions(timeout_s=60, release_timeout_s=20, measure=False),
        interval_s=0.5,
        baseline_s=2.0,
        settle_s=3.0,
        verdict=VerdictWindows(window_s=0),  # the fleet verdict: test_rollout_rollback.py
    )
    result = await ops.rollout(profile, 1, options=options)
    print(result.describe())
    assert result.ok, result.describe()
    assert [s.gpus for s in result.steps] == [(0,), (1,), (2,)]
    # Each batch started only after the previous one was ready.
    for a, b in zip(result.steps, result.steps[1:], strict=False):
        assert b.started_at >= a.finished_at
    # SGLang 0.5.23's drain keeps serving new requests: until the operations core cordons the
    # server (tui/servers/cordon.py, not wired yet), each stop lasts while the pipeline sends,
    # and the pipeline may finish its prompts first. It must not have died: running, or done.
    assert run.proc.poll() in (None, 0), "the pipeline died during the rollout"
    assert {r.profile for r in read_records().values()} == {"t-aggressive"}
    assert result.cost is not None and result.cost.lost_gpu_seconds is not None
    assert run.proc.wait(timeout=60) == 0, run.log.read_text()[-2000:]
    indices = []
    for shard in sorted(run.out.glob("shard-*.jsonl")):
        indices += [json.loads(line)["index"] for line in shard.read_text().splitlines()]
    assert sorted(indices) == list(range(total)), "every prompt exactly once"
    summary = read_journal().entries[-1]
    assert summary.type == "rollout" and summary.ok
    assert summary.lost_gpu_seconds == result.cost.lost_gpu_seconds


def test_rollout_stops_at_the_gpu_that_fails_and_rolls_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GPUFLEET_STATE_DIR", str(tmp_path / "state"))
    fast = ["--timeout", "60", "--term-timeout", "5", "--release-timeout", "20", "--no-cost"]
    with sim_fleet(tmp_path, 4, 40.0, misfit_gpu=2) as fleet:
        capsys.readouterr()
        assert rollout_cli.main([str(fleet.files["misfit"]), *fast]) == 1
        out = capsys.readouterr().out
        assert "STOPPED at GPU 2: OOM" in out
        running = read_running()
        assert [running[g].current_name for g in fleet.gpus] == [
            "t-misfit",
            "t-misfit",
            "t-baseline",  # failed, relaunched on the old profile
            "t-baseline",  # never touched
        ]
        records = read_records()
        assert sorted(records) == fleet.gpus
        assert records[3].profile == "t-baseline" and records[2].profile == "t-baseline"
        steps = [e for e in read_journal().entries if e.type.startswith("rollout")]
        assert [s.type for s in steps] == ["rollout-step"] * 3 + ["rollout"]
        assert [s.ok for s in steps[:3]] == [True, True, False]
        summary = steps[-1]
        assert not summary.ok
        assert summary.failed == (2,) and summary.detail["stayed"] == [3]
        assert summary.detail["done"] == [0, 1] and summary.detail["restored"] == [2]
        assert summary.detail["failure"].startswith("GPU 2: OOM")
        assert steps[2].detail["reports"][0]["error_reason"] == "oom"

        assert rollout_cli.main(["--rollback", *fast]) == 0
        steps = [e for e in read_journal().entries if e.type.startswith("rollback")][-3:]
        assert [s.gpus for s in steps[:2]] == [(1,), (0,)], "walked back in reverse order"
        assert steps[-1].type == "rollback" and steps[-1].ok
        assert {r.profile for r in read_records().values()} == {"t-baseline"}

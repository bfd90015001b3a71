"""A second demo after the demo job finished starts a fresh job (and says so); a stopped or
failed one is left to resume. In the console, ``p`` on the finished demo job asks, then starts
a fresh one (the demo is a demo of the whole loop: a job that ended must not end it)."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest
from operator_helpers import cleaned, job_in
from repo_paths import ROOT
from sim_helpers import running_sim, wait_until
from ui_helpers import (
    RecordingFleet,
    finish_actions,
    make_app,
    pipeline_status,
    settle,
    wait_for,
)

from tui import paths
from tui.gpu.simulated import SimulatedSource
from tui.ops import demo
from tui.ops.commands import StartPipeline
from tui.ops.demo import demo_prompts_file, ensure_prompts, fresh_job_if_finished, pipeline_config
from tui.ops.journal import read_journal
from tui.ops.pipeline import PipelineConfig
from tui.ops.service import FleetOps
from tui.ops.simfleet import sim_profile
from tui.pipeline.status import read_status, write_status
from tui.ui.confirm import ConfirmScreen


def demo_config() -> PipelineConfig:
    return pipeline_config(sim_profile(None), demo_prompts_file(), 60.0)


def finished_job(state: str = "finished") -> None:
    config = demo_config()
    config.out_dir.mkdir(parents=True)
    (config.out_dir / "shard-00000.jsonl").write_text('{"id": 1}\n')
    total = 100_000
    write_status(config.status_path, replace(pipeline_status(state), done=total, total=total))


def test_a_finished_job_is_put_aside_and_the_next_starts_fresh() -> None:
    finished_job()
    config = demo_config()
    message = fresh_job_if_finished(config)
    kept = config.out_dir.with_name("out-finished")
    assert message == (
        "the last demo job finished (100,000 of 100,000 prompts done); starting a fresh one "
        f"(the finished job's outputs are in {kept})"
    )
    assert not config.out_dir.exists() and (kept / "shard-00000.jsonl").is_file()
    assert not config.status_path.exists()
    assert fresh_job_if_finished(config) is None  # nothing left to reset
    assert kept.parent == paths.pipeline_dir()


def test_only_the_last_finished_job_is_kept() -> None:
    finished_job()
    config = demo_config()
    fresh_job_if_finished(config)
    finished_job()
    (config.out_dir / "second.jsonl").write_text("{}\n")
    fresh_job_if_finished(config)
    kept = config.out_dir.with_name("out-finished")
    assert sorted(p.name for p in kept.iterdir()) == ["second.jsonl", "shard-00000.jsonl"]
    assert sorted(p.name for p in kept.parent.iterdir() if p.name.startswith("out")) == [
        "out-finished"
    ]


@pytest.mark.parametrize("state", ["stopped", "failed", "running"])
def test_a_job_that_did_not_finish_is_left_to_resume(state: str) -> None:
    finished_job(state)
    config = demo_config()
    assert fresh_job_if_finished(config) is None
    assert (config.out_dir / "shard-00000.jsonl").is_file() and config.status_path.exists()


def test_a_finished_job_whose_pipeline_still_runs_is_left_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    finished_job()
    monkeypatch.setattr(demo, "find_pipelines", lambda status_path: [object()])
    config = demo_config()
    assert fresh_job_if_finished(config) is None
    assert config.out_dir.exists()


def test_the_makefile_passes_args_to_the_demo() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert "$(BIN)/gpufleet demo $(ARGS)" in makefile


def test_the_demo_pipeline_starts_fresh_and_another_job_resumes(tmp_path: Path) -> None:
    assert demo_config().fresh_when_finished
    other = pipeline_config(sim_profile(None), tmp_path / "prompts.jsonl", 60.0)
    assert not other.fresh_when_finished  # a real job's done record is never put aside


def test_p_on_the_finished_demo_job_starts_a_fresh_one(
    tmp_path: Path, isolated_state: Path
) -> None:
    """A real simulated server and a real pipeline: the finished job goes aside, the fresh one
    runs its prompts from the first, the journal says so; the server told its speed, which
    the console's header says."""
    prompts = tmp_path / "prompts.jsonl"
    ensure_prompts(prompts, 40)
    with cleaned(isolated_state), running_sim(["--sim-speed", "200"], isolated_state) as sim:
        source = SimulatedSource(paths.sim_gpu_dir())
        source.sample()
        assert source.describe().startswith("simulated x200: 1 x NVIDIA B200 under ")
        config = job_in(
            tmp_path, prompts, sim.url, "--fleet-timeout", "30", "--max-tokens", "64", fresh=True
        )
        config.out_dir.mkdir()
        (config.out_dir / "shard-000001.jsonl").write_text('{"old": true}\n')
        write_status(config.status_path, replace(pipeline_status("finished"), done=40, total=40))
        asyncio.run(FleetOps(pipeline=config, by="test").start_pipeline())
        assert (tmp_path / "out-finished" / "shard-000001.jsonl").is_file()

        def fresh_done() -> bool:
            status = read_status(config.status_path)
            return status is not None and status.state == "finished" and status.done == 40

        assert wait_until(fresh_done, 60), (tmp_path / "pipeline.log").read_text()[-2000:]
        shards = sorted(config.out_dir.glob("shard-*.jsonl"))
        assert shards and '"old"' not in shards[0].read_text()
        entry = read_journal().entries[-1]
        assert entry.type == "pipeline-start" and "starting a fresh one" in entry.summary


async def test_p_asks_before_starting_the_finished_demo_job_afresh() -> None:
    actions = RecordingFleet(starts_fresh_job=True)
    done = replace(pipeline_status("finished"), done=100_000, total=100_000)
    app = make_app(actions=actions, status=done)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        await pilot.press("p")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirm")
        confirm = app.screen
        assert isinstance(confirm, ConfirmScreen)
        assert confirm.title_text == "Start a fresh demo job?"
        assert "100,000 of 100,000 prompts done" in confirm.affected
        assert actions.commands == []
        await pilot.press("y")
        await finish_actions(pilot, app)
    assert actions.commands == [StartPipeline()]

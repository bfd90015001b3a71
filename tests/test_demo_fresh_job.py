"""A second demo after the demo job finished starts a fresh job (and says so); a stopped or
failed one is left to resume."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from ui_helpers import pipeline_status

from tui import paths
from tui.ops import demo
from tui.ops.demo import demo_prompts_file, fresh_job_if_finished, pipeline_config
from tui.ops.simfleet import sim_profile
from tui.pipeline.status import write_status


def demo_config() -> object:
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
    makefile = (Path(__file__).resolve().parents[1] / "Makefile").read_text()
    assert "$(BIN)/gpufleet demo $(ARGS)" in makefile

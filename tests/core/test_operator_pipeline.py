"""Console pipeline control: detached start, no duplicate, identity-checked SIGTERM stop."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from operator_helpers import cleaned, job_in, leftovers, pid_alive
from sim_helpers import running_sim, wait_until

from tui.ops.demo import ensure_prompts
from tui.ops.pipeline import (
    find_pipelines,
    is_pipeline_of,
    start_pipeline,
    stop_pipelines,
)
from tui.pipeline.status import read_status, write_status


def test_is_pipeline_of_needs_generate_and_the_same_status_path(tmp_path: Path) -> None:
    status = tmp_path / "status.json"
    ours = [sys.executable, "-m", "tui", "generate", "--prompts", "p", "--status", str(status)]
    assert is_pipeline_of(ours, status)
    assert is_pipeline_of(["/x/.venv/bin/gpufleet", *ours[3:]], status)
    assert not is_pipeline_of([*ours[:-1], str(tmp_path / "other.json")], status)
    assert not is_pipeline_of([sys.executable, "-m", "tui", "sim", "--status", str(status)], status)
    assert not is_pipeline_of(["sleep", "generate", "--status", str(status)], status)
    assert not is_pipeline_of([*ours, "--detach"], status)  # the launcher, not the pipeline


def test_ensure_prompts_writes_once(tmp_path: Path) -> None:
    path = tmp_path / "prompts.jsonl"
    assert ensure_prompts(path, 1000)
    lines = path.read_text().splitlines()
    assert len(lines) == 1000 and '"messages"' in lines[0] and "Prompt 999" in lines[-1]
    assert not ensure_prompts(path, 5)  # kept as is: the done record refers to its lines
    assert len(path.read_text().splitlines()) == 1000


def test_start_once_then_stop_by_sigterm(tmp_path: Path, isolated_state: Path) -> None:
    prompts = tmp_path / "prompts.jsonl"
    ensure_prompts(prompts, 100_000)
    with cleaned(isolated_state), running_sim(["--sim-speed", "200"], isolated_state) as sim:
        config = job_in(tmp_path, prompts, sim.url, "--fleet-timeout", "30")
        pid = start_pipeline(config)
        assert wait_until(
            lambda: (s := read_status(config.status_path)) is not None and s.done > 0, 60
        ), (tmp_path / "pipeline.log").read_text()[-2000:]
        assert start_pipeline(config) == pid  # a second start finds the running one
        assert [p.pid for p in find_pipelines(config.status_path)] == [pid]

        assert stop_pipelines(config.status_path) == [pid]
        assert not pid_alive(pid)
        final = read_status(config.status_path)
        assert final is not None and final.state == "stopped"
        assert stop_pipelines(config.status_path) == []  # nothing left to stop

        # A status document naming a stranger's pid: the stranger is never signalled.
        stranger = subprocess.Popen(["sleep", "30"])
        try:
            write_status(config.status_path, replace(final, pid=stranger.pid, state="running"))
            assert stop_pipelines(config.status_path) == []
            assert stranger.poll() is None
        finally:
            stranger.kill()
            stranger.wait(10)
        assert not [line for line in leftovers(isolated_state) if "generate" in line]

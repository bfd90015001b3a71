"""A job started with a relative ``--status`` is found and stopped by the agent and the console
(issue 36: the agent answered 409, "no job", while it ran).

The agent's ``POST /api/v1/pipeline`` and the console's ``p`` find the job by its command line
(``tui.ops.pipeline.find_pipelines``) and stop it with ``stop_pipelines``; a relative
``--status`` is relative to the job's working directory, which is read with its command line.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pipeline_helpers import (
    REPO,
    ProcessServer,
    set_mode,
    status_when,
    write_batch,
)

from tui.ops.pipeline import find_pipelines, is_pipeline_of, stop_pipelines
from tui.pipeline.status import read_status

pytestmark = [pytest.mark.timeout(90)]


def test_a_relative_status_is_read_against_the_job_s_directory(tmp_path: Path) -> None:
    status = tmp_path / "status.json"
    line = [sys.executable, "-m", "tui", "generate", "--out", "out", "--status", "status.json"]
    assert is_pipeline_of(line, status, str(tmp_path))
    assert is_pipeline_of([*line[:-2], "--status=./status.json"], status, str(tmp_path))
    assert not is_pipeline_of(line, status, str(tmp_path / "elsewhere"))
    assert not is_pipeline_of(line, status)  # no directory known: not taken for it


def test_a_job_with_a_relative_status_is_found_and_stopped(
    tmp_path: Path, server: ProcessServer
) -> None:
    set_mode(server, "hang")  # the job runs until stopped
    write_batch(tmp_path / "prompts.jsonl", ["a", "b", "c"])
    argv = [sys.executable, "-m", "tui", "generate", "--prompts", "prompts.jsonl"]
    argv += ["--out", "out", "--status", "status.json", "--server", server.url]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    job = subprocess.Popen(argv, cwd=tmp_path, env=env, stderr=subprocess.DEVNULL)
    try:
        status_when(tmp_path / "status.json", job.pid, lambda s: s.in_flight > 0, "in flight")
        assert [p.pid for p in find_pipelines(tmp_path / "status.json")] == [job.pid]
        assert stop_pipelines(tmp_path / "status.json", timeout_s=30) == [job.pid]
        # stop_pipelines reaped it (psutil waits): its status document tells how it ended
        status = read_status(tmp_path / "status.json")
        assert status is not None and status.state == "stopped", status
    finally:
        if job.poll() is None:
            job.kill()
            job.wait(timeout=10)

"""A whole-fleet outage (every server down, e.g. a full relaunch): the run waits and says so."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from pipeline_helpers import PYTHON, REPO, sim_server, status_when, write_prompts

from tui.pipeline.rates import Rate
from tui.pipeline.status import PipelineStatus, ServerShare, read_status
from tui.ui.pipeline.generation_pane import summary_lines


def test_the_status_says_since_when_no_server_is_up_and_clears_when_one_is(
    tmp_path: Path,
) -> None:
    server = sim_server(0)
    prompts = write_prompts(tmp_path / "p.jsonl", 50_000)
    status_path = tmp_path / "status.json"
    argv = [PYTHON, "-m", "tui", "generate", "--prompts", str(prompts), "--out", str(tmp_path)]
    argv += ["--status", str(status_path), "--server", server.url, "--max-tokens", "64"]
    server.start()
    process = subprocess.Popen(argv, cwd=REPO, env=dict(os.environ), stderr=subprocess.DEVNULL)

    def status_where(check: Callable[[PipelineStatus], bool], what: str) -> PipelineStatus:
        return status_when(status_path, process.pid, check, what)

    try:
        up = status_where(lambda s: s.done > 50, "work done")
        assert up.no_server_since is None
        killed_at = time.time()
        server.kill()
        down = status_where(lambda s: s.no_server_since is not None, "the outage reported")
        assert down.state == "running" and not down.servers[0].healthy
        assert down.no_server_since is not None
        # Stamped at the status cadence (1 s) after the kill, never before it.
        assert killed_at - 0.01 <= down.no_server_since <= down.updated_at
        waiting = status_where(lambda s: s.updated_at - killed_at >= 2.0, "still down 2 s on")
        assert waiting.no_server_since == down.no_server_since  # since the start, not reset
        server.start()
        back = status_where(
            lambda s: s.no_server_since is None and s.done > waiting.done, "work resumed"
        )
        assert back.servers[0].healthy
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) != 0  # stopped by signal, not finished
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        server.kill()
    final = read_status(status_path)
    assert final is not None and final.state == "stopped" and final.no_server_since is None


def _status(**changes: Any) -> PipelineStatus:
    rate = Rate(60.0, 0.0, 0.0)
    base = PipelineStatus(
        schema=1, state="running", pid=1, started_at=0.0, updated_at=1000.0, total=10, done=4,
        failed=0, in_flight=0, rate_1m=rate, rate_10m=rate, eta_s=None,
        servers=(ServerShare("http://127.0.0.1:30000", 4, 0, 0, False),),
    )  # fmt: skip
    return replace(base, **changes)


def test_the_pane_warns_with_how_long_the_fleet_has_been_down() -> None:
    text = summary_lines(_status(no_server_since=1000.0 - 125)).plain
    assert "waiting: no server healthy for 2m 05s" in text
    assert "waiting" not in summary_lines(_status()).plain
    # A finished or stopped run is not waiting for anything.
    assert "waiting" not in summary_lines(_status(state="stopped", no_server_since=0.0)).plain

"""``p`` and the generation pane on a many-node console, with real agents and a real job: the pane
shows the job its node's agent reports; ``p`` (confirmed) stops it through that agent, which
signals only the job's process (this user's, carrying the job's id); ``p`` again starts the
recorded options through the agent, and the job resumes from its done record. Without a job
record of the agent's user, a start is refused in one line saying what to run; another user's
process, or a job run in the foreground, is never the agent's, whatever its command line."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest
from node_helpers import ROOT, Node, nodes
from pipeline_helpers import wait_until
from ui_helpers import wait_for

from tui.agent.client import AgentError, parse_agents
from tui.agent.nodes import Nodes
from tui.ops.commands import StopPipeline
from tui.pipeline.job_record import JOB_ID_ENV
from tui.ui.app import FleetApp
from tui.ui.confirm import ConfirmScreen

pytestmark = [pytest.mark.timeout(150)]


def status_doc(node: Node) -> dict[str, Any]:
    """The job's status document as JSON reads it ({} before it is written)."""
    try:
        return dict(json.loads((node.root / "state" / "pipeline" / "status.json").read_text()))
    except (OSError, ValueError):
        return {}


def job_argv(tmp_path: Path, n1: Node, n2: Node) -> list[str]:
    prompts = tmp_path / "prompts.jsonl"
    with prompts.open("w") as handle:
        for i in range(3000):
            body = {"model": "default", "prompt": f"story {i}", "max_tokens": 64}
            line = {"custom_id": f"q-{i}", "method": "POST", "url": "/v1/completions"}
            handle.write(json.dumps({**line, "body": body}) + "\n")
    status = n1.root / "state" / "pipeline" / "status.json"
    argv = [sys.executable, "-m", "tui", "generate", "--prompts", str(prompts)]
    argv += ["--out", str(tmp_path / "out"), "--status", str(status)]
    argv += ["--server", n1.urls[0], "--server", n2.urls[0], "--per-server-inflight", "2"]
    return [*argv, "--flush-interval", "1"]


def pid_runs(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def detach(argv: list[str], node: Node) -> int:
    """Start the job as its node's user does: ``gpufleet generate ... --detach``; its pid."""
    done = subprocess.run(
        [*argv, "--detach"], env=node.env, cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return int(done.stdout.strip())


def stop_job(pid: int) -> None:
    """SIGTERM a job this test started (a ``generate`` at that pid), and wait for it."""
    with contextlib.suppress(psutil.NoSuchProcess):
        proc = psutil.Process(pid)
        if pid_runs(pid) and "generate" in proc.cmdline():
            proc.send_signal(signal.SIGTERM)
            # An agent's child is a zombie until the agent reaps it: gone, for this test.
            wait_until(lambda: not pid_runs(pid), 30, f"job {pid} stopped")


async def test_p_stops_and_restarts_the_job_through_its_nodes_agent(tmp_path: Path) -> None:
    with nodes(tmp_path, count=2, gpus=1, speed=2.0, startup_s=1.0) as (n1, n2):
        token = n1.token_file.read_text().strip()
        backend = Nodes(parse_agents(f"{n1.agent_address},{n2.agent_address}"), token)
        await backend.poll()
        with pytest.raises(AgentError, match="no node reports a job"):
            await backend.run(StopPipeline())
        argv = job_argv(tmp_path, n1, n2)
        job = detach(argv, n1)
        first_id = psutil.Process(job).environ()[JOB_ID_ENV]
        started: list[int] = [job]
        try:
            app = FleetApp(backend, node_groups=True, poll_interval_s=0.5)
            async with app.run_test(size=(160, 50)) as pilot:
                screen = app.main_screen
                await wait_for(
                    pilot,
                    lambda: (
                        screen.pipeline_status is not None
                        and screen.pipeline_status.state == "running"
                        and int(screen.pipeline_status.done) > 0
                    ),
                    "the job in the pane",
                    60,
                )
                assert screen.pipeline_status is not None
                assert screen.pipeline_status.pid == job
                await pilot.press("p")
                await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "confirm", 10)
                await pilot.press("y")
                await wait_for(pilot, lambda: not pid_runs(job), "the job stopped", 60)
                await wait_for(
                    pilot,
                    lambda: (
                        screen.pipeline_status is not None
                        and screen.pipeline_status.state != "running"
                    ),
                    "the pane showing it stopped",
                    30,
                )
                done_at_stop = int(status_doc(n1).get("done", 0))
                await pilot.press("p")  # start again, through n1's agent
                await wait_for(
                    pilot,
                    lambda: (
                        status_doc(n1).get("state") == "running"
                        and status_doc(n1).get("pid") != job
                    ),
                    "the job started again",
                    60,
                )
                new_pid = int(str(status_doc(n1)["pid"]))
                started.append(new_pid)
                again = psutil.Process(new_pid)
                assert again.cmdline()[3:] == argv[3:]  # the recorded options, as given
                assert again.environ()[JOB_ID_ENV] not in ("", first_id)  # a new id
                # It resumes: nothing done before is asked again.
                assert int(status_doc(n1).get("done", 0)) >= done_at_stop
            journal = (n1.root / "state" / "journal.jsonl").read_text().splitlines()
            kinds = [(e["type"], e["by"]) for e in map(json.loads, journal)][-2:]
            assert kinds == [("pipeline-stop", "agent:n1"), ("pipeline-start", "agent:n1")], journal
            await backend.poll()
            await backend.run(StopPipeline())
            assert not pid_runs(new_pid)
        finally:
            for pid in started:
                stop_job(pid)
            await backend.aclose()


async def test_a_start_the_agent_cannot_do_is_refused_in_one_line(tmp_path: Path) -> None:
    with nodes(tmp_path, count=1, gpus=1) as (n1,):
        token = n1.token_file.read_text().strip()
        backend = Nodes(parse_agents(n1.agent_address), token)
        client = backend.clients[0]
        with pytest.raises(AgentError) as refused:
            await client.pipeline("start")
        message = str(refused.value)
        assert "\n" not in message and "HTTP 409" in message
        assert "no job of this agent writes" in message and "--detach" in message
        with pytest.raises(AgentError, match="HTTP 409: no job of this agent writes"):
            await client.pipeline("stop")
        await backend.aclose()


async def test_another_users_process_or_a_foreground_job_is_never_the_agents(
    tmp_path: Path,
) -> None:
    """A process of another user whose command line reads ``gpufleet generate ... --status S``
    (the agent's S) was taken for the job: the agent's stop signalled it, and its start ran,
    as root, that user's options in that user's directory. Neither, now; nor for a job of the
    agent's own user run in the foreground (it carries no job id, and has no record)."""
    with nodes(tmp_path, count=1, gpus=1) as (n1,):
        status = n1.root / "state" / "pipeline" / "status.json"
        claim = ["tui", "generate", "--prompts", "/tmp/x", "--out", "/tmp/y"]
        claim += ["--status", str(status)]
        sleeper = "import time; time.sleep(120)"
        strangers = [subprocess.Popen([sys.executable, "-c", sleeper, *claim])]
        if os.geteuid() == 0 and shutil.which("setpriv"):
            nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
            strangers.append(subprocess.Popen([*nobody, sys.executable, "-c", sleeper, *claim]))
        token = n1.token_file.read_text().strip()
        backend = Nodes(parse_agents(n1.agent_address), token)
        client = backend.clients[0]
        try:
            for action in ("stop", "start"):
                with pytest.raises(AgentError) as refused:
                    await client.pipeline(action)
                assert "HTTP 409: no job of this agent writes" in str(refused.value)
            assert all(s.poll() is None for s in strangers)  # never signalled
            launched = [p for p in psutil.process_iter() if _generate_of(p, n1)]
            assert launched == []  # nothing started from the strangers' options
        finally:
            for stranger in strangers:
                stranger.kill()
                stranger.wait(timeout=10)
            await backend.aclose()


def _generate_of(proc: psutil.Process, node: Node) -> bool:
    """A ``generate`` run for ``node`` (its state directory in the environment)."""
    try:
        state = proc.environ().get("GPUFLEET_STATE_DIR")
        return "generate" in proc.cmdline() and state == str(node.root / "state")
    except psutil.Error:
        return False

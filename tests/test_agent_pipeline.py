"""``p`` and the generation pane on a many-node console, with real agents and a real job: the pane
shows the job its node's agent reports; ``p`` (confirmed) stops it through that agent, which
signals only the verified job process; ``p`` again starts the same command line through the
agent, and the job resumes from its done record. Without a job an agent stopped, a start is
refused in one line saying what to run."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
from node_helpers import ROOT, Node, nodes
from ui_helpers import wait_for

from tui.agent.client import AgentError, parse_agents
from tui.agent.nodes import Nodes
from tui.ui.app import FleetApp
from tui.ui.confirm import ConfirmScreen

pytestmark = [pytest.mark.timeout(150)]


def status_doc(node: Node) -> dict[str, object]:
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


async def test_p_stops_and_restarts_the_job_through_its_nodes_agent(tmp_path: Path) -> None:
    with nodes(tmp_path, count=2, gpus=1, speed=2.0, startup_s=1.0) as (n1, n2):
        token = n1.token_file.read_text().strip()
        backend = Nodes(parse_agents(f"{n1.agent_address},{n2.agent_address}"), token)
        await backend.poll()
        with pytest.raises(AgentError, match="no node reports a job"):
            await backend.stop_pipeline()
        log = (tmp_path / "generate.log").open("wb")
        argv = job_argv(tmp_path, n1, n2)
        job = subprocess.Popen(argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=n1.env)
        started: list[int] = []
        try:
            app = FleetApp(
                backend,
                actions=backend,
                log_tail=backend.tail,
                status_reader=backend.read_status,
                node_groups=True,
                poll_interval_s=0.5,
            )
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
                assert screen.pipeline_status.pid == job.pid
                await pilot.press("p")
                await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "confirm", 10)
                await pilot.press("y")
                await wait_for(pilot, lambda: job.poll() is not None, "the job stopped", 60)
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
                        and status_doc(n1).get("pid") != job.pid
                    ),
                    "the job started again",
                    60,
                )
                new_pid = int(str(status_doc(n1)["pid"]))
                started.append(new_pid)
                assert psutil.Process(new_pid).cmdline()[3:] == argv[3:]
                # It resumes: nothing done before is asked again.
                assert int(status_doc(n1).get("done", 0)) >= done_at_stop
            journal = (n1.root / "state" / "journal.jsonl").read_text().splitlines()
            kinds = [(e["type"], e["by"]) for e in map(json.loads, journal)][-2:]
            assert kinds == [("pipeline-stop", "agent:n1"), ("pipeline-start", "agent:n1")]
            await backend.poll()
            await backend.stop_pipeline()
            assert not pid_runs(new_pid)
        finally:
            for pid in started:
                if pid_runs(pid) and "generate" in psutil.Process(pid).cmdline():
                    psutil.Process(pid).send_signal(signal.SIGTERM)
            if job.poll() is None:
                job.send_signal(signal.SIGTERM)
                job.wait(timeout=20)
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
        assert "has not stopped the job" in message and "gpufleet generate" in message
        with pytest.raises(AgentError, match="HTTP 409: no job writes"):
            await client.pipeline("stop")
        await backend.aclose()

"""A canary judged across nodes, through real agents on loopback: the candidate on one GPU of
node n1, the control every GPU of both nodes that runs its profile, each node's counters read
through its agent over the same intervals. A much smaller ``max_running_requests`` is judged
worse and rolled back at once through n1's agent; the result and the console's journal name the
controls of both nodes. A node lost during the canary leaves the control; with no control left
the canary is rolled back and the verdict says why."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import subprocess
from pathlib import Path

import pytest
from node_helpers import FAST_APPLY, Node, nodes
from rollout_helpers import pipeline, wait_done_at_least

from bench.simfleet import WORSE, sim_profile_text
from tui import paths
from tui.agent.client import parse_agents
from tui.agent.nodes import Nodes
from tui.fleet.snapshot import ServerState
from tui.ops.commands import Canary
from tui.ops.journal import read_journal
from tui.retune.events import GpuReady
from tui.retune.options import ApplyOptions
from tui.rollout.canary import CanaryOptions
from tui.rollout.canary_result import CanaryLook

pytestmark = [pytest.mark.timeout(150)]

SPEED = 10.0
OPTIONS = CanaryOptions(
    window_s=6.0,
    warmup_s=3.5,  # the pipeline takes the relaunched server back (health, backoff)
    max_window_s=12.0,
    interval_s=0.5,
    min_intervals=6,
    margin=0.05,
    baseline_s=2.0,
    settle_s=4.0,
    apply=ApplyOptions(timeout_s=60, release_timeout_s=20, measure=False),
)


def state(node: Node) -> dict[int, tuple[str, int]]:
    """GPU -> (current profile, server pid) on ``node``."""
    records = json.loads((node.root / "state" / "fleet_state.json").read_text())
    return {
        int(g): (e["current"]["name"], int(e["server"]["pid"]))
        for g, e in records["gpus"].items()
        if e["server"] and e["current"]
    }


def write_worse(node: Node, gpus: int) -> None:
    text = sim_profile_text(
        "node-worse", list(range(gpus)), node.ports, str(node.root / "logs"), WORSE, SPEED
    )
    (node.root / "profiles" / "node-worse.toml").write_text(text)


async def ready_backend(n1: Node, n2: Node, gpus: int) -> Nodes:
    """The console's backend once both nodes show every server ready."""
    token = n1.token_file.read_text().strip()
    backend = Nodes(parse_agents(f"{n1.agent_address},{n2.agent_address}"), token, None, OPTIONS)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 30
    while True:
        fleet = await backend.poll()
        ready = [
            p for p in fleet.panels if p.server is not None and p.server.state is ServerState.READY
        ]
        if len(ready) == 2 * gpus and len(backend.running()) == 2 * gpus:
            return backend
        assert loop.time() < deadline, fleet
        await asyncio.sleep(0.3)


async def test_a_worse_candidate_judged_on_both_nodes_is_rolled_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with (
        nodes(tmp_path, count=2, gpus=2, speed=SPEED, startup_s=1.0) as (n1, n2),
        contextlib.ExitStack() as stack,
    ):
        write_worse(n1, 2)
        urls = n1.urls + n2.urls
        with monkeypatch.context() as env:
            # The job honours n1's cordons (the canary GPU's drain ends with its short requests),
            # as the router honours a node's through its agent in production.
            env.setenv(paths.STATE_ENV, str(n1.root / "state"))
            run = stack.enter_context(pipeline(tmp_path, urls, prompts=50_000, max_tokens=300))
        wait_done_at_least(run, 40, timeout=40)
        backend = await ready_backend(n1, n2, 2)
        before1, before2 = state(n1), state(n2)
        looks: list[CanaryLook] = []
        events: list[object] = []
        try:
            # One sink for the command's events, its looks among them.
            sink = lambda e: (looks if isinstance(e, CanaryLook) else events).append(e)  # noqa: E731
            result = await backend.run(Canary("node-worse", 0), sink)
        finally:
            await backend.aclose()
        assert run.proc.poll() is None, "the pipeline kept running"
        print(result.describe())
        assert result.controls == (1, 100, 101)  # n1's other GPU and both of n2's
        assert result.verdict == "worse", result.describe()
        assert result.tokens is not None and result.tokens.rel_high < 0
        assert result.report is not None and result.report.ok and result.gpu == 0
        assert result.reason.endswith("GPU 0 rolled back to node-base"), result.reason
        assert looks and looks[-1].final and looks[-1].verdict == "worse"
        assert any(isinstance(e, GpuReady) and e.gpu == 0 for e in events)
        # n1's GPU 0 ran the candidate, then its profile again; nothing else restarted.
        after1 = state(n1)
        assert after1[0][0] == "node-base" and after1[0][1] != before1[0][1]
        assert after1[1] == before1[1] and state(n2) == before2
        # n1's own journal has the apply and the rollback; the console's the verdict.
        node_journal = (n1.root / "state" / "journal.jsonl").read_text().splitlines()
        kinds = [json.loads(line)["type"] for line in node_journal]
        assert kinds[-2:] == ["apply", "rollback"], kinds
        entry = read_journal().entries[-1]
        assert entry.type == "canary" and entry.verdict == "worse"
        assert entry.detail["controls"] == [1, 100, 101] and entry.gpus == (0,)


async def test_a_lost_control_node_leaves_no_control_and_the_canary_is_rolled_back(
    tmp_path: Path,
) -> None:
    with nodes(tmp_path, count=2, gpus=1, speed=SPEED, startup_s=1.0) as (n1, n2):
        write_worse(n1, 1)
        backend = await ready_backend(n1, n2, 1)
        before = state(n1)

        def on_event(event: object) -> None:
            # The candidate is up on n1: n2 is lost (its agent killed) before the window.
            if isinstance(event, GpuReady) and n2.agent is not None and n2.agent.poll() is None:
                n2.agent.send_signal(signal.SIGKILL)

        try:
            result = await backend.run(Canary("node-worse", 0), on_event)
        finally:
            await backend.aclose()
        print(result.describe())
        assert result.verdict == "not measured" and result.tokens is None
        assert result.reason.startswith("no verdict: every control GPU stopped answering")
        assert "node n2" in result.reason  # named as left out
        assert result.reason.endswith("GPU 0 rolled back to node-base"), result.reason
        assert result.controls == () and result.dropped_controls == (100,)
        after = state(n1)
        assert after[0][0] == "node-base" and after[0][1] != before[0][1]


async def test_a_gpu_changed_during_the_window_is_not_rolled_back_by_the_canary(
    tmp_path: Path,
) -> None:
    """The node's lock is not held over the canary's window: another operation may move the
    canary GPU meanwhile. The canary's rollback carries the candidate (``expect``), so the node
    refuses it under its lock instead of undoing that operation, and the reason says so."""
    with nodes(tmp_path, count=2, gpus=1, speed=SPEED, startup_s=1.0) as (n1, n2):
        write_worse(n1, 1)
        other = (n1.root / "profiles" / "node-worse.toml").read_text()
        other = other.replace('name = "node-worse"', 'name = "node-other"')
        assert "node-other" in other
        (n1.root / "profiles" / "node-other.toml").write_text(other)
        backend = await ready_backend(n1, n2, 1)
        applied: list[subprocess.CompletedProcess[str]] = []

        def on_look(look: object) -> None:
            if not isinstance(look, CanaryLook):
                return
            # The first look of the window: the candidate runs and the canary's apply has
            # released n1's lock. Another operator's apply moves the GPU (blocking this loop
            # until it is done, so it lands before the canary ends).
            if not applied:
                applied.append(n1.run("apply", "node-other", "--gpus", "0", *FAST_APPLY))

        try:
            result = await backend.run(Canary("node-worse", 0), on_look)
        finally:
            await backend.aclose()
        print(result.describe())
        assert applied and applied[0].returncode == 0, applied and applied[0].stderr
        after = state(n1)
        assert after[0][0] == "node-other", after  # what the other apply left, kept
        assert result.report is not None and result.report.ok
        assert "rolling GPU 0 back FAILED" in result.reason, result.reason
        assert "runs node-other now, not node-worse" in result.reason, result.reason
        assert result.reason.endswith("not rolled back"), result.reason
        node_journal = (n1.root / "state" / "journal.jsonl").read_text().splitlines()
        kinds = [json.loads(line)["type"] for line in node_journal]
        assert kinds[-2:] == ["apply", "apply"], kinds  # the canary's, the other one's

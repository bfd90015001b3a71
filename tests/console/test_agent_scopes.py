"""Per-node scopes on a many-node console, through real agents on loopback (Pilot): ``m`` marks
the selected panel's node, then ``o`` rolls a profile out to that node only and ``b`` rolls that
node back; the other node's servers keep their pids throughout, and each confirm names the node
before anything runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from node_helpers import Node, nodes
from ui_helpers import press_until, wait_for

from bench.simfleet import BASELINE, sim_profile_text
from tui.agent.client import parse_agents
from tui.agent.nodes import Nodes
from tui.ui.app import FleetApp
from tui.ui.confirm import ConfirmScreen
from tui.ui.retune.profile_picker import ProfilePickerScreen
from tui.ui.rollout.rollout_screen import RolloutScreen

pytestmark = [pytest.mark.timeout(180)]


def pids(node: Node) -> dict[int, int]:
    records = json.loads((node.root / "state" / "fleet_state.json").read_text())
    return {int(g): int(e["server"]["pid"]) for g, e in records["gpus"].items() if e["server"]}


def current(node: Node) -> dict[int, str]:
    records = json.loads((node.root / "state" / "fleet_state.json").read_text())
    return {int(g): e["current"]["name"] for g, e in records["gpus"].items() if e["current"]}


def write_alt(node: Node) -> None:
    """``node-alt``: the node's baseline with fewer running requests (same GPUs and ports)."""
    text = sim_profile_text(
        "node-alt",
        [0, 1],
        node.ports,
        str(node.root / "logs"),
        BASELINE + "max_running_requests = 24\n",
        50.0,
    )
    (node.root / "profiles" / "node-alt.toml").write_text(text)


async def test_a_marked_node_is_the_scope_of_rollout_and_rollback(tmp_path: Path) -> None:
    # Short fleet-verdict windows: the walks' verdict is carried, not judged, here.
    with nodes(tmp_path, count=2, gpus=2, agent_args=("--measure-window", "3")) as (n1, n2):
        for node in (n1, n2):
            write_alt(node)
        token = n1.token_file.read_text().strip()
        backend = Nodes(parse_agents(f"{n1.agent_address},{n2.agent_address}"), token)
        app = FleetApp(backend, node_groups=True, poll_interval_s=0.5)
        first = {"n1": pids(n1), "n2": pids(n2)}
        async with app.run_test(size=(160, 50)) as pilot:
            screen = app.main_screen
            await wait_for(pilot, lambda: len(screen.fleet.panels) == 4, "4 panels", 30)
            screen.action_select(100)
            await pilot.press("m")  # every GPU of n2
            await wait_for(pilot, lambda: screen.marked == {100, 101}, "n2 marked")
            assert screen.check_action("mark_node", ()) is True
            await press_until(pilot, ("o",), ProfilePickerScreen)
            await pilot.press("enter")  # node-alt: the first other than the running node-base
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirm")
            confirm = app.screen
            assert isinstance(confirm, ConfirmScreen)
            assert confirm.title_text.startswith("Roll out node-alt to GPUs 100-101")
            assert "Scope: node n2 GPUs 100-101 (all of it)" in confirm.affected
            await pilot.press("y")
            await wait_for(pilot, lambda: isinstance(app.screen, RolloutScreen), "the rollout")
            rollout = app.screen
            assert isinstance(rollout, RolloutScreen)
            await wait_for(pilot, lambda: rollout.finished, "the rollout's end", 90)
            assert rollout.error is None and rollout.result is not None, rollout.error
            assert rollout.result.ok and rollout.result.done == (100, 101), rollout.result
            assert current(n2) == {0: "node-alt", 1: "node-alt"}
            assert pids(n1) == first["n1"]
            moved = pids(n2)
            assert all(moved[g] != first["n2"][g] for g in (0, 1))
            await pilot.press("escape")
            # The rollback dialog reads each GPU's previous profile from n2's agent.
            await wait_for(
                pilot,
                lambda: all(backend.running()[g].previous_name == "node-base" for g in (100, 101)),
                "n2's state of both GPUs",
            )
            await press_until(pilot, ("b",), ConfirmScreen)
            confirm = app.screen
            assert isinstance(confirm, ConfirmScreen)
            assert confirm.title_text == "Roll back GPUs 100, 101 to node-base?"
            assert confirm.affected.startswith("Scope: node n2 GPUs 100-101 (all of it)\n")
            await pilot.press("y")
            await wait_for(pilot, lambda: isinstance(app.screen, RolloutScreen), "the rollback")
            back = app.screen
            assert isinstance(back, RolloutScreen) and back.rollback
            await wait_for(pilot, lambda: back.finished, "the rollback's end", 90)
            assert back.error is None, back.error
            result = back.result
            assert result is not None and result.ok and result.done == (101, 100), result
            # n2's walk back took its fleet verdict (no job here: not measured, and why)
            assert result.verdict is not None and "no load" in result.verdict.note, result
        await backend.aclose()
        assert current(n2) == {0: "node-base", 1: "node-base"}
        assert current(n1) == {0: "node-base", 1: "node-base"}
        assert pids(n1) == first["n1"]  # n1 was never touched
        assert all(pids(n2)[g] != moved[g] for g in (0, 1))

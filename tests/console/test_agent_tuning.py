"""The tuning form on a many-node console, through real agents on loopback (Pilot): ``t`` on a
remote GPU reads that node's profile, shows the node's own preflight and applies the edited
profile itself there (no file written to apply it: the server comes back with the new value, the
other node untouched); a node that refuses the apply is named in one line and nothing is
launched; ``T`` saves the edited shared flags on every node, each keeping its own GPUs and
ports."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from node_helpers import Node, nodes, server_pid
from textual.pilot import Pilot
from tuning_helpers import type_into
from ui_helpers import press_until, wait_for

from tui.agent.client import parse_agents
from tui.agent.nodes import Nodes
from tui.profiles import load_profile
from tui.state.fleet_state import profile_of
from tui.ui.app import FleetApp
from tui.ui.confirm import ConfirmScreen
from tui.ui.retune.apply_screen import ApplyScreen
from tui.ui.retune.flows import describe_rollback
from tui.ui.tuning.form_screen import TuningFormScreen
from tui.ui.tuning.scope import ScopeScreen

pytestmark = [pytest.mark.timeout(150)]


def running_doc(node: Node, gpu: int) -> dict[str, Any]:
    """The profile document the node's fleet state says ``gpu`` runs."""
    records = json.loads((node.root / "state" / "fleet_state.json").read_text())
    doc: dict[str, Any] = records["gpus"][str(gpu)]["current"]
    return doc


def console(*agents: Node) -> tuple[FleetApp, Nodes]:
    token = agents[0].token_file.read_text().strip()
    backend = Nodes(parse_agents(",".join(n.agent_address for n in agents)), token)
    app = FleetApp(backend, node_groups=True, poll_interval_s=0.5)
    return app, backend


async def open_on(pilot: Pilot[None], app: FleetApp, gpu: int | None) -> TuningFormScreen:
    await wait_for(pilot, lambda: len(app.main_screen.fleet.panels) == 4, "4 panels", 30)
    if gpu is not None:
        app.main_screen.action_select(gpu)
    await press_until(pilot, ("t" if gpu is not None else "T",), TuningFormScreen)
    form = app.screen
    assert isinstance(form, TuningFormScreen)
    await wait_for(pilot, lambda: form.setup is not None, "the form's profile", 20)
    return form


def served(node: Node, gpu: int) -> dict[str, object]:
    info = httpx.get(f"{node.urls[gpu]}/server_info", timeout=5).json()
    assert isinstance(info, dict)
    return info


async def test_t_on_a_remote_gpu_saves_and_applies_through_its_agent(tmp_path: Path) -> None:
    with nodes(tmp_path, count=2, gpus=2, agents=False) as (n1, n2):
        for node in (n1, n2):
            node.start_agent("--measure-window", "2")  # the apply's throughput check, short
        app, backend = console(n1, n2)
        before = {(n.name, g): server_pid(n, g) for n in (n1, n2) for g in (0, 1)}
        async with app.run_test(size=(160, 50)) as pilot:
            form = await open_on(pilot, app, 101)  # n2's GPU 1
            assert form.gpu == 101 and form.running.name == "node-base"
            assert form.running.gpus == (100, 101)
            await type_into(pilot, form, "max_running_requests", "24")
            await wait_for(pilot, lambda: form.preflight is not None, "the node's preflight", 20)
            assert form.preflight is not None
            (item,) = form.preflight
            # The verdict is the node's own: asked of n2's agent directly, the same answer.
            other = backend.tuning(101)
            await asyncio.to_thread(other.load_profile, "node-base")
            assert form.candidate.profile is not None
            direct = await other.preflight(form.candidate.profile, (101,))
            assert item == direct[0] and item.gpu == 101 and item.fits
            await pilot.press("ctrl+t")
            # Opened on one GPU: the form asks whom the change is for (this GPU only).
            await wait_for(pilot, lambda: isinstance(app.screen, ScopeScreen), "the scope")
            await pilot.press("g")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirm")
            confirm = app.screen
            assert isinstance(confirm, ConfirmScreen)
            assert (
                confirm.title_text == "Restart GPU 101 (1 server) with profile node-base-n2-gpu1?"
            )
            await pilot.press("y")
            await wait_for(pilot, lambda: isinstance(app.screen, ApplyScreen), "the apply", 20)
            screen = app.screen
            assert isinstance(screen, ApplyScreen)
            await wait_for(pilot, lambda: screen.progress.result is not None, "the apply's end", 90)
            result = screen.progress.result
            assert result is not None and result.ok, result
            assert result.gpus == (101,)
            # The rollback dialog reads what the nodes' agents say GPU 101 ran before.
            await wait_for(pilot, lambda: 101 in backend.running(), "n2's state", 10)
            await wait_for(
                pilot,
                lambda: backend.running()[101].current_name == "node-base-n2-gpu1",
                "n2's new state",
                10,
            )
            running = backend.running()
            assert running[101].previous_name == "node-base"
            title, _ = describe_rollback(running, (0, 1, 100, 101))
            assert title == "Roll back GPU 101 to node-base?"
        await backend.aclose()
        # Applied on n2 in its own GPU numbers, the profile itself (no file written to apply
        # it, on either node: issue 37); n1 untouched.
        applied = profile_of(running_doc(n2, 1))
        assert applied.name == "node-base-n2-gpu1"
        assert applied.gpus == (0, 1) and applied.ports == tuple(n2.ports)
        assert [o.gpu for o in applied.overrides] == [1]
        for node in (n1, n2):
            assert not (node.root / "profiles" / "node-base-n2-gpu1.toml").exists()
        # n2's GPU 1 came back with the new value; everything else kept its server.
        assert server_pid(n2, 1) != before[("n2", 1)]
        assert served(n2, 1)["max_running_requests"] == 24
        for key in (("n1", 0), ("n1", 1), ("n2", 0)):
            node = n1 if key[0] == "n1" else n2
            assert server_pid(node, key[1]) == before[key], key


async def test_a_node_refusing_the_apply_is_one_line_and_nothing_is_launched(
    tmp_path: Path,
) -> None:
    with nodes(tmp_path, count=2, gpus=2, agents=False) as (n1, n2):
        n1.start_agent()
        n2.start_readonly_agent()
        app, backend = console(n1, n2)
        before = {g: server_pid(n2, g) for g in (0, 1)}
        async with app.run_test(size=(160, 50)) as pilot:
            form = await open_on(pilot, app, 100)
            await type_into(pilot, form, "max_running_requests", "20")
            # A read-only agent still answers the preflight (a read): its verdict is shown.
            await wait_for(pilot, lambda: form.preflight is not None, "the node's preflight", 20)
            await pilot.press("ctrl+t")
            await wait_for(pilot, lambda: isinstance(app.screen, ScopeScreen), "the scope")
            await pilot.press("g")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirm")
            await pilot.press("y")
            # The apply's report says the node refused it, in one line.
            await wait_for(pilot, lambda: isinstance(app.screen, ApplyScreen), "the apply", 10)
            screen = app.screen
            assert isinstance(screen, ApplyScreen)
            await wait_for(pilot, lambda: screen.error is not None, "the refusal", 20)
            assert screen.error is not None and "\n" not in screen.error
            assert "node n2: HTTP 403:" in screen.error and "read-only" in screen.error
        await backend.aclose()
        assert {g: server_pid(n2, g) for g in (0, 1)} == before
        assert not (n2.root / "profiles" / "node-base-n2-gpu0.toml").exists()
        journal = (n2.root / "state" / "journal.jsonl").read_text().splitlines()
        assert [json.loads(line)["type"] for line in journal] == ["apply"], "something ran"
        # T over both: n2 refuses the save, n1 keeps it; an Apply then restarts n1's GPUs only.
        tuning = backend.tuning(None)
        shown = await asyncio.to_thread(tuning.load_profile, "node-base")
        assert tuning.targets(shown.gpus) == (0, 1, 100, 101)
        saved = await asyncio.to_thread(tuning.save_profile, replace(shown, name="both-try"))
        assert saved.paths == (f"n1:{n1.root / 'profiles' / 'both-try.toml'}",)
        (failure,) = saved.failures
        assert failure.startswith("node n2: HTTP 403") and "\n" not in failure
        assert tuning.targets(shown.gpus) == (0, 1)


async def test_T_saves_the_shared_flags_on_every_node_each_with_its_own_ports(
    tmp_path: Path,
) -> None:
    with nodes(tmp_path, count=2, gpus=2) as (n1, n2):
        app, backend = console(n1, n2)
        async with app.run_test(size=(160, 50)) as pilot:
            form = await open_on(pilot, app, None)
            assert form.gpu is None and form.restart_gpus == (0, 1, 100, 101)
            await type_into(pilot, form, "max_running_requests", "28")
            await wait_for(pilot, lambda: form.preflight is not None, "every node's preflight", 20)
            assert form.preflight is not None
            assert [p.gpu for p in form.preflight] == [0, 1, 100, 101]
            await pilot.press("ctrl+s")
            await wait_for(
                pilot,
                lambda: any("Profile saved" in str(n.title) for n in app._notifications),
                "the save",
                20,
            )
        await backend.aclose()
        for node in (n1, n2):
            saved = load_profile(node.root / "profiles" / "node-base-tuned.toml")
            assert saved.server.max_running_requests == 28
            assert saved.gpus == (0, 1) and saved.ports == tuple(node.ports), node.name

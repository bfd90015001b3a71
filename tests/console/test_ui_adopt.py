"""The console's ``A`` (issue 35): on a fleet whose servers the state records nothing of, a dialog
shows what adopting them writes (each server, the profile file's text, what it cannot hold);
Adopt sends that very plan to the port, and nothing else reaches it. Recording port,
fixed data; the dialog's SVG snapshot."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from textual.pilot import Pilot
from textual.widgets import Button, Input, Static
from ui_helpers import (
    RecordingFleet,
    make_app,
    press_until,
    ready_server,
    settle,
    seven_gpu_fleet,
    wait_for,
)

from tui.control.takeover import RunningServer
from tui.fleet.snapshot import FleetSnapshot
from tui.ops.adoption import Adoptee, AdoptError, AdoptPlan, AdoptRequest
from tui.ops.commands import Adopt, Kind
from tui.profiles.from_servers import ServerCommand, draft_profile
from tui.ui.adopt_screen import AdoptScreen
from tui.ui.app import FleetApp
from tui.ui.main_screen import MainScreen

PY = "/workspace/venv/bin/python"
FLAGS = ("--model-path", "/models/Qwen3.6-27B-FP8", "--mem-fraction-static", "0.88",
         "--max-mamba-cache-size", "80", "--enable-metrics")  # fmt: skip


def _argv(gpu: int) -> tuple[str, ...]:
    slots = ("--max-mamba-cache-size", "200") if gpu == 1 else ()
    return (PY, "-m", "sglang.launch_server", "--port", str(30000 + gpu), *FLAGS, *slots)


def fixed_plan(name: str) -> AdoptPlan:
    """What adopting GPUs 0 and 1 (ports 30000-30001) as ``name`` writes, with fixed data."""
    commands = [
        ServerCommand(g, 30000 + g, _argv(g), {"PYTHONPATH": "/tmp/site"}, PY) for g in (0, 1)
    ]
    drafted = draft_profile(
        name, commands, release="0.5.17", log=("/workspace/logs", "sglang_gpu{gpu}.log"),
        own_env={}, note="adopted from the servers running on ports 30000,30001",
    )  # fmt: skip
    adoptees = tuple(
        Adoptee(g, RunningServer(30000 + g, 4100 + g, 4000, 9000 + g, 0.0, _argv(g), {}, None),
                f"/workspace/logs/sglang_gpu{g}.log")
        for g in (0, 1)
    )  # fmt: skip
    found = (
        "release: SGLang 0.5.17 (port 30000's /server_info)",
        "GPU 0: the driver lists pid 4110 of it",
        "GPU 1: the driver lists pid 4111 of it",
    )
    return AdoptPlan(
        AdoptRequest((30000, 30001), name, (0, 1)),
        adoptees,
        drafted.profile,
        Path(f"/home/op/.config/gpufleet/profiles/{name}.toml"),
        ("port 30001: --json-model-override-args has 2 values; not kept",),
        found,
    )


@dataclass
class AdoptingActions(RecordingFleet):
    """The recording port, whose plans are fixed data (its ``Adopt`` is recorded as usual)."""

    taken: set[str] = field(default_factory=set)
    """Profile names that exist: planning them is refused."""
    planned: list[tuple[tuple[int, ...], tuple[int, ...], str]] = field(default_factory=list)
    """Every plan read: (ports, GPUs, name)."""

    async def plan_adoption(
        self, ports: tuple[int, ...], gpus: tuple[int, ...], name: str
    ) -> AdoptPlan:
        self.planned.append((ports, gpus, name))
        if name in self.taken:
            raise AdoptError(f"--name: a profile {name!r} exists (/x); choose another name")
        return fixed_plan(name)


def script_fleet() -> FleetSnapshot:
    """GPUs 0 and 1 serve, started by the operator's script: the state records nothing."""
    fleet = seven_gpu_fleet()
    panels = tuple(
        replace(p, server=ready_server(p.gpu_index, stranger=True)) if p.gpu_index < 2 else p
        for p in fleet.panels
    )
    return replace(fleet, panels=panels)


def _app(actions: RecordingFleet, fleet: FleetSnapshot | None = None) -> FleetApp:
    app = make_app(script_fleet() if fleet is None else fleet, actions=actions)
    app.animation_level = "none"
    return app


async def _plan_shown(pilot: Pilot[None], screen: AdoptScreen, name: str) -> None:
    await wait_for(
        pilot,
        lambda: screen.plan is not None and screen.plan.profile.name == name,
        f"the plan of {name}",
    )


def _text(screen: AdoptScreen, selector: str) -> str:
    return str(screen.query_one(selector, Static).render())


async def test_a_shows_what_will_be_written_and_adopt_sends_that_plan() -> None:
    actions = AdoptingActions()
    app = _app(actions)
    async with app.run_test(size=(120, 50)) as pilot:
        await settle(pilot, app)
        assert app.main_screen.check_action("adopt", ()) is True
        await press_until(pilot, ("A",), AdoptScreen)
        screen = app.screen
        assert isinstance(screen, AdoptScreen)
        offered = screen.offered
        assert offered.startswith("adopted-")
        await _plan_shown(pilot, screen, offered)
        assert "ports 30000,30001 (GPUs 0,1)" in screen.title_text
        shown = _text(screen, "#adopt-plan")
        assert f"GPU 0: port 30000, pid 4100 ({' '.join(_argv(0))})" in shown
        assert f'name = "{offered}"' in shown and "max_mamba_cache_size = 200" in shown
        assert "not kept: port 30001: --json-model-override-args" in shown
        assert actions.planned == [((30000, 30001), (0, 1), offered)]
        assert actions.commands == []
        await pilot.click("#adopt-yes")
        await wait_for(pilot, lambda: isinstance(app.screen, MainScreen), "the grid")
        await wait_for(pilot, lambda: len(actions.commands) == 1, "the adoption")
        await wait_for(
            pilot, lambda: any(n.title == "Adopted" for n in app._notifications), "the toast"
        )
    assert actions.commands == [Adopt(fixed_plan(offered))]  # the very plan shown


async def test_a_name_that_exists_is_said_and_adopt_waits_for_a_good_one() -> None:
    actions = AdoptingActions(taken={"seed"})
    app = _app(actions)
    async with app.run_test(size=(120, 50)) as pilot:
        await settle(pilot, app)
        await press_until(pilot, ("A",), AdoptScreen)
        screen = app.screen
        assert isinstance(screen, AdoptScreen)
        await _plan_shown(pilot, screen, screen.offered)
        field_ = screen.query_one("#adopt-name", Input)
        field_.value = "seed"
        await pilot.pause()
        assert screen.query_one("#adopt-yes", Button).disabled  # typed, not read yet
        await pilot.press("enter")
        await wait_for(
            pilot,
            lambda: "exists" in str(screen.query_one("#adopt-problem").render()),
            "the refusal",
        )
        assert screen.plan is None and screen.query_one("#adopt-yes", Button).disabled
        field_.value = "seed-now"
        await pilot.press("enter")
        await _plan_shown(pilot, screen, "seed-now")
        assert not screen.query_one("#adopt-yes", Button).disabled
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, MainScreen), "the grid")
    assert len(actions.planned) == 3 and actions.commands == []  # never adopted


async def test_the_key_is_hidden_where_there_is_nothing_to_adopt() -> None:
    actions = AdoptingActions()
    app = _app(actions, seven_gpu_fleet())  # every server the fleet's own
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        assert app.main_screen.check_action("adopt", ()) is False
        await pilot.press("A")
        await pilot.pause()
        assert isinstance(app.screen, MainScreen)
    assert actions.planned == [] and actions.commands == []


async def test_a_port_that_cannot_adopt_hides_the_key() -> None:
    actions = RecordingFleet(supported=frozenset(Kind) - {Kind.ADOPT})  # many nodes, read-only
    app = _app(actions)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        assert app.main_screen.check_action("adopt", ()) is False


def test_adopt_dialog_snapshot(snap_compare: Any) -> None:
    async def open_dialog(pilot: Pilot[None]) -> None:
        app = pilot.app
        assert isinstance(app, FleetApp)
        await settle(pilot, app)
        await press_until(pilot, ("A",), AdoptScreen)
        screen = app.screen
        assert isinstance(screen, AdoptScreen)
        field_ = screen.query_one("#adopt-name", Input)
        field_.cursor_blink = False
        field_.value = "seed-now"
        await pilot.press("enter")
        await _plan_shown(pilot, screen, "seed-now")
        await pilot.pause()

    assert snap_compare(_app(AdoptingActions()), terminal_size=(120, 50), run_before=open_dialog)

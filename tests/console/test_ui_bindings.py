"""Every key of the console through Pilot: what reached the backend or changed on screen."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import pytest
from textual.binding import Binding
from textual.pilot import Pilot
from textual.screen import ModalScreen
from textual.widgets import Input
from ui_helpers import (
    FixedPoller,
    RecordingFleet,
    finish_actions,
    make_app,
    pipeline_status,
    press_until,
    settle,
    seven_gpu_fleet,
    wait_for,
)

from tui.control.stop_release import DrainProgress
from tui.fleet.snapshot import NODE_STRIDE, FleetSnapshot, NodeStatus
from tui.ops.commands import Kill, Kind, Relaunch, Rollback, StartPipeline, StopFleet, StopPipeline
from tui.ui.app import FleetApp
from tui.ui.confirm import ConfirmScreen
from tui.ui.detail.detail_screen import DetailScreen
from tui.ui.detail.log_view import LogView
from tui.ui.grid.gpu_panel import GpuPanelView
from tui.ui.help_screen import HelpScreen
from tui.ui.main_screen import MainScreen
from tui.ui.pipeline.generation_pane import GenerationPane
from tui.ui.quit_screen import QuitScreen
from tui.ui.stop_screen import StopScreen


def app_with(actions: RecordingFleet | None = None, **kwargs: Any) -> FleetApp:
    return make_app(actions=actions, **kwargs)


def selected_views(app: FleetApp) -> list[int]:
    return [v.gpu_index for v in app.screen.query(GpuPanelView) if v.has_class("-selected")]


async def test_arrows_move_the_selection_through_the_grid() -> None:
    app = app_with()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, app)
        assert app.main_screen.selected == 0
        await pilot.press("right")
        assert app.main_screen.selected == 1
        await pilot.press("down")  # three columns at 80x24
        assert app.main_screen.selected == 4
        await pilot.press("left")
        assert app.main_screen.selected == 3
        await pilot.press("up")
        assert app.main_screen.selected == 0
        await pilot.press("left")  # clamped at the first panel
        assert app.main_screen.selected == 0
        assert selected_views(app) == [0]


async def test_digits_select_the_gpu_with_that_index() -> None:
    app = app_with()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, app)
        for digit in range(10):
            await pilot.press("2", str(digit))
            expected = digit if digit < 7 else 2  # no GPU 7-9: the selection stays
            assert app.main_screen.selected == expected
            await pilot.pause()
            assert selected_views(app) == [expected]


async def test_click_selects_a_panel() -> None:
    app = app_with()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, app)
        # The first readings may still move the grid (a panel's height follows its lines):
        # click once #gpu-5 stays where it is across two refreshes (under load it had not).
        panel = app.main_screen.query_one("#gpu-5")
        where = None
        for _ in range(50):
            await pilot.pause()
            if panel.region == where:
                break
            where = panel.region
        await pilot.click("#gpu-5")
        assert app.main_screen.selected == 5


async def test_enter_opens_the_detail_and_escape_returns() -> None:
    app = app_with()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        await pilot.press("4", "enter")
        await pilot.pause()
        assert isinstance(app.screen, DetailScreen) and app.screen.gpu == 4
        await pilot.press("escape")
        assert isinstance(app.screen, MainScreen)


async def open_detail(pilot: Pilot[None], app: FleetApp) -> DetailScreen:
    """Settle the console, open the selected GPU's detail screen (Enter) and return it."""
    await settle(pilot, app)
    await pilot.press("enter")
    screen = app.screen
    assert isinstance(screen, DetailScreen)
    return screen


async def test_detail_log_is_filterable_and_slash_focuses_the_filter() -> None:
    app = app_with()
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_detail(pilot, app)
        log = screen.query_one(LogView)
        loop_deadline = 200
        while not log.buffer.lines and loop_deadline:
            await pilot.pause(0.01)
            loop_deadline -= 1
        assert len(log.shown_lines) == 6
        await pilot.press("slash")
        assert isinstance(app.focused, Input)
        await pilot.press(*"decode")
        await pilot.pause()
        assert len(log.shown_lines) == 2
        assert all("Decode" in line for line in log.shown_lines)


@pytest.mark.parametrize(
    ("keys", "expected"),
    [
        (("3", "k", "y"), Kill((3,))),
        (("K", "y"), Kill((0, 1, 2, 3, 4, 5, 6))),
        (("3", "k", "d"), Kill((3,))),
        (("3", "k", "t"), Kill((3,), "terminate")),
        (("K", "9"), Kill((0, 1, 2, 3, 4, 5, 6), "kill")),
        (("1", "r", "enter", "y"), Relaunch((1,))),  # the picker keeps the running one
        (("R", "enter", "y"), Relaunch((0, 1, 2, 3, 4, 5, 6))),
        (("b", "y"), Rollback()),
    ],
)
async def test_confirmed_operations_reach_the_backend(
    keys: tuple[str, ...], expected: tuple[str, tuple[object, ...]]
) -> None:
    actions = RecordingFleet()
    app = app_with(actions, profile="aggressive")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, app)
        await press_until(pilot, keys[:-1], ModalScreen)
        await pilot.press(keys[-1])
        await finish_actions(pilot, app)
        assert actions.commands == [expected]


@pytest.mark.parametrize(
    "keys", [("k",), ("K",), ("r", "enter"), ("R", "enter"), ("b",), ("r",), ("R",)]
)
async def test_cancelled_operations_do_not_reach_the_backend(keys: tuple[str, ...]) -> None:
    actions = RecordingFleet()
    app = app_with(actions, profile="aggressive")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, app)
        await press_until(pilot, keys, ModalScreen)
        await pilot.press("escape")
        await finish_actions(pilot, app)
        assert actions.commands == []
        assert isinstance(app.screen, MainScreen)


async def test_confirm_names_the_affected_server() -> None:
    app = app_with()
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot, app)
        await pilot.press("2", "k")
        screen = app.screen
        assert isinstance(screen, StopScreen)
        assert "GPU 2" in screen.title_text
        assert "port 30002" in screen.affected and "failed" in screen.affected


async def test_tune_without_a_profile_says_how_to_give_one() -> None:
    actions = RecordingFleet(current=None)
    app = app_with(actions)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, app)
        await pilot.press("t")
        await wait_for(pilot, lambda: bool(app._notifications))
        assert actions.commands == []
        assert any("--profile" in str(n.message) for n in app._notifications)


async def test_p_starts_a_stopped_pipeline_without_asking() -> None:
    actions = RecordingFleet()
    app = app_with(actions, status=pipeline_status(state="stopped"))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, app)
        await pilot.press("p")
        await finish_actions(pilot, app)
        assert actions.commands == [StartPipeline()]


async def test_p_stops_a_running_pipeline_after_confirmation() -> None:
    actions = RecordingFleet()
    app = app_with(actions, status=pipeline_status(state="running"))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, app)
        while app.main_screen.pipeline_status is None:
            await pilot.pause(0.01)
        await pilot.press("p")
        assert isinstance(app.screen, ConfirmScreen)
        assert "in flight" in app.screen.affected
        await pilot.press("y")
        await finish_actions(pilot, app)
        assert actions.commands == [StopPipeline()]


async def test_g_shows_and_focuses_then_hides_the_generation_pane() -> None:
    app = app_with(status=pipeline_status())
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        pane = app.screen.query_one(GenerationPane)
        assert not pane.display
        await pilot.press("g")
        assert pane.display and pane.has_focus
        await pilot.press("g")
        assert not pane.display


async def test_question_mark_shows_every_key_and_escape_closes() -> None:
    app = app_with()
    async with app.run_test(size=(100, 50)) as pilot:
        await settle(pilot, app)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        text = str(app.screen.query_one("#help-text").render())
        for description in (
            "Kill all",
            "Relaunch",
            "Start/stop pipeline",
            "Filter (regex)",
            "Quit",
        ):
            assert description in text
        # the keys of the modal screens and modes too
        for description in (
            "Longer range",
            "Next error",
            "Open in $PAGER",
            "Save as new profile",
            "Roll out",
            "Terminate",
            "Stop fleet and quit",
            "Details",
        ):
            assert description in text, description
        await pilot.press("escape")
        assert isinstance(app.screen, MainScreen)


async def test_q_keep_running_quits_without_stopping_the_fleet() -> None:
    actions = RecordingFleet()
    app = app_with(actions)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, app)
        await pilot.press("q")
        assert isinstance(app.screen, QuitScreen)
        await pilot.press("k")
        await pilot.pause()
    assert app.return_code == 0
    assert actions.commands == []


async def test_q_stop_fleet_stops_it_then_quits() -> None:
    actions = RecordingFleet()
    app = app_with(actions)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, app)
        await pilot.press("q", "s")
        await pilot.pause()
    assert actions.commands == [StopFleet()]
    assert not app.is_running


async def test_quit_with_stop_keeps_the_console_live_until_the_stop_is_over() -> None:
    gate = asyncio.Event()
    drain = DrainProgress(3, "draining", 12.0, running=4, queued=0)
    actions = RecordingFleet(stop_events=[drain], stop_gate=gate)
    app = make_app(actions=actions, poll_interval_s=0.05)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, app)
        await pilot.press("q", "s")
        await wait_for(pilot, lambda: "GPU 3 draining 12 s, 4 running" in app.sub_title, "progress")
        # The stop is running: the grid still takes keys and the polls still arrive.
        assert isinstance(app.screen, MainScreen) and app.is_running
        before = app.main_screen.selected
        await pilot.press("right")
        assert app.main_screen.selected == before + 1
        port = app.port
        assert isinstance(port, RecordingFleet) and isinstance(port.poller, FixedPoller)
        polls = port.poller.polls
        await wait_for(pilot, lambda: port.poller.polls > polls + 1, "more polls")
        gate.set()
        await wait_for(pilot, lambda: not app.is_running, "the console to close")
    assert actions.commands == [StopFleet()]


async def test_q_cancel_stays() -> None:
    actions = RecordingFleet()
    app = app_with(actions)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, app)
        await pilot.press("q", "escape")
        assert isinstance(app.screen, MainScreen)
        assert app.is_running
    assert actions.commands == []


async def test_stop_fleet_is_disabled_without_backend_support() -> None:
    actions = RecordingFleet(supported=frozenset())
    app = app_with(actions)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, app)
        await pilot.press("q", "s")  # disabled: nothing happens
        assert isinstance(app.screen, QuitScreen)
        await pilot.press("escape")
    assert actions.commands == []


OPERATION_KEYS = [
    (Kind.KILL, "kill_selected", "k"),
    (Kind.KILL, "kill_all", "K"),
    (Kind.RELAUNCH, "relaunch_selected", "r"),
    (Kind.RELAUNCH, "relaunch_all", "R"),
    (Kind.TUNE, "tune", "t"),
    (Kind.ROLLBACK, "rollback", "b"),
    (Kind.JOURNAL, "journal", "j"),
    (Kind.PIPELINE, "toggle_pipeline", "p"),
]


async def test_operation_keys_are_disabled_without_backend_support() -> None:
    actions = RecordingFleet(supported=frozenset())
    app = app_with(actions, profile="aggressive", status=pipeline_status(state="stopped"))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, app)
        screen = app.main_screen
        for intent, action, key in OPERATION_KEYS:
            assert screen.check_action(action, ()) is None, intent  # greyed out, not hidden
            actions.supported = frozenset({intent})
            assert screen.check_action(action, ()) is True, intent
            actions.supported = frozenset()
            await pilot.press(key)
            await finish_actions(pilot, app)
            assert isinstance(app.screen, MainScreen), key
        assert actions.commands == []
        # Nothing ran, and each press said why (issue 30: a disabled key did nothing, silently).
        said = [str(n.message) for n in app._notifications]
        assert len(said) == len(OPERATION_KEYS), said
        for (_, _, key), message in zip(OPERATION_KEYS, said, strict=True):
            assert message.startswith(f"{key} (") and " is off: " in message, message


async def test_detail_kill_and_relaunch_reach_the_backend_for_that_gpu() -> None:
    actions = RecordingFleet()
    app = app_with(actions)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        await pilot.press("5", "enter")
        await pilot.press("k", "y")
        await pilot.press("r", "y")
        await finish_actions(pilot, app)
        assert actions.commands == [Kill((5,)), Relaunch((5,))]
        assert isinstance(app.screen, DetailScreen)


async def test_footer_lists_operation_keys_with_descriptions_and_ids() -> None:
    bindings: list[Binding] = []
    for binding in [*FleetApp.BINDINGS, *MainScreen.BINDINGS, *DetailScreen.BINDINGS]:
        assert isinstance(binding, Binding), binding  # an id needs a Binding, not a tuple
        bindings.append(binding)
    ids = [b.id for b in bindings]
    assert all(ids) and len(set(ids)) == len(ids)
    assert all(b.description for b in bindings)


async def test_command_palette_runs_an_operation_through_its_binding() -> None:
    actions = RecordingFleet()
    app = app_with(actions)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot, app)
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"Kill all")
        deadline = 300
        from textual.command import CommandPalette

        palette = app.screen
        assert isinstance(palette, CommandPalette)
        while not palette._list_visible and deadline:  # wait for the search to answer
            await pilot.pause(0.01)
            deadline -= 1
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, StopScreen)
        await pilot.press("y")
        await finish_actions(pilot, app)
        assert actions.commands == [Kill((0, 1, 2, 3, 4, 5, 6))]


async def test_new_snapshots_reach_the_open_detail_screen() -> None:
    app = app_with(poll_interval_s=0.01)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_detail(pilot, app)
        port = app.port
        assert isinstance(port, RecordingFleet)
        fleet = seven_gpu_fleet()
        from dataclasses import replace

        server = fleet.panels[0].server
        assert server is not None
        changed = replace(fleet.panels[0], server=replace(server, running=3))
        port.poller.snapshot = replace(fleet, panels=(changed, *fleet.panels[1:]))
        for _ in range(500):
            shown = screen.panel.server if screen.panel is not None else None
            if shown is not None and shown.running == 3:
                break
            await pilot.pause(0.01)
        assert "running 3 " in str(screen.query_one("#detail-numbers").render())


async def test_a_snapshot_reaching_a_detail_screen_whose_widgets_are_gone_is_ignored() -> None:
    """As the app closes, its screens' widgets go first while they are still on the stack: a
    snapshot posted then (a 0.01 s poll, seen in a fresh clone's run) raised NoMatches."""
    app = app_with()
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_detail(pilot, app)
        await screen.query_one("#detail-top").remove()
        screen.fleet = seven_gpu_fleet()  # raised NoMatches from the watcher
        await pilot.pause()
        assert screen.is_mounted and app.return_code is None


def two_node_fleet() -> FleetSnapshot:
    """GPUs 0-1 of node n1 and 0-2 of node n2 (node position * NODE_STRIDE + GPU)."""
    base = seven_gpu_fleet().panels
    panels = [
        replace(base[1], gpu_index=0, node="n1"),
        replace(base[5], gpu_index=1, node="n1"),
        replace(base[1], gpu_index=NODE_STRIDE, node="n2"),
        replace(base[5], gpu_index=NODE_STRIDE + 1, node="n2"),
        replace(base[1], gpu_index=NODE_STRIDE + 2, node="n2"),
    ]
    nodes = (NodeStatus("n1", "127.0.0.1:9401", True), NodeStatus("n2", "127.0.0.1:9402", True))
    return replace(seven_gpu_fleet(), panels=tuple(panels), nodes=nodes)


@pytest.mark.parametrize(
    ("keys", "expected"),
    [
        (("down", "X", "d"), Kill((100, 101, 102))),
        (("down", "X", "t"), Kill((100, 101, 102), "terminate")),
        (("N", "y"), Relaunch((0, 1))),
    ],
)
async def test_node_keys_act_on_the_selected_panels_node(
    keys: tuple[str, ...], expected: tuple[str, tuple[object, ...]]
) -> None:
    actions = RecordingFleet()
    app = make_app(two_node_fleet(), actions=actions, node_groups=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        if keys[0] == "down":
            app.main_screen.selected = NODE_STRIDE  # the first GPU of node n2
            keys = keys[1:]
        await press_until(pilot, keys[:-1], ModalScreen)
        await pilot.press(keys[-1])
        await finish_actions(pilot, app)
        assert actions.commands == [expected]


async def test_node_keys_are_hidden_on_one_node() -> None:
    app = app_with()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        assert app.main_screen.check_action("stop_node", ()) is False
        await pilot.press("X")
        assert isinstance(app.screen, MainScreen)

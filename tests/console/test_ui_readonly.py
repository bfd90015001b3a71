"""Read-only mode: every fleet-changing key of every screen is disabled and reaches nothing.

The bindings are read from the classes themselves (every module of ``tui.ui``), so a key added
later without a classification, or on a screen that is not gated, fails here.
"""

from __future__ import annotations

import importlib
import pkgutil
import typing
from collections.abc import Callable
from operator import attrgetter
from typing import Any

import pytest
from textual.actions import parse
from textual.binding import Binding
from textual.command import Command, CommandList, CommandPalette
from textual.containers import ScrollableContainer
from textual.dom import DOMNode
from textual.screen import Screen
from textual.widgets import Input
from textual.widgets._footer import FooterKey
from ui_helpers import (
    RecordingFleet,
    finish_actions,
    make_app,
    pipeline_status,
    settle,
    shipped_profiles,
    wait_for,
)

import tui.ui
from tui.ops import commands
from tui.ops.commands import Kill, Kind, Relaunch, StartPipeline
from tui.ops.port import ReadOnlyFleet, Refused
from tui.ui.app import FleetApp
from tui.ui.autotune.autotune_screen import AutotuneScreen
from tui.ui.autotune.form_screen import AutotuneFormScreen
from tui.ui.confirm import ConfirmScreen
from tui.ui.detail.detail_screen import DetailScreen
from tui.ui.footer import READ_ONLY_NOTE, ReadOnlyNote
from tui.ui.gate import ReadOnlyGate, class_bindings
from tui.ui.help_screen import HelpScreen
from tui.ui.journal.journal_screen import JournalScreen
from tui.ui.main_screen import MainScreen
from tui.ui.pipeline.generation_pane import GenerationPane
from tui.ui.quit_screen import QuitScreen, StopFailedScreen
from tui.ui.readonly import (
    BINDING_INTENTS,
    VIEWING_INTENTS,
    Says,
    binding_changes_fleet,
    changes_fleet,
)
from tui.ui.retune.apply_screen import ApplyScreen
from tui.ui.rollout.canary_screen import CanaryScreen
from tui.ui.rollout.rollback_dialog import RollbackScreen
from tui.ui.stop_screen import StopScreen
from tui.ui.tuning.form_screen import TuningFormScreen
from tui.ui.tuning.setup import FormSetup


def console_classes() -> list[type[DOMNode]]:
    """Every screen, widget and app class defined in ``tui.ui`` (every module imported)."""
    for info in pkgutil.walk_packages(tui.ui.__path__, "tui.ui."):
        importlib.import_module(info.name)
    found: dict[str, type[DOMNode]] = {}
    pending: list[type] = [DOMNode]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if cls.__module__.startswith("tui.ui."):
            found[f"{cls.__module__}.{cls.__qualname__}"] = cls
    return list(found.values())


def own_bindings(cls: type[DOMNode]) -> list[Binding]:
    return list(Binding.make_bindings(cls.__dict__.get("BINDINGS", ())))


def ours(cls: type[DOMNode]) -> list[Binding]:
    """The bindings ``cls`` has from the console's classes (itself and its bases in tui.ui)."""
    mine = [k for k in cls.__mro__ if k.__module__.startswith("tui.ui.")]
    return [b for k in mine for b in own_bindings(k)]


def changing_bindings(cls: type[DOMNode]) -> list[Binding]:
    return [b for b in ours(cls) if binding_changes_fleet(b.id)]


TEXTUAL_OWN = {
    ("ctrl+q", "quit"),  # closes the console; the fleet keeps running
    ("ctrl+c", "help_quit"),
    ("tab", "app.focus_next"),
    ("shift+tab", "app.focus_previous"),
    ("ctrl+c", "screen.copy_text"),
    ("super+c", "screen.copy_text"),
    # scrolling, inherited by the log viewer's LogView from Textual's ScrollableContainer
    *((b.key, b.action) for b in Binding.make_bindings(ScrollableContainer.BINDINGS)),
    # editing, inherited by the command and filter bars from Textual's Input
    *((b.key, b.action) for b in Binding.make_bindings(Input.BINDINGS)),
}
"""Textual's own bindings on the console's screens and app: none changes the fleet."""


CLASSES = console_classes()
BOUND = [cls for cls in CLASSES if own_bindings(cls)]


def test_the_walk_finds_every_screen_of_the_console() -> None:
    names = {cls.__name__ for cls in BOUND}
    assert {"FleetApp", "MainScreen", "DetailScreen", "StopScreen", "QuitScreen"} <= names
    assert {"TuningFormScreen", "CanaryScreen", "ConfirmScreen", "JournalScreen"} <= names


@pytest.mark.parametrize("cls", BOUND, ids=lambda cls: cls.__name__)
def test_every_binding_of_every_screen_is_classified(cls: type[DOMNode]) -> None:
    for binding in own_bindings(cls):
        assert binding.id in BINDING_INTENTS, (
            f"{cls.__name__} binds {binding.key!r} to {binding.action!r} with id {binding.id!r}, "
            "which tui.ui.readonly.BINDING_INTENTS does not classify"
        )


def test_textuals_own_bindings_change_nothing() -> None:
    theirs = {
        (b.key, b.action)
        for cls in BOUND
        for b in class_bindings(cls)
        if b.id is None or b.id not in BINDING_INTENTS
    }
    assert theirs <= TEXTUAL_OWN, theirs - TEXTUAL_OWN


def test_the_table_names_no_binding_that_does_not_exist() -> None:
    ids = {b.id for cls in BOUND for b in own_bindings(cls)}
    assert set(BINDING_INTENTS) - ids == set()


@pytest.mark.parametrize(
    "cls", [c for c in CLASSES if changing_bindings(c)], ids=lambda cls: cls.__name__
)
def test_every_screen_with_a_changing_binding_is_gated(cls: type[DOMNode]) -> None:
    assert issubclass(cls, ReadOnlyGate), f"{cls.__name__} must be a ReadOnlyGate"
    # Its own conditions go in check_operation: a check_action of its own would skip the gate.
    assert cls.check_action is ReadOnlyGate.check_action, cls.__name__
    # ... and it keeps the CSS of every base (Textual follows the first base only).
    styled = {k for k in cls.__mro__ if isinstance(k, type) and k.__dict__.get("DEFAULT_CSS")}
    assert styled <= set(cls._css_bases(cls)), cls.__name__
    assert cls.active_bindings is ReadOnlyGate.active_bindings, cls.__name__


def test_only_viewing_intents_keep_working() -> None:
    assert {Kind.JOURNAL} == VIEWING_INTENTS
    assert [i for i in [*Kind, *Says] if not changes_fleet(i)] == [Kind.JOURNAL]
    assert binding_changes_fleet("fleet.kill_all") and not binding_changes_fleet("grid.detail")
    assert binding_changes_fleet("no.such.binding")  # unknown: fails closed
    assert binding_changes_fleet(None)


# --- the read-only port ------------------------------------------------------------------------

PROFILE = shipped_profiles()["sim-aggressive"]
REFUSED: dict[type[commands.Op[Any]], commands.Op[Any]] = {
    commands.Kill: commands.Kill((0,)),
    commands.Relaunch: commands.Relaunch((0,)),
    commands.Apply: commands.Apply(PROFILE, (0,)),
    commands.Rollback: commands.Rollback(),
    commands.Restore: commands.Restore(),
    commands.Canary: commands.Canary("sim-aggressive", 3),
    commands.Rollout: commands.Rollout("sim-aggressive"),
    commands.StopFleet: commands.StopFleet(),
    commands.StartPipeline: commands.StartPipeline(),
    commands.StopPipeline: commands.StopPipeline(),
    commands.SaveProfile: commands.SaveProfile(PROFILE),
    commands.StartAutotune: commands.StartAutotune(("--wall", "60")),
    commands.SteerAutotune: commands.SteerAutotune("stop"),
}
"""One of every command (``Adopt`` needs a plan read from real servers: its kind is checked
by the capabilities below)."""


def test_every_command_is_listed() -> None:
    assert set(REFUSED) | {commands.Adopt} == set(typing.get_args(commands.Command))


@pytest.mark.parametrize("kind", sorted(REFUSED, key=attrgetter("__name__")))
async def test_the_read_only_port_refuses_every_command_without_asking_the_fleet(
    kind: type[commands.Op[Any]],
) -> None:
    inner = RecordingFleet()
    with pytest.raises(Refused, match="read-only console"):
        await ReadOnlyFleet(inner).run(REFUSED[kind])
    assert inner.commands == [] and inner.saved == []


async def test_the_read_only_port_reads_through_and_offers_only_viewing() -> None:
    inner = RecordingFleet()
    wrapper = ReadOnlyFleet(inner)
    assert wrapper.reads is inner
    assert wrapper.capabilities().kinds == {Kind.JOURNAL}
    assert wrapper.capabilities().reason(Kind.KILL) == "read-only"
    # the autotune search's status is a read: followed where the inner port follows it
    assert wrapper.capabilities().follows_autotune
    assert Kind.AUTOTUNE not in wrapper.capabilities()
    inner.supported = frozenset()
    assert Kind.JOURNAL not in wrapper.capabilities()  # never more than the fleet itself
    assert inner.commands == []


# --- Pilot: every changing key of every screen, pressed ------------------------------------


def readonly_app(actions: RecordingFleet, **kwargs: Any) -> FleetApp:
    return make_app(actions=actions, readonly=True, profile="sim-baseline", **kwargs)


SCREENS: dict[type[DOMNode], Callable[[FleetApp], Screen[Any] | None]] = {
    MainScreen: lambda app: None,  # the base screen
    DetailScreen: lambda app: DetailScreen(2, app.fleet, app.port),
    ConfirmScreen: lambda app: ConfirmScreen("Relaunch the server on GPU 2?", "port 30002"),
    RollbackScreen: lambda app: RollbackScreen("Roll back GPU 2 to sim-baseline?", "GPU 2"),
    StopScreen: lambda app: StopScreen("Stop the server on GPU 2?", "port 30002"),
    QuitScreen: lambda app: QuitScreen(False, 7, readonly=True),
    StopFailedScreen: lambda app: StopFailedScreen("refused on GPU 0: not verified"),
    TuningFormScreen: lambda app: TuningFormScreen(
        app.port,
        FormSetup(shipped_profiles()["sim-baseline"], ("sim-baseline",), 2, "sim-tuned"),
    ),
    CanaryScreen: lambda app: CanaryScreen(
        app.port, commands.Canary("sim-aggressive", 2), (0, 1, 2, 3)
    ),
    ApplyScreen: lambda app: ApplyScreen(app.port, commands.Apply("sim-aggressive", (2,))),
    AutotuneScreen: lambda app: AutotuneScreen(app.port, interval_s=3600),
    AutotuneFormScreen: lambda app: AutotuneFormScreen(predictor=None),
}
"""How to open each gated screen directly (in read-only mode no key leads to most of them)."""

CASES = [
    (cls, binding)
    for cls in SCREENS
    for binding in changing_bindings(cls)
    if not parse(binding.action)[0]  # 'app.' actions are the app's (none changes anything)
]


def test_every_gated_screen_is_pressed_below() -> None:
    gated = {c for c in CLASSES if changing_bindings(c)}
    assert gated == set(SCREENS)


@pytest.mark.parametrize(
    ("cls", "binding"), CASES, ids=[f"{c.__name__}-{b.key}-{b.id}" for c, b in CASES]
)
async def test_a_changing_key_is_disabled_and_reaches_nothing(
    cls: type[DOMNode], binding: Binding
) -> None:
    actions = RecordingFleet()
    app = readonly_app(actions, status=pipeline_status(state="running"))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        opened = SCREENS[cls](app)
        if opened is not None:
            await app.push_screen(opened)
            await pilot.pause()
        screen = app.screen
        assert isinstance(screen, cls)
        _, name, parameters = parse(binding.action)
        # Greyed out (None); or hidden (False) where the key does not apply here at all
        # (the node keys on one node, the canary's roll-out before a verdict): never True.
        assert screen.check_action(name, parameters) in (None, False)
        stack = list(app.screen_stack)
        await pilot.press(binding.key)
        await finish_actions(pilot, app)
        assert list(app.screen_stack) == stack  # nothing opened, nothing dismissed
        assert actions.commands == [] and actions.saved == []
        # A canary screen pushed by hand starts its canary: refused at the boundary too.
        if isinstance(screen, CanaryScreen):
            assert screen.result is None


async def test_the_same_keys_work_when_not_read_only() -> None:
    """The comparison that shows the test above can fail: writable, `K` asks, `p` stops."""
    actions = RecordingFleet()
    app = make_app(actions=actions, status=pipeline_status(state="stopped"))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        assert app.main_screen.check_action("kill_all", ()) is True
        await pilot.press("K")
        assert isinstance(app.screen, StopScreen)


async def test_footer_says_read_only_in_words_first() -> None:
    """It began with 'pkKrRtTbco read-only' (issue 30): now one line of words, then the keys
    that work; the disabled ones are left to the help and the palette, and a press says why."""
    app = readonly_app(RecordingFleet(), status=pipeline_status())
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot, app)
        await pilot.pause()
        keys = {k.key: k for k in app.screen.query(FooterKey)}
        for key in ("p", "k", "K", "r", "R", "t", "T", "b", "c", "o"):
            assert key not in keys, key
        for key in ("enter", "g", "j", "question_mark", "q"):
            assert not keys[key].has_class("-disabled"), key
        labels = [str(label.render()) for label in app.screen.query(ReadOnlyNote)]
        assert labels[0] == READ_ONLY_NOTE
        assert "read-only" in app.title
        await pilot.press("K")
        await wait_for(pilot, lambda: bool(app._notifications), "the reason")
        said = [str(n.message) for n in app._notifications]
        assert said == ["K (Kill all) is off: the console is read-only (it only watches)"]


async def test_footer_of_the_detail_screen_says_read_only() -> None:
    app = readonly_app(RecordingFleet())
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot, app)
        await pilot.press("3", "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, DetailScreen), "the detail")
        await pilot.pause()
        keys = {k.key: k for k in app.screen.query(FooterKey)}
        assert "k" not in keys and "r" not in keys
        assert not keys["escape"].has_class("-disabled")
        labels = [str(label.render()) for label in app.screen.query(ReadOnlyNote)]
        assert labels[0] == READ_ONLY_NOTE


async def test_palette_lists_a_changing_command_as_read_only_and_runs_nothing() -> None:
    actions = RecordingFleet()
    app = readonly_app(actions)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"Kill all")
        palette = app.screen
        assert isinstance(palette, CommandPalette)
        await wait_for(pilot, lambda: palette._list_visible, "the palette's answer")
        commands = palette.query_one(CommandList).options
        hits = [(str(c.hit.text), c.hit.help) for c in commands if isinstance(c, Command)]
        assert ("Kill all", "key: K · disabled: read-only") in hits, hits
        await pilot.press("enter")
        await wait_for(pilot, lambda: bool(app._notifications), "the refusal")
        await finish_actions(pilot, app)
        assert not isinstance(app.screen, StopScreen)
        assert actions.commands == []
        assert any("read-only" in str(n.message) for n in app._notifications)


async def test_viewing_keeps_working_read_only() -> None:
    actions = RecordingFleet()
    app = readonly_app(actions, status=pipeline_status())
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        await pilot.press("right", "right")
        assert app.main_screen.selected == 2
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, DetailScreen), "the detail")
        await pilot.press("slash")
        assert isinstance(app.focused, Input)
        await pilot.press("escape")  # leaves the filter
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, MainScreen), "the grid")
        await pilot.press("g")
        assert app.screen.query_one(GenerationPane).display
        await pilot.press("g", "j")
        await wait_for(pilot, lambda: isinstance(app.screen, JournalScreen), "the journal")
        await pilot.press("escape", "question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), "the help")
        help_text = str(app.screen.query_one("#help-text").render())
        assert "Kill all  (disabled: read-only)" in help_text
        assert "Journal  (disabled" not in help_text and "Detail  (disabled" not in help_text
        await pilot.press("escape", "q")
        quit_screen = app.screen
        assert isinstance(quit_screen, QuitScreen)
        assert "read-only" in str(quit_screen.query_one("#quit-readonly").render())
        assert quit_screen.query_one("#quit-stop").disabled
        await pilot.press("s")  # disabled: the fleet is not stopped
        assert app.screen is quit_screen
        await pilot.press("k")  # quits the console, keeps the fleet
        await pilot.pause()
    assert actions.commands == []
    assert not app.is_running


async def test_a_change_that_slipped_past_the_keys_reaches_nothing() -> None:
    """Commands posted straight to the app (as a missed key would) stop at the read-only port."""
    from tui.ui.messages import OperationRequested

    actions = RecordingFleet()
    app = readonly_app(actions)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        for command in (Kill((0, 1), "kill"), Relaunch((2,)), StartPipeline()):
            app.post_message(OperationRequested(command))
        await wait_for(pilot, lambda: len(app._notifications) >= 3, "three refusals")
        await finish_actions(pilot, app)
        refusals = [str(n.message) for n in app._notifications]
        assert all("read-only console" in text for text in refusals), refusals
    assert actions.commands == []

"""The render hooks' pins (``tui.ui.render.hooks``): the Textual release they were checked on,
every private name they use (each taken away in turn must turn its hook off), and the console
on Textual's own path when a hook is off: another release, or ``GPUFLEET_PLAIN``."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
import textual
from textual._compositor import Compositor
from ui_helpers import make_app, settle, seven_gpu_fleet

from tui.fleet.snapshot import FleetSnapshot
from tui.ui.render import hooks
from tui.ui.render.dirty_rows import DirtyRowsCompositor

pytestmark = pytest.mark.usefixtures("plain_switch")  # each test reads the hooks anew


def test_textual_is_the_release_the_hooks_were_checked_on() -> None:
    """On another release the hooks are off (the console slower, not broken): read the names
    of ``RELIES_ON`` in its source, run this file and tests/console/test_ui_dirty_rows.py with
    ``CHECKED_ON`` moved, then move it."""
    assert textual.__version__ == hooks.CHECKED_ON


def test_every_private_name_is_there_and_the_hook_runs() -> None:
    assert hooks.problems("compositor") == []
    assert hooks.hook_on("compositor")


RELIANCES = sorted({reliance for used in hooks.RELIES_ON.values() for reliance in used}, key=str)


def _take_away(monkeypatch: pytest.MonkeyPatch, reliance: hooks.Reliance) -> None:
    """Make ``reliance`` disappear from Textual, as a release that renamed it would."""
    module, name = reliance.owner.split(":")
    owner = getattr(__import__(module, fromlist=[name]), name)
    if not reliance.kind:
        holder = next(cls for cls in owner.__mro__ if reliance.name in vars(cls))
        monkeypatch.delattr(holder, reliance.name)
        return
    init = owner.__init__

    def without(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        if type(self) is owner:  # the probe instance only
            delattr(self, reliance.name)

    monkeypatch.setattr(owner, "__init__", without)


@pytest.mark.parametrize("reliance", RELIANCES, ids=str)
def test_a_name_that_disappears_turns_its_hook_off(
    monkeypatch: pytest.MonkeyPatch, reliance: hooks.Reliance
) -> None:
    users = [hook for hook, used in hooks.RELIES_ON.items() if reliance in used]
    assert users
    _take_away(monkeypatch, reliance)
    for hook in users:
        found = hooks.problems(hook)
        assert len(found) == 1 and found[0].startswith(str(reliance)), found
        assert not hooks.hook_on(hook)


def test_a_method_that_changes_its_parameters_turns_its_hook_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def renders(self: Compositor, crop: Any = None, clip: Any = None) -> Any:
        raise AssertionError("never called: the hook is off")

    monkeypatch.setattr(Compositor, "_get_renders", renders)
    assert hooks.problems("compositor") == [
        "textual._compositor.Compositor._get_renders takes (self, crop, clip), not (self, crop)"
    ]
    assert not hooks.hook_on("compositor")


def _with_queued(fleet: FleetSnapshot, gpu: int, queued: int) -> FleetSnapshot:
    panels = list(fleet.panels)
    server = panels[gpu].server
    assert server is not None
    panels[gpu] = replace(panels[gpu], server=replace(server, queued=queued))
    return replace(fleet, panels=tuple(panels), taken_at=fleet.taken_at + 1)


@pytest.mark.parametrize("why", ["another release", "GPUFLEET_PLAIN"])
async def test_with_the_hooks_off_the_console_runs_on_textuals_own_path(
    monkeypatch: pytest.MonkeyPatch, plain_switch: Any, why: str
) -> None:
    """Textual's own compositor; the screen shows every new reading all the same."""
    if why == "another release":
        monkeypatch.setattr(hooks, "CHECKED_ON", "8.1.0")
    else:
        plain_switch("compositor")
    fleet = seven_gpu_fleet()
    app = make_app(fleet)
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot, app)
        assert type(app.main_screen._compositor) is Compositor
        for queued in (23, 5, 17):
            fleet = _with_queued(fleet, 1, queued)
            app.main_screen.fleet = fleet
            await pilot.pause()
            await pilot.pause()
            screen = "\n".join(strip.text for strip in app.screen._compositor.render_strips())
            assert f"queued {queued} " in screen
    assert not hooks.hook_on("compositor")


async def test_with_the_hooks_on_the_main_screen_has_the_dirty_rows_compositor() -> None:
    app = make_app(seven_gpu_fleet())
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot, app)
        assert isinstance(app.main_screen._compositor, DirtyRowsCompositor)

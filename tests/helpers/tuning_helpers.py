"""Shared test helper: the tuning form through Pilot (open it, type into its fields)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from textual.pilot import Pilot
from textual.widgets import Input
from ui_helpers import RecordingFleet, make_app, press_until, settle

from tui.ui.app import FleetApp
from tui.ui.tuning.form_screen import TuningFormScreen


async def open_form(pilot: Pilot[None], *keys: str) -> TuningFormScreen:
    """Settle the console, press ``keys`` until the tuning form is on top; returns it."""
    app = pilot.app
    assert isinstance(app, FleetApp)
    await settle(pilot, app)
    await press_until(pilot, keys, TuningFormScreen)
    form = app.screen
    assert isinstance(form, TuningFormScreen)
    return form


async def type_into_field(
    pilot: Pilot[None], form: TuningFormScreen, selector: str, text: str
) -> None:
    """Focus the form's ``Input`` at ``selector``, clear it and type ``text`` key by key."""
    field = form.query_one(selector, Input)
    field.focus()
    field.value = ""
    await pilot.press(*text)
    await pilot.pause()


async def type_into(pilot: Pilot[None], form: TuningFormScreen, knob: str, text: str) -> None:
    """Type ``text`` into the field of ``knob`` (``#knob-<knob>``)."""
    await type_into_field(pilot, form, f"#knob-{knob}", text)


@contextlib.asynccontextmanager
async def tuning_form(
    actions: RecordingFleet, *keys: str, size: tuple[int, int] = (140, 45), **app_args: Any
) -> AsyncIterator[tuple[FleetApp, Pilot[None], TuningFormScreen]]:
    """A console on the seven-GPU fleet with ``actions``, its tuning form opened by ``keys``
    (``app_args``: more of ``make_app``'s arguments, e.g. ``running``).

    Yields:
        The app, its pilot and the form.
    """
    app = make_app(actions=actions, **app_args)
    async with app.run_test(size=size) as pilot:
        yield app, pilot, await open_form(pilot, *keys)

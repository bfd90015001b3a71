"""The tuning form answers at once: it shows as soon as its key is handled, keeps every key typed
while it reads its profile, and shows only the newest values' preflight (never a stale one)."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field

from textual import events
from textual.pilot import Pilot
from textual.widgets import Input
from ui_helpers import RecordingFleet, make_app, settle, settled_app, wait_for

from tui.profiles import Profile
from tui.retune.preflight import Preflight
from tui.ui.app import FleetApp
from tui.ui.quit_screen import QuitScreen
from tui.ui.tuning.form_screen import TuningFormScreen
from tui.ui.tuning.preflight_panel import PreflightPanel


@dataclass
class SlowToRead(RecordingFleet):
    """The running profile is read only once ``gate`` is set (a slow disk, a busy machine)."""

    gate: threading.Event = field(default_factory=threading.Event)

    def load_profile(self, name: str) -> Profile:
        assert self.gate.wait(10), "the test never opened the gate"
        return super().load_profile(name)


@dataclass
class GatedPreflight(RecordingFleet):
    """Each preflight waits for its own release, and the values of every one asked are kept."""

    asked: list[int | None] = field(default_factory=list)
    releases: list[asyncio.Event] = field(default_factory=list)

    async def preflight(self, profile: Profile, gpus: tuple[int, ...]) -> list[Preflight]:
        self.asked.append(profile.server.max_mamba_cache_size)
        release = asyncio.Event()
        self.releases.append(release)
        await release.wait()
        return await super().preflight(profile, gpus)


def post_keys(app: FleetApp, keys: list[tuple[str, str | None]]) -> None:
    """All at once, as a fast typist's keys arrive: no waiting for the app between them."""
    for key, character in keys:
        app.post_message(events.Key(key, character))


def knob(form: TuningFormScreen, name: str) -> str:
    return form.query_one(f"#knob-{name}", Input).value


async def test_keys_typed_while_the_form_reads_its_profile_all_reach_the_form() -> None:
    actions = SlowToRead()
    async with settled_app(actions=actions, size=(140, 45)) as (app, pilot):
        assert app.main_screen.selected == 0
        await pilot.press("T")  # the form shows at once, still reading the running profile
        form = app.screen
        assert isinstance(form, TuningFormScreen) and not form.type_ahead.ready
        keys: list[tuple[str, str | None]] = [("backspace", None)] * 4
        keys += [(c, c) for c in "0.93"]
        keys += [("tab", None), ("backspace", None), ("backspace", None), ("1", "1"), ("q", "q")]
        post_keys(app, keys)  # typed while it reads: at once, no waiting between them
        await wait_for(pilot, lambda: len(form.type_ahead.held) == len(keys), "held keys")
        # none reached the grid ('3' would select GPU 3, 'q' would ask to quit)
        assert app.main_screen.selected == 0
        assert not form.query(Input)  # still reading the profile
        actions.gate.set()
        await wait_for(pilot, lambda: form.type_ahead.ready, "the inputs")
        await wait_for(pilot, lambda: knob(form, "max_mamba_cache_size") == "1q", "the replay")
        assert knob(form, "mem_fraction_static") == "0.93"
        assert not any(isinstance(s, QuitScreen) for s in app.screen_stack)
        assert "must be an integer" in str(form.candidate.problems["max_mamba_cache_size"])


async def test_escape_while_the_form_reads_its_profile_closes_it_at_once() -> None:
    actions = SlowToRead()
    async with settled_app(actions=actions, size=(140, 45)) as (app, pilot):
        await pilot.press("T")
        assert isinstance(app.screen, TuningFormScreen)
        post_keys(app, [("9", "9"), ("escape", None)])
        await wait_for(pilot, lambda: app.screen is app.main_screen, "the form to close")
        actions.gate.set()
        await pilot.pause()
        assert app.screen is app.main_screen
        assert actions.commands == []


async def open_ready_form(pilot: Pilot[None], app: FleetApp) -> TuningFormScreen:
    await settle(pilot, app)
    await pilot.press("T")
    await wait_for(pilot, lambda: isinstance(app.screen, TuningFormScreen), "the form")
    form = app.screen
    assert isinstance(form, TuningFormScreen)
    await wait_for(pilot, lambda: form.type_ahead.ready, "the inputs")
    return form


async def test_only_the_newest_values_preflight_is_shown_and_the_table_stays_meanwhile() -> None:
    actions = GatedPreflight()
    app = make_app(actions=actions)
    shown: list[TuningFormScreen.PreflightShown] = []

    def hook(message: object) -> None:
        # the hook sees a message at each dispatch: keep each one once
        if isinstance(message, TuningFormScreen.PreflightShown) and message not in shown:
            shown.append(message)

    async with app.run_test(size=(140, 45), message_hook=hook) as pilot:
        form = await open_ready_form(pilot, app)
        await wait_for(pilot, lambda: len(actions.releases) == 1, "the first preflight")
        actions.releases[0].set()
        await wait_for(pilot, lambda: len(shown) == 1, "the first table")
        panel = form.query_one(PreflightPanel)
        field = form.query_one("#knob-max_mamba_cache_size", Input)
        field.focus()
        await pilot.pause()
        # three keystrokes while one preflight runs: one more runs after it, for the last values
        post_keys(app, [("1", "1")])
        await wait_for(pilot, lambda: len(actions.releases) == 2, "the second preflight")
        assert panel.showing_table and panel.border_subtitle == "updating..."
        post_keys(app, [("2", "2"), ("3", "3")])
        await wait_for(pilot, lambda: knob(form, "max_mamba_cache_size") == "80123", "typing")
        await asyncio.sleep(0.1)  # more than the debounce: nothing may start beside the running one
        assert len(actions.releases) == 2
        actions.releases[1].set()
        await wait_for(pilot, lambda: len(actions.releases) == 3, "the newest values' preflight")
        assert actions.asked == [80, 801, 80123]
        assert len(shown) == 1  # the answer for 801 was stale: dropped
        assert form.preflight is None
        actions.releases[2].set()
        await wait_for(pilot, lambda: len(shown) == 2, "the newest table")
        assert shown[-1].generation == form.generation
        assert form.preflight is not None and panel.border_subtitle == ""


def typed(text: str) -> list[tuple[str, str | None]]:
    """``text`` as a terminal hands it over: ``\\t`` a Tab, ``^U`` ctrl+u, the rest printable."""
    keys: list[tuple[str, str | None]] = []
    for part in text.replace("^U", "\0").replace("\t", "\1"):
        if part == "\0":
            keys.append(("ctrl+u", "\x15"))
        elif part == "\1":
            keys.append(("tab", "\t"))
        else:
            keys.append(({".": "full_stop"}.get(part, part), part))
    return keys


async def test_a_burst_across_fields_puts_every_key_in_the_field_focused_when_it_was_typed() -> (
    None
):
    """At key-repeat speed (35 ms a key) the keys after a Tab reached the field it left: '0.6'
    became '.6' in the next one, and 'Tab 0.93 Tab 200' gave one field '0.880.93200'."""
    async with settled_app(actions=RecordingFleet(), size=(140, 45)) as (app, pilot):
        await pilot.press("T")
        await wait_for(pilot, lambda: isinstance(app.screen, TuningFormScreen), "the form")
        form = app.screen
        assert isinstance(form, TuningFormScreen)
        await wait_for(pilot, lambda: form.type_ahead.ready, "the inputs")
        assert form.focused is form.query_one("#knob-mem_fraction_static", Input)
        # one burst: no waiting for the app between keys, as a terminal delivers a paste
        post_keys(app, typed("^U0.93\t^U200\t^U0.6\t^U64"))
        want = {
            "mem_fraction_static": "0.93",
            "max_mamba_cache_size": "200",
            "mamba_full_memory_ratio": "0.6",
            "max_running_requests": "64",
        }
        await wait_for(
            pilot, lambda: {k: knob(form, k) for k in want} == want, "every key in its field"
        )

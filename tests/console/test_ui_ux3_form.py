"""The tuning form as a new operator met it (issue 30, point 3): whom a change is for is asked,
not assumed; a plan the preflight says will not start cannot be restarted; our own diagnosis
of a Mamba pool that took the memory comes before SGLang's misleading text; the sizes' source
reads as a sentence."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from textual.widgets import Button, Input, Label, Static
from tuning_helpers import tuning_form, type_into
from ui_helpers import (
    RecordingFleet,
    shipped_profiles,
    wait_for,
)

from tui.profiles import Profile
from tui.retune.preflight import Preflight, preflight
from tui.ui.confirm import ConfirmScreen
from tui.ui.tuning.form_screen import TuningFormScreen
from tui.ui.tuning.preflight_panel import PreflightPanel, render_preflight, sizes_source
from tui.ui.tuning.scope import ScopeScreen

ALL = (0, 1, 2, 3, 4, 5, 6)


def diff_text(form: TuningFormScreen) -> str:
    return str(form.query_one("#tune-diff", Static).render())


async def test_opened_on_one_gpu_the_save_asks_whom_the_change_is_for() -> None:
    """The old form saved a [gpu.0] override without asking: the diff read
    'gpu.0.mem_fraction_static: (unset) -> 0.9' and a rollout changed nothing elsewhere."""
    actions = RecordingFleet()
    async with tuning_form(actions, "0", "t") as (app, pilot, form):
        assert form.scope is None  # neither choice taken
        assert "not chosen yet" in str(form.query_one("#tune-title", Static).render())
        assert form.query_one("#tune-scope-note", Label).display
        await type_into(pilot, form, "mem_fraction_static", "0.9")
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: isinstance(app.screen, ScopeScreen), "the question")
        assert actions.saved == []
        await pilot.press("a")  # every GPU: the form switches, shows it, saves nothing yet
        await wait_for(pilot, lambda: app.screen is form, "back on the form")
        assert form.scope == "all" and form.gpu is None and form.target_gpus == ALL
        await wait_for(pilot, lambda: "server.mem_fraction_static" in diff_text(form), "diff")
        assert "gpu.0" not in diff_text(form)
        assert form.query_one("#profile-name", Input).value == "sim-baseline-tuned"
        assert actions.saved == []
        await pilot.press("ctrl+s")  # chosen now: no question
        await wait_for(pilot, lambda: bool(actions.saved), "the save")
        saved = actions.saved[0]
        assert saved.overrides == () and saved.server.mem_fraction_static == 0.9
        assert saved.name == "sim-baseline-tuned"


async def test_t_on_all_gpus_saves_the_shared_flags_without_asking() -> None:
    actions = RecordingFleet()
    async with tuning_form(actions, "T") as (app, pilot, form):
        assert form.scope == "all"
        assert not form.query_one("#tune-scope-note", Label).display
        await type_into(pilot, form, "mem_fraction_static", "0.9")
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: bool(actions.saved), "the save")
        assert not isinstance(app.screen, ScopeScreen)
        assert actions.saved[0].overrides == ()


async def test_a_plan_that_does_not_fit_cannot_restart_without_a_deliberate_override() -> None:
    """The preflight marked it 'fits NO' and the form still offered Restart, the unfit line one
    of the confirm's details. Now the Apply button is off with the reason under it, and ctrl+t
    asks a question that says first that it will not start, Cancel focused."""
    actions = RecordingFleet()
    async with tuning_form(actions, "T") as (app, pilot, form):
        await type_into(pilot, form, "mem_fraction_static", "0.3")
        await wait_for(pilot, lambda: form.preflight is not None, "the preflight")
        assert form.preflight is not None and not any(p.fits for p in form.preflight)
        apply = form.query_one("#tune-apply", Button)
        blocked = form.query_one("#tune-blocked", Label)
        assert apply.disabled and blocked.display
        assert str(blocked.render()).startswith("Apply is off: the preflight says GPUs 0-6")
        await pilot.click("#tune-apply")  # the button does nothing
        await pilot.pause()
        assert app.screen is form
        await pilot.press("ctrl+t")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the override")
        confirm = app.screen
        assert isinstance(confirm, ConfirmScreen) and confirm.destructive
        assert confirm.title_text.startswith("The preflight says it will not start. Restart")
        assert confirm.confirm_label == "Restart anyway"
        await pilot.press("enter")  # Cancel is focused: nothing restarts
        await wait_for(pilot, lambda: app.screen is form, "back on the form")
        assert actions.applied() == [] and actions.saved == []
        assert not form.query_one("#tune-save", Button).disabled  # saving it still works
        await type_into(pilot, form, "mem_fraction_static", "0.9")  # fits again
        await wait_for(pilot, lambda: not apply.disabled, "Apply back")
        assert not blocked.display


async def test_the_override_restarts_only_on_y() -> None:
    actions = RecordingFleet()
    async with tuning_form(actions, "T") as (app, pilot, form):
        await type_into(pilot, form, "mem_fraction_static", "0.3")
        await wait_for(pilot, lambda: form.preflight is not None, "the preflight")
        await pilot.press("ctrl+t")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the override")
        await pilot.press("y")
        await wait_for(pilot, lambda: bool(actions.applied()), "the deliberate apply")
        assert actions.applied() == [("sim-baseline-tuned", ALL)]


class HeldPreflight(RecordingFleet):
    """A preflight that answers only once the test lets it (a node's agent far away)."""

    def __init__(self) -> None:
        super().__init__()
        self.answer = asyncio.Event()

    async def preflight(self, profile: Profile, gpus: tuple[int, ...]) -> list[Preflight]:
        await self.answer.wait()
        return await super().preflight(profile, gpus)


async def test_an_apply_before_the_preflight_answered_waits_for_it() -> None:
    """ctrl+t while the preflight of unfit values is still out: the old form asked to restart
    at once ('preflight not computed yet'); now it waits for the answer, and the question says
    that it will not start."""
    actions = HeldPreflight()
    async with tuning_form(actions, "T") as (app, pilot, form):
        await type_into(pilot, form, "mem_fraction_static", "0.3")
        assert form.preflight is None
        await pilot.press("ctrl+t")
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmScreen)  # waiting for the prediction
        actions.answer.set()
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question")
        confirm = app.screen
        assert isinstance(confirm, ConfirmScreen)  # asked knowing it will not start
        assert confirm.title_text.startswith("The preflight says it will not start.")
        await pilot.press("n")
        await wait_for(pilot, lambda: app.screen is form, "back on the form")
        assert actions.applied() == []


def _item(gpu: int, calibrated: bool, why: str | None = None) -> Preflight:
    base = preflight(shipped_profiles()["sim-baseline"], gpu)
    return replace(base, calibrated=calibrated, fits=why is None, why_not=why)


def test_the_sizes_line_reads_as_a_sentence() -> None:
    assert sizes_source([_item(0, True), _item(1, True)]) == (
        "sizes calibrated on the running servers' logs"
    )
    assert sizes_source([_item(0, False)]).startswith("sizes from the model's constants")
    mixed = sizes_source([_item(0, True), _item(1, False)])
    assert mixed.startswith("sizes calibrated on the servers' logs for 1 of 2 GPUs")
    text = render_preflight([_item(0, True)]).plain
    assert "sizes from calibrated" not in text and "sizes calibrated on" in text


async def test_the_form_shows_our_diagnosis_before_sglangs_text() -> None:
    """At 0.85 with 200 Mamba slots SGLang says 'Raise --mem-fraction-static above 0.318':
    the Mamba pool took what the weights left, and the panel says so first."""
    actions = RecordingFleet()
    async with tuning_form(actions, "T", size=(160, 50)) as (_app, pilot, form):
        await type_into(pilot, form, "max_mamba_cache_size", "900")
        await wait_for(pilot, lambda: form.preflight is not None, "the preflight")
        assert form.preflight is not None
        why = form.preflight[0].why_not or ""
        assert why.startswith("does not fit: the Mamba pool's 900 slots"), why
        panel = " ".join(str(form.query_one(PreflightPanel).render()).split())
        ours = panel.index("the Mamba pool's 900 slots")
        assert ours < panel.index("SGLang's own message, misleading here")

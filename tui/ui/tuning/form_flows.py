"""The tuning form's operations: whom the change is for, Save and Apply (a mixin of
``TuningFormScreen``, which holds the inputs, the validation and the preflight).

Save writes the candidate as a new profile (an existing name asks first: ``SaveProfile``
through the port). Apply confirms what restarts and hands the ``Apply`` command back, the
candidate itself in it (nothing is written to be applied); it waits for the preflight of the
values it restarts with (it asked 'preflight not computed yet'). While that preflight says a
GPU will not start (``setup.unfit_reason``) the Apply button is off, and ``ctrl+t`` is a
deliberate override: its question says first that it will not start, Cancel focused, ``y``
'Restart anyway'. Opened on one GPU, the first Save or Apply asks whom the change is for
(``tui.ui.tuning.scope``) unless the operator chose already.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from textual import work
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Input, RadioButton, TextArea

from tui.ops.commands import Apply, Saved, SaveProfile
from tui.ops.port import Fleet, Tuning
from tui.ops.types import Preflight
from tui.profiles import Profile, diff
from tui.ui.confirm import ConfirmScreen
from tui.ui.tuning.candidate import Candidate, initial_values
from tui.ui.tuning.scope import EVERY_GPU, ONE_GPU, ScopeScreen
from tui.ui.tuning.setup import FormSetup, apply_question, unfit_reason

if TYPE_CHECKING:
    from textual.app import App

PREFLIGHT_WAIT_S = 10.0
"""Longest an Apply waits for the preflight of the values it restarts with (it answers in well
under a second; one that cannot be computed says so and does not hold the Apply)."""


class FormFlows:
    """Scope, Save and Apply of the tuning form (mixed into ``TuningFormScreen``)."""

    setup: FormSetup | None
    gpu: int | None
    scope: str | None
    names: list[str]
    candidate: Candidate
    preflight: list[Preflight] | None
    port: Fleet
    tuning: Tuning
    _preflight_settled: asyncio.Event

    if TYPE_CHECKING:  # provided by the screen (and Textual)
        app: App[object]

        @property
        def running(self) -> Profile: ...

        @property
        def opened_on(self) -> int | None: ...

        @property
        def restart_gpus(self) -> tuple[int, ...]: ...

        def _revalidate(self) -> None: ...

    def _widget(self, selector: str) -> Widget:
        """One of the form's widgets (the screen's ``query_one``)."""
        assert isinstance(self, Screen)
        return self.query_one(selector)

    def _done(self, apply: Apply) -> None:
        """Close the form with the ``Apply`` to run."""
        assert isinstance(self, Screen)
        self.dismiss(apply)

    # --- scope ---------------------------------------------------------------------------------

    def _set_scope(self, scope: str) -> None:
        """Make the change ``scope``'s: every GPU's shared flags, or the GPU the form opened on
        (the first of the profile, opened on all) as an override."""
        assert self.setup is not None
        first = self.running.gpus[0]
        gpu = (
            None
            if scope == EVERY_GPU
            else (self.opened_on if self.opened_on is not None else first)
        )
        chosen_before, self.scope = self.scope, scope
        pressed = self._widget("#scope-all" if scope == EVERY_GPU else "#scope-one")
        if isinstance(pressed, RadioButton) and not pressed.value:
            pressed.value = True  # the radio shows the choice
        if gpu == self.gpu:
            if chosen_before is None:
                self._revalidate()  # the title, the diff's heading and the note change
            return
        self.gpu = gpu
        # The extra-flags list means the shared list or this GPU's additions: re-read it.
        fresh = initial_values(self.running, gpu, "")
        extra, name = self._widget("#extra-flags"), self._widget("#profile-name")
        assert isinstance(extra, TextArea) and isinstance(name, Input)
        extra.text = fresh.extra_flags
        one, fleet = self.setup.default_name, self.setup.fleet_name or self.setup.default_name
        if name.value == (fleet if gpu is not None else one):  # still proposed, not typed
            name.value = one if gpu is not None else fleet
        self._revalidate()

    def action_toggle_scope(self) -> None:
        """Switch between every GPU and the GPU the form opened on (not chosen yet: every
        GPU)."""
        self._set_scope(ONE_GPU if self.scope == EVERY_GPU else EVERY_GPU)

    async def _scope_answered(self, what: str) -> bool:
        """Whether the change's scope is settled for ``what`` (save, apply): asked when the
        form opened on one GPU and the operator has not chosen; an answer of 'every GPU'
        switches the form, which then shows that diff and preflight before anything is done."""
        if self.scope is not None:
            return True
        gpu = self.gpu if self.gpu is not None else self.running.gpus[0]
        answer = await self.app.push_screen_wait(ScopeScreen(gpu, what))
        if answer is None:
            return False
        self._set_scope(answer)
        if answer == EVERY_GPU:
            self.app.notify(
                f"The change is now for every GPU: check the diff and the preflight, then {what} "
                "again.",
                title="Every GPU",
            )
            return False
        return True

    # --- save and apply ---------------------------------------------------------------------

    def _valid_profile(self, what: str) -> Profile | None:
        profile = self.candidate.profile
        if profile is None:
            first = next(iter(self.candidate.problems.values()))[0]
            self.app.notify(f"Nothing done. {first}", title=f"Cannot {what}", severity="error")
        return profile

    def action_save(self) -> None:
        """Save the candidate as a new profile (an existing name needs a confirmation)."""
        if (profile := self._valid_profile("save")) is not None:
            self._save_flow(profile)

    def action_apply(self) -> None:
        """Confirm, save the candidate when it differs from the running profile, and apply."""
        if (profile := self._valid_profile("apply")) is not None:
            self._apply_flow(profile)

    @work(group="form-flow", exclusive=True, exit_on_error=False)
    async def _save_flow(self, profile: Profile) -> None:
        if not await self._scope_answered("save"):
            return
        if profile.name in self.names:
            question = ConfirmScreen(
                f"Overwrite the saved profile {profile.name!r}?",
                "The file is replaced by the form's values. Nothing is restarted.",
                "Overwrite",
                destructive=False,  # a save: nothing stops (Enter saves)
            )
            if not await self.app.push_screen_wait(question):
                return
        if await self._save(profile, "save") is not None:
            self.names.append(profile.name)

    async def _save(self, profile: Profile, what: str) -> Saved | None:
        """Save ``profile`` (a node that did not is named); None when nothing was saved."""
        try:
            where = await self.port.run(SaveProfile(profile, self.restart_gpus))
        except Exception as error:  # refused or unreachable: one line, nothing launched
            self.app.notify(
                f"Nothing done. {_one_line(error)}", title=f"Cannot {what}", severity="error"
            )
            return None
        if where.failures:
            self.app.notify(
                "; ".join(where.failures),
                title=f"{profile.name} not saved everywhere",
                severity="warning",
            )
        self.app.notify(f"saved {profile.name} to {where}", title="Profile saved")
        return where

    @work(group="form-flow", exclusive=True, exit_on_error=False)
    async def _apply_flow(self, profile: Profile) -> None:
        if not await self._scope_answered("apply"):
            return
        # Never restart on values the preflight has not answered for: it is well under a
        # second; one that cannot be computed sets the event too (and says why on screen).
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._preflight_settled.wait(), PREFLIGHT_WAIT_S)
        gpus = self.restart_gpus
        changed = bool(diff(self.running, profile))
        title, detail = apply_question(self.running, profile, self.preflight, self.names, gpus)
        label = "Restart"
        if unfit_reason(self.preflight) is not None:
            # A deliberate override (the Apply button is off): the preflight is a model of
            # SGLang's startup, and an operator may know better; the question says it first.
            title, label = f"The preflight says it will not start. {title}", "Restart anyway"
        question = ConfirmScreen(title, detail, label)
        if not await self.app.push_screen_wait(question):
            return
        # The candidate itself is applied (its file is written only when the operator saves).
        self._done(Apply(profile if changed else self.running, gpus))


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__

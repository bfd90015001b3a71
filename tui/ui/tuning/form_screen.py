"""The tuning form: the four knobs and extra flags, validated as typed, with a live preflight.

Opened on one GPU, the change becomes a ``[gpu.N]`` override of the running profile and is
applied to that GPU only; opened on all (or with the toggle), it changes the shared flags and is
applied to every GPU of the profile. Nothing is stopped before the operator confirms an Apply
that names what will restart.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.timer import Timer
from textual.widgets import Button, Footer, Input, Label, Static, Switch, TextArea

from tui.profiles import KNOBS, Profile, diff
from tui.retune.preflight import Preflight
from tui.ui.confirm import ConfirmScreen
from tui.ui.gate import ReadOnlyGate
from tui.ui.sources import FleetActions
from tui.ui.tuning.candidate import (
    EXTRA,
    GENERAL,
    NAME,
    Candidate,
    FormValues,
    build_candidate,
    gpu_range,
    initial_values,
)
from tui.ui.tuning.preflight_panel import PreflightPanel

KNOB_HELP = {
    "mem_fraction_static": "(0, 1): share of free memory for the pools",
    "max_mamba_cache_size": "integer >= 1: Mamba state slots",
    "mamba_full_memory_ratio": "(0, 10]: Mamba pool relative to the KV pool",
    "max_running_requests": "integer >= 1: SGLang may cap it",
}
"""The range of each knob, shown beside its input (empty input = SGLang's automatic value)."""


@dataclass(frozen=True, slots=True)
class ApplyPlan:
    """What the form decided: apply profile ``name`` to ``gpus`` (already saved)."""

    name: str
    """Profile to apply."""
    gpus: tuple[int, ...]
    """GPUs to restart with it."""


class TuningFormScreen(ReadOnlyGate[ApplyPlan | None]):
    """Dismisses with an ``ApplyPlan`` after a confirmed Apply, None on Cancel."""

    BINDINGS = [
        Binding("escape", "cancel", "Cancel", id="tune.cancel"),
        Binding("ctrl+s", "save", "Save as new profile", id="tune.save", priority=True),
        Binding("ctrl+t", "apply", "Apply", id="tune.apply", priority=True),
        Binding("ctrl+o", "toggle_scope", "All GPUs / one GPU", id="tune.scope", priority=True),
    ]

    def __init__(
        self,
        actions: FleetActions,
        running: Profile,
        names: list[str],
        gpu: int | None,
        default_name: str,
        debounce_s: float = 0.25,
    ) -> None:
        """Args:
        actions: The backend (preflight and save).
        running: The profile the fleet runs now: the starting point and the diff's left side.
        names: Saved profile names (saving over one needs a confirmation).
        gpu: The GPU the form opened on (a per-GPU override), or None for all GPUs.
        default_name: Pre-filled name of the new profile.
        debounce_s: Quiet time after the last keystroke before the preflight runs.
        """
        super().__init__()
        self.actions = actions
        """The backend."""
        self.running = running
        """The running profile."""
        self.names = list(names)
        """Saved profile names."""
        self.opened_on = gpu
        """The GPU the form was opened on (the toggle returns to it)."""
        self.gpu = gpu
        """The GPU the change is for now; None = every GPU."""
        self.default_name = default_name
        """The name pre-filled."""
        self.debounce_s = debounce_s
        """Preflight debounce."""
        self.candidate: Candidate = Candidate(None, {})
        """The newest validation of the inputs."""
        self.preflight: list[Preflight] | None = None
        """The newest preflight of the candidate (None while pending or invalid)."""
        self._timer: Timer | None = None
        self._generation = 0

    # --- layout ---------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        """Inputs on the left, preflight and diff on the right."""
        values = initial_values(self.running, self.gpu, self.default_name)
        yield Static(id="tune-title")
        with Horizontal(id="tune-body"):
            with VerticalScroll(id="tune-inputs"):
                with Horizontal(id="tune-scope-row"):
                    yield Switch(self.gpu is None, id="tune-scope")
                    yield Label("all GPUs (off: this GPU only, as an override)")
                for knob, text in values.knobs:
                    yield Label(f"{knob}  [dim]{KNOB_HELP[knob]}[/]", classes="field-label")
                    yield Input(text, placeholder="auto", id=f"knob-{knob}", select_on_focus=False)
                    yield Label(id=f"error-{knob}", classes="field-error")
                yield Label(
                    "extra flags, one per line: --flag value | --flag | key=value",
                    classes="field-label",
                    id="extra-label",
                )
                yield TextArea(values.extra_flags, id="extra-flags", soft_wrap=False)
                yield Label(id=f"error-{EXTRA}", classes="field-error")
                yield Label("new profile name", classes="field-label")
                yield Input(values.name, id="profile-name", select_on_focus=False)
                yield Label(id=f"error-{NAME}", classes="field-error")
                yield Label(id=f"error-{GENERAL}", classes="field-error")
                with Horizontal(id="tune-buttons"):
                    yield Button("Apply", variant="error", id="tune-apply")
                    yield Button("Save as new", variant="primary", id="tune-save")
                    yield Button("Cancel", id="tune-cancel")
            with VerticalScroll(id="tune-results"):
                yield PreflightPanel(id="preflight")
                yield Static(id="tune-diff")
        yield Footer()

    def on_mount(self) -> None:
        """Validate the pre-filled values (and start their preflight); focus the first knob."""
        self._revalidate()
        self.query_one(f"#knob-{KNOBS[0]}", Input).focus()

    @property
    def target_gpus(self) -> tuple[int, ...]:
        """The GPUs an Apply restarts."""
        return self.running.gpus if self.gpu is None else (self.gpu,)

    # --- validation as you type -------------------------------------------------------------

    def values(self) -> FormValues:
        """The inputs as typed."""
        knobs = tuple((k, self.query_one(f"#knob-{k}", Input).value) for k in KNOBS)
        extra = self.query_one("#extra-flags", TextArea).text
        name = self.query_one("#profile-name", Input).value
        return FormValues(knobs, extra, name, self.gpu)

    @on(Input.Changed)
    @on(TextArea.Changed)
    def _changed(self) -> None:
        self._revalidate()

    def _revalidate(self) -> None:
        self.candidate = build_candidate(self.running, self.values())
        problems = self.candidate.problems
        for key in (*KNOBS, EXTRA, NAME, GENERAL):
            label = self.query_one(f"#error-{key}", Label)
            label.update("\n".join(problems.get(key, ())))
            label.display = key in problems
        for knob in KNOBS:
            self.query_one(f"#knob-{knob}", Input).set_class(knob in problems, "-invalid")
        self.query_one("#extra-flags", TextArea).set_class(EXTRA in problems, "-invalid")
        self.query_one("#profile-name", Input).set_class(NAME in problems, "-invalid")
        self._show_title()
        self._show_diff()
        self._schedule_preflight()

    def _show_title(self) -> None:
        gpus = self.target_gpus
        scope = (
            f"all {len(gpus)} GPUs ({gpu_range(gpus)})"
            if self.gpu is None
            else f"GPU {self.gpu} only ([gpu.{self.gpu}] override)"
        )
        self.query_one("#tune-title", Static).update(
            f"[b]Tune {scope}[/b]  running profile: [b]{self.running.name}[/b]"
        )

    def _show_diff(self) -> None:
        widget = self.query_one("#tune-diff", Static)
        widget.border_title = f"DIFF vs {self.running.name}"
        profile = self.candidate.profile
        if profile is None:
            widget.update("[dim](fix the values on the left first)[/]")
            return
        changes = diff(self.running, profile)
        widget.update("\n".join(str(c) for c in changes) or "[dim](no change)[/]")

    # --- preflight (debounced, in a worker) -----------------------------------------------------

    def _schedule_preflight(self) -> None:
        self._generation += 1
        self.preflight = None
        if self._timer is not None:
            self._timer.stop()
        panel = self.query_one(PreflightPanel)
        if self.candidate.profile is None:
            panel.show_note("waiting for valid values")
            return
        panel.show_note("computing...")
        self._timer = self.set_timer(max(self.debounce_s, 0.01), self._start_preflight)

    def _start_preflight(self) -> None:
        if self.candidate.profile is not None:
            self._run_preflight(self.candidate.profile, self.target_gpus, self._generation)

    @work(exclusive=True, group="preflight", exit_on_error=False)
    async def _run_preflight(
        self, profile: Profile, gpus: tuple[int, ...], generation: int
    ) -> None:
        panel = self.query_one(PreflightPanel)
        try:
            items = await self.actions.preflight(profile, gpus)
        except Exception as error:  # a prediction that cannot be made is shown, not fatal
            if generation == self._generation:
                panel.show_note(f"preflight unavailable: {error}", error=True)
            return
        if generation == self._generation:  # the inputs changed meanwhile: drop it
            self.preflight = list(items)
            panel.show_items(items)

    # --- scope ---------------------------------------------------------------------------------

    @on(Switch.Changed, "#tune-scope")
    def _scope_changed(self, event: Switch.Changed) -> None:
        gpu = None if event.value else (self.opened_on if self.opened_on is not None else 0)
        if gpu == self.gpu:
            return
        self.gpu = gpu
        # The extra-flags list means the shared list or this GPU's additions: re-read it.
        fresh = initial_values(self.running, gpu, "")
        self.query_one("#extra-flags", TextArea).text = fresh.extra_flags
        self._revalidate()

    def action_toggle_scope(self) -> None:
        """Switch between every GPU and the GPU the form opened on."""
        switch = self.query_one("#tune-scope", Switch)
        switch.value = not switch.value

    # --- actions -----------------------------------------------------------------------------

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        {"tune-apply": self.action_apply, "tune-save": self.action_save}.get(
            event.button.id or "", self.action_cancel
        )()

    def action_cancel(self) -> None:
        """Leave without changing anything."""
        self.dismiss(None)

    def _valid_profile(self, what: str) -> Profile | None:
        profile = self.candidate.profile
        if profile is None:
            first = next(iter(self.candidate.problems.values()))[0]
            self.notify(f"Nothing done. {first}", title=f"Cannot {what}", severity="error")
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
        if profile.name in self.names:
            question = ConfirmScreen(
                f"Overwrite the saved profile {profile.name!r}?",
                "The file is replaced by the form's values. Nothing is restarted.",
                "Overwrite",
            )
            if not await self.app.push_screen_wait(question):
                return
        path = await asyncio.to_thread(self.actions.save_profile, profile)
        self.names.append(profile.name)
        self.notify(f"saved {profile.name} to {path}", title="Profile saved")

    @work(group="form-flow", exclusive=True, exit_on_error=False)
    async def _apply_flow(self, profile: Profile) -> None:
        gpus = self.target_gpus
        changed = bool(diff(self.running, profile))
        name = profile.name if changed else self.running.name
        lines = [str(c) for c in diff(self.running, profile)][:8] or ["(no change: a relaunch)"]
        if self.preflight is not None:
            lines += [f"GPU {p.gpu} {p.why_not}" for p in self.preflight if not p.fits]
        else:
            lines.append("preflight not computed yet")
        if changed and profile.name in self.names:
            lines.append(f"replaces the saved profile {profile.name!r}")
        servers = "server" if len(gpus) == 1 else "servers"
        question = ConfirmScreen(
            f"Restart GPU{'s' if len(gpus) > 1 else ''} {gpu_range(gpus)} "
            f"({len(gpus)} {servers}) with profile {name}?",
            "\n".join(lines),
            "Restart",
        )
        if not await self.app.push_screen_wait(question):
            return
        if changed:
            await asyncio.to_thread(self.actions.save_profile, profile)
        self.dismiss(ApplyPlan(name, gpus))

"""The tuning form: the four knobs and extra flags, validated as typed, with a live preflight.

Opened on all GPUs (``T``), the change is to the shared flags and is applied to every GPU of
the profile. Opened on one GPU (``t``), the operator chooses (``tui.ui.tuning.scope``): that
GPU only, a ``[gpu.N]`` override applied to it alone, or every GPU; until chosen, Save and Apply
ask. Nothing is stopped before the operator confirms an Apply that names what will restart; while
the preflight says a GPU will not start, the Apply button is off and ctrl+t asks 'Restart anyway?'
(a deliberate override, Cancel focused).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from textual import events, on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.timer import Timer
from textual.widgets import Button, Input, Label, RadioSet, Static, TextArea

from tui.ops.commands import Apply
from tui.ops.port import Fleet, Tuning
from tui.ops.types import Preflight
from tui.profiles import KNOBS, Profile, diff
from tui.ui.footer import FleetFooter
from tui.ui.form_keys import FIELD_KEYS, FieldKeys
from tui.ui.gate import ReadOnlyGate
from tui.ui.tuning.candidate import (
    EXTRA,
    GENERAL,
    NAME,
    Candidate,
    FormValues,
    build_candidate,
    gpu_range,
)
from tui.ui.tuning.form_flows import FormFlows
from tui.ui.tuning.form_layout import form_widgets
from tui.ui.tuning.preflight_panel import PreflightPanel
from tui.ui.tuning.scope import EVERY_GPU, ONE_GPU
from tui.ui.tuning.setup import FormSetup, FormUnavailable, load_setup, unfit_reason
from tui.ui.tuning.type_ahead import TypeAhead
from tui.words import counted

PREFLIGHT_DEBOUNCE_S = 0.0
"""Quiet time after a keystroke before its preflight starts. None by default: a timer, however
short, fires only after the loop has redrawn the form (measured: 10 ms asked, 13-42 ms taken on
a busy console), and the preflights are already coalesced (one runs at a time; keystrokes made
meanwhile are answered by one more run, for the newest values), which is what a debounce is for."""


class TuningFormScreen(ReadOnlyGate[Apply | None], FieldKeys, FormFlows):
    """Dismisses with the ``Apply`` to run after a confirmed Apply, None on Cancel."""

    BINDINGS = [
        Binding("escape", "cancel", "Cancel", id="tune.cancel"),
        Binding("ctrl+s", "save", "Save as new profile", id="tune.save", priority=True),
        Binding("ctrl+t", "apply", "Apply", id="tune.apply", priority=True),
        Binding("ctrl+o", "toggle_scope", "Every GPU / one GPU", id="tune.scope", priority=True),
        *FIELD_KEYS,
    ]

    DEFAULT_CSS = """
    TuningFormScreen .field-error, TuningFormScreen .field-label {
        width: 100%;
        height: auto;
    }
    TuningFormScreen #tune-scope {
        border: none;
        padding: 0;
        width: 100%;
        margin-top: 1;
    }
    TuningFormScreen #tune-scope-note {
        color: $warning;
        width: 100%;
    }
    TuningFormScreen #tune-blocked {
        color: $error;
        width: 100%;
        height: auto;
    }
    TuningFormScreen #tune-loading {
        height: 1fr;
        content-align: center middle;
        color: $text-muted;
    }
    """
    """Errors and labels wrap to the inputs' width (at 80x24 they were cut)."""

    class PreflightShown(Message):
        """The preflight of the form's current values is on screen (for tests and the bench)."""

        bubble = False

        def __init__(self, generation: int, items: tuple[Preflight, ...]) -> None:
            self.generation = generation
            """Which change of the inputs it answers (``TuningFormScreen.generation``)."""
            self.items = items
            """The predictions shown."""
            super().__init__()

    def __init__(
        self,
        port: Fleet,
        setup: FormSetup | Callable[[], FormSetup],
        tuning: Tuning | None = None,
        debounce_s: float = PREFLIGHT_DEBOUNCE_S,
    ) -> None:
        """Args:
        port: The fleet (a Save runs on it).
        setup: What the form starts from, or a blocking function that reads it (run in a
            thread while the form shows; it may raise ``FormUnavailable`` or ``ProfileError``).
        tuning: The form's reads (default: the port's for the setup's GPU).
        debounce_s: Quiet time after the last keystroke before the preflight runs.
        """
        super().__init__()
        self.port = port
        """The fleet."""
        self.tuning: Tuning = tuning or port.reads.tuning(
            setup.gpu if isinstance(setup, FormSetup) else None
        )
        """The form's reads (preflight, the GPUs an Apply restarts)."""
        self.setup: FormSetup | None = setup if isinstance(setup, FormSetup) else None
        """What the form started from (None while it is being read)."""
        self._load_setup = None if isinstance(setup, FormSetup) else setup
        self.names: list[str] = list(self.setup.names) if self.setup else []
        """Saved profile names."""
        self.gpu: int | None = self.setup.gpu if self.setup else None
        """The GPU the change is for now; None = every GPU."""
        self.scope: str | None = _first_scope(self.setup)
        """``EVERY_GPU`` or ``ONE_GPU`` once chosen (``T`` chooses every GPU); None while the
        form opened on one GPU waits for the operator's choice (its values shown for that GPU)."""
        self.debounce_s = debounce_s
        """Preflight debounce."""
        self.candidate: Candidate = Candidate(None, {})
        """The newest validation of the inputs."""
        self.preflight: list[Preflight] | None = None
        """The newest preflight of the candidate (None while pending or invalid)."""
        self.generation = 0
        """Counts the changes of the inputs; a preflight is shown only for the newest."""
        self.type_ahead = TypeAhead()
        """Characters typed before the inputs existed, typed in once they do."""
        self._timer: Timer | None = None
        self._preflight_running = False
        self._validated: FormValues | None = None
        self._preflight_settled = asyncio.Event()
        """Set once the newest values' preflight is shown or said to be unavailable."""

    @property
    def running(self) -> Profile:
        """The profile the fleet runs now (only once the setup is read)."""
        assert self.setup is not None, "the form's setup is not read yet"
        return self.setup.running

    @property
    def opened_on(self) -> int | None:
        """The GPU the form was opened on (the toggle returns to it)."""
        return self.setup.gpu if self.setup else None

    # --- layout ---------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        """Inputs on the left, preflight and diff on the right (a waiting line until read)."""
        if self.setup is None:
            yield Static("reading the running profile...", id="tune-loading")
        else:
            yield from form_widgets(self.setup, self.gpu, self.scope)
        yield FleetFooter()

    async def on_mount(self) -> None:
        """Start from the setup, or read it first (the form already takes keys meanwhile)."""
        if self.setup is not None:
            await self._start()
        else:
            self._read_setup()

    @work(group="form-setup", exit_on_error=False)
    async def _read_setup(self) -> None:
        assert self._load_setup is not None
        try:
            setup = await asyncio.to_thread(self._load_setup)
        except FormUnavailable as why:
            self._unavailable(str(why), "warning")
        except Exception as error:  # a broken profile file: say which and why
            self._unavailable(str(error), "error")
        else:
            await self._set_up(setup)

    def _unavailable(self, why: str, severity: str) -> None:
        title = "Tune" if severity == "warning" else "Cannot open the tuning form"
        self.notify(why, title=title, severity="warning" if severity == "warning" else "error")
        self.dismiss(None)

    async def _set_up(self, setup: FormSetup) -> None:
        self.setup = setup
        self.names = list(setup.names)
        self.gpu = setup.gpu
        self.scope = _first_scope(setup)
        await self.recompose()
        await self._start()

    async def _start(self) -> None:
        """Validate the pre-filled values (and start their preflight), focus the first knob,
        and type in what was typed while the form was being read."""
        self._revalidate()
        self.set_focus(self.query_one(f"#knob-{KNOBS[0]}", Input))
        await self.type_ahead.release(self)

    def on_key(self, event: events.Key) -> None:
        """Keep what is typed before the inputs exist (see ``TypeAhead``)."""
        if self.type_ahead.hold(event, self.focused):
            event.stop()
            event.prevent_default()

    @property
    def target_gpus(self) -> tuple[int, ...]:
        """The GPUs the form's profile changes (in the shown profile's numbers)."""
        return self.running.gpus if self.gpu is None else (self.gpu,)

    @property
    def restart_gpus(self) -> tuple[int, ...]:
        """The GPUs an Apply restarts (every node's with ``T`` on a many-node console)."""
        return self.tuning.targets(self.target_gpus)

    def check_operation(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Nothing but Cancel until the form is set up (a key typed early waits for it). While
        the preflight says a GPU will not start, the Apply button is off and ``ctrl+t`` asks
        a deliberate 'Restart anyway?' (``FormFlows._apply_flow``)."""
        if self.setup is None:
            return action == "cancel"
        return True

    def disabled_reason(self, action: str, parameters: tuple[object, ...]) -> str:
        """Why ``check_operation`` disables ``action`` now."""
        if self.setup is None:
            return "the form is still reading the running profile"
        return ""

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
        # The inputs also say "changed" when mounted with their values: nothing to redo then.
        if self.values() != self._validated:
            self._revalidate()

    def _revalidate(self) -> None:
        values = self.values()
        self._validated = values
        self.candidate = build_candidate(self.running, values)
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
        self._show_blocked()

    def _show_title(self) -> None:
        gpus = self.restart_gpus
        if self.gpu is None:
            scope = f"all {counted(len(gpus), 'GPU')} ({gpu_range(gpus)})"
        elif self.scope is None:
            scope = f"GPU {self.gpu} (for GPU {self.gpu} only or every GPU? not chosen yet)"
        else:
            scope = f"GPU {self.gpu} only ([gpu.{self.gpu}] override)"
        self.query_one("#tune-title", Static).update(
            f"[b]Tune {scope}[/b]  running profile: [b]{self.running.name}[/b]"
        )

    def _show_blocked(self) -> None:
        """Apply's button off, with the reason under it, while the preflight says a GPU will
        not start; the scope's note while it is not chosen."""
        reason = unfit_reason(self.preflight)
        self.query_one("#tune-apply", Button).disabled = reason is not None
        blocked = self.query_one("#tune-blocked", Label)
        blocked.update(f"Apply is off: {reason}" if reason else "")
        blocked.display = reason is not None
        self.query_one("#tune-scope-note", Label).display = self.scope is None
        self.refresh_bindings()

    def _show_diff(self) -> None:
        widget = self.query_one("#tune-diff", Static)
        widget.border_title = f"DIFF vs {self.running.name}" + (
            f" (if for GPU {self.gpu} only)" if self.scope is None else ""
        )
        profile = self.candidate.profile
        if profile is None:
            widget.update("[dim](fix the values on the left first)[/]")
            return
        changes = diff(self.running, profile)
        widget.update("\n".join(str(c) for c in changes) or "[dim](no change)[/]")

    # --- preflight (debounced, one at a time, only the newest shown) ---------------------------

    def _schedule_preflight(self) -> None:
        self.generation += 1
        self.preflight = None
        self._preflight_settled.clear()
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        panel = self.query_one(PreflightPanel)
        if self.candidate.profile is None:
            panel.show_note("waiting for valid values")
            self._preflight_settled.set()  # nothing to wait for: the Apply refuses the values
            return
        panel.mark_updating()  # the last table stays until the new one replaces it
        if self.debounce_s > 0:
            self._timer = self.set_timer(self.debounce_s, self._start_preflight)
        else:
            self._start_preflight()

    def _start_preflight(self) -> None:
        self._timer = None
        if self._preflight_running:
            return  # the running one starts the newest values' preflight when it ends
        if self.candidate.profile is not None:
            self._preflight_running = True
            self._run_preflight(self.candidate.profile, self.restart_gpus, self.generation)

    @work(group="preflight", exit_on_error=False)
    async def _run_preflight(
        self, profile: Profile, gpus: tuple[int, ...], generation: int
    ) -> None:
        # Not exclusive: a preflight runs in a thread, which cannot be cancelled; starting
        # another beside it would only slow both. The newest values go next, when this ends.
        panel = self.query_one(PreflightPanel)
        try:
            items = await self.tuning.preflight(profile, gpus)
        except Exception as error:  # a prediction that cannot be made is shown, not fatal
            if generation == self.generation:
                panel.show_note(f"preflight unavailable: {error}", error=True)
                self._preflight_settled.set()
            return
        finally:
            self._preflight_running = False
            if generation != self.generation and self._timer is None:
                self._start_preflight()
        if generation == self.generation:  # the inputs changed meanwhile: drop it
            self.preflight = list(items)
            panel.show_items(items)
            self._show_blocked()
            self._preflight_settled.set()
            self.post_message(self.PreflightShown(generation, tuple(items)))

    # --- scope ---------------------------------------------------------------------------------

    @on(RadioSet.Changed, "#tune-scope")
    def _scope_changed(self, event: RadioSet.Changed) -> None:
        self._set_scope(EVERY_GPU if event.pressed.id == "scope-all" else ONE_GPU)

    # --- actions -----------------------------------------------------------------------------

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        {"tune-apply": self.action_apply, "tune-save": self.action_save}.get(
            event.button.id or "", self.action_cancel
        )()

    def action_cancel(self) -> None:
        """Leave without changing anything."""
        self.dismiss(None)


def _first_scope(setup: FormSetup | None) -> str | None:
    """Every GPU when the form opens on all of them; not chosen when it opens on one."""
    return EVERY_GPU if setup is not None and setup.gpu is None else None


def open_tuning(
    app: App[None],
    port: Fleet,
    gpu: int | None,
    fallback: str | None,
    on_apply: Callable[[Apply], object],
) -> None:
    """Push the tuning form now, in the turn of the key that asked for it; it reads the running
    profile in a thread while it shows, so every key typed after that one reaches the form.

    Args:
        app: The app.
        port: The fleet.
        gpu: The GPU to tune (a per-GPU override), or None for all.
        fallback: Profile to start from when the port does not know the running one.
        on_apply: Called with the ``Apply`` after a confirmed Apply (not on Cancel).
    """

    def done(apply: Apply | None) -> None:
        if apply is not None:
            on_apply(apply)

    tuning = port.reads.tuning(gpu)
    running = port.reads.running
    app.push_screen(
        TuningFormScreen(port, lambda: load_setup(tuning, gpu, fallback, running), tuning),
        callback=done,
    )

"""The autotune form: which knobs to search over which ranges, and the budget, before a start.

One row per knob of the search space (``tui.autotune.space.KNOBS``): on/off, low, high, step
(a blank step: the knob's default points within the range plus its ends, so the untouched form
is the default space); then the budget: wall time, exploration GPU-seconds, the largest
regression risked. Every keystroke is validated by the parser the CLI uses
(``tui.autotune.options``), whose one-line errors name the field and its allowed range, and the
preflight's verdict of the range (how many single-knob moves it predicts will not fit, never to
be launched; ``tui.autotune.preview``) is shown as it is computed (one at a time, in a thread;
keystrokes meanwhile are answered by one more run). Start (ctrl+s) asks for a confirmation that
says what will happen, then dismisses with the ``SearchRequest``; nothing starts while a field
is bad.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Input, Label, Static, Switch

from tui.autotune_view import (
    KNOBS,
    Budget,
    KnobValue,
    OptionsError,
    SearchRequest,
    SearchSpace,
    budget_of,
    default_range,
    knob_range,
    parse_canary_gpu,
    space_of,
)
from tui.ui.confirm import ConfirmScreen
from tui.ui.footer import FleetFooter
from tui.ui.form_keys import FIELD_KEYS, FieldInput, FieldKeys
from tui.ui.gate import ReadOnlyGate

Predictor = Callable[[SearchSpace], str]
"""The preflight's verdict of a space in one line (blocking; run in a thread)."""

BUDGET_FIELDS = (
    ("wall", "Wall time (s, or 90m, 4h)"),
    ("explore", "Exploration GPU-seconds"),
    ("regression", "Largest regression (0.25 or 25%)"),
)
"""The budget's inputs: id suffix and label."""


def _plain(value: KnobValue) -> str:
    return str(value)


def confirm_text(request: SearchRequest, verdict: str | None) -> str:
    """What the confirmation says will happen."""
    knobs = ", ".join(f"{k} ({len(v)} values)" for k, v in request.space.values)
    budget = request.budget
    gpu = request.gpu
    canary = f"GPU {gpu}" if gpu is not None else "one GPU (the lowest running)"
    lines = [
        f"Search {knobs}.",
        f"Budget: {budget.wall_s:.0f} s of wall time (pauses and waits for other operations "
        "not counted), "
        f"{budget.explore_gpu_s:.0f} GPU-seconds of exploration, regressions up to "
        f"{budget.max_regression:.0%}.",
        f"One candidate at a time runs on {canary} as a canary against the other GPUs; one that "
        "regresses is rolled back to the running profile at once; a better one is rolled out "
        "to every GPU, one at a time, each verified. The job keeps running.",
    ]
    if verdict:
        lines.append(verdict)
    return "\n".join(lines)


class AutotuneFormScreen(ReadOnlyGate[SearchRequest | None], FieldKeys):
    """Dismisses with the confirmed ``SearchRequest``, or None on Cancel.

    Args:
        predictor: The preflight's verdict of a space (None: not shown).
        initial: The request the form starts from (default: the default space and budget,
            the lowest running GPU as the canary).
        gpus: The fleet's GPUs: the canary GPU typed must be one of them (None: any index,
            checked when the search starts).
    """

    BINDINGS = [
        Binding("escape", "cancel", "Cancel", id="autotune.form.cancel"),
        Binding("ctrl+s", "start", "Start search", id="autotune.form.start", priority=True),
        *FIELD_KEYS,
    ]

    DEFAULT_CSS = """
    AutotuneFormScreen .knob-row, AutotuneFormScreen .budget-row { height: 3; }
    AutotuneFormScreen .knob-row Label, AutotuneFormScreen .budget-row Label {
        width: 34; padding: 1 1 0 1;
    }
    AutotuneFormScreen .knob-row Input, AutotuneFormScreen .budget-row Input { width: 1fr; }
    AutotuneFormScreen #autotune-form-head { height: 1; text-style: bold; }
    AutotuneFormScreen #autotune-form-head .knob-name { width: 34; padding: 0 1; }
    AutotuneFormScreen #autotune-form-head .knob-on { width: 10; padding: 0 1; }
    AutotuneFormScreen #autotune-form-head .knob-column { width: 1fr; padding: 0 1; }
    AutotuneFormScreen #autotune-form-errors { color: $error; height: auto; padding: 0 1; }
    AutotuneFormScreen #autotune-form-preflight { height: auto; padding: 0 1; }
    """

    def __init__(
        self,
        predictor: Predictor | None = None,
        initial: SearchRequest | None = None,
        gpus: Sequence[int] | None = None,
    ) -> None:
        super().__init__()
        self.predictor = predictor
        self.gpus = tuple(gpus) if gpus is not None else None
        self.initial = initial or SearchRequest(SearchSpace.default(), Budget())
        self.request: SearchRequest | None = self.initial
        """The newest valid request (None while a field is bad)."""
        self.errors: list[str] = []
        """The newest validation's errors, one line each."""
        self.verdict: str | None = None
        """The preflight's newest verdict line (of ``verdict_for``)."""
        self.verdict_for: SearchSpace | None = None
        """The space ``verdict`` answers."""
        self._predicting = False

    def compose(self) -> ComposeResult:
        """A row per knob, the budget, the errors and the preflight's verdict."""
        chosen = dict(self.initial.space.values)
        with VerticalScroll():
            with Horizontal(id="autotune-form-head"):
                yield Label("Knob", classes="knob-name")
                yield Label("on", classes="knob-on")
                for column in ("low", "high", "step (blank: defaults)"):
                    yield Label(column, classes="knob-column")
            for name in KNOBS:
                values = chosen.get(name)
                low, high = (min(values), max(values)) if values else default_range(name)
                with Horizontal(classes="knob-row"):
                    yield Label(name)
                    yield Switch(value=values is not None, id=f"on-{name}")
                    yield FieldInput(_plain(low), id=f"low-{name}")
                    yield FieldInput(_plain(high), id=f"high-{name}")
                    yield FieldInput(self._step_text(name, values), id=f"step-{name}")
            budget = self.initial.budget
            texts = {
                "wall": f"{budget.wall_s:g}",
                "explore": f"{budget.explore_gpu_s:g}",
                "regression": f"{budget.max_regression:g}",
            }
            for key, label in BUDGET_FIELDS:
                with Horizontal(classes="budget-row"):
                    yield Label(label)
                    yield FieldInput(texts[key], id=f"budget-{key}")
            with Horizontal(classes="budget-row"):
                yield Label("Canary GPU (blank: lowest running)")
                gpu = self.initial.gpu
                yield FieldInput("" if gpu is None else str(gpu), id="canary-gpu")
            yield Static("", id="autotune-form-errors")
            yield Static("", id="autotune-form-preflight")
        yield FleetFooter()

    @staticmethod
    def _step_text(name: str, values: tuple[KnobValue, ...] | None) -> str:
        """Blank when the values are the default points of their range; else their step when
        they are evenly spaced (a list that is neither shows blank: the range's defaults)."""
        if values is None or len(values) < 2:
            return ""
        low, high = values[0], values[-1]
        if knob_range(name, low, high) == values:
            return ""
        step = values[1] - values[0]
        return _plain(round(step, 9)) if knob_range(name, low, high, step) == values else ""

    def on_mount(self) -> None:
        """Validate the initial values and start their preflight."""
        self.validate_form()

    def _text(self, widget_id: str) -> str:
        return self.query_one(f"#{widget_id}", Input).value

    def validate_form(self) -> None:
        """Parse every field with the CLI's parser; show the errors or the new request."""
        errors: list[str] = []
        specs: list[tuple[str, tuple[KnobValue, ...]]] = []
        for name in KNOBS:
            if not self.query_one(f"#on-{name}", Switch).value:
                continue
            try:
                values = knob_range(
                    name,
                    self._text(f"low-{name}"),
                    self._text(f"high-{name}"),
                    self._text(f"step-{name}"),
                )
            except OptionsError as exc:
                errors.append(str(exc))
                continue
            specs.append((name, values))
        space: SearchSpace | None = None
        try:
            space = space_of(specs) if specs or not errors else None
        except OptionsError as exc:
            errors.append(str(exc))
        budget: Budget | None = None
        try:
            budget = budget_of(
                self._text("budget-wall"),
                self._text("budget-explore"),
                self._text("budget-regression"),
            )
        except OptionsError as exc:
            errors.append(str(exc))
        gpu: int | None = None
        try:
            gpu = parse_canary_gpu(self._text("canary-gpu"), self.gpus)
        except OptionsError as exc:
            errors.append(str(exc))
        self.errors = errors
        self.request = (
            SearchRequest(space, budget, gpu) if not errors and space and budget else None
        )
        self.query_one("#autotune-form-errors", Static).update("\n".join(errors))
        if self.request is not None:
            self._predict()

    @on(Input.Changed)
    @on(Switch.Changed)
    def _changed(self) -> None:
        self.validate_form()

    @work(group="autotune-preflight")
    async def _predict(self) -> None:
        """The preflight's verdict of the newest valid space (one run at a time)."""
        if self.predictor is None or self._predicting:
            return
        self._predicting = True
        panel = self.query_one("#autotune-form-preflight", Static)
        try:
            while self.request is not None and self.request.space != self.verdict_for:
                space = self.request.space
                panel.update("Preflight: predicting the range...")
                try:
                    line = await asyncio.to_thread(self.predictor, space)
                except Exception as exc:  # the fleet cannot be read: say so, the form stays
                    line = f"Preflight unavailable: {' '.join(str(exc).split())}"
                self.verdict, self.verdict_for = line, space
                panel.update(line)
        finally:
            self._predicting = False

    def action_cancel(self) -> None:
        """Close without starting anything."""
        self.dismiss(None)

    def action_start(self) -> None:
        """Refuse while a field is bad (its error named); else confirm, then dismiss."""
        self.validate_form()
        request = self.request
        if request is None:
            self.notify(self.errors[0] if self.errors else "fix the form first", severity="error")
            return
        verdict = self.verdict if self.verdict_for == request.space else None
        confirm = ConfirmScreen(
            "Start an autotune search?", confirm_text(request, verdict), "Start"
        )

        def answered(yes: bool | None) -> None:
            if yes:
                self.dismiss(request)

        self.app.push_screen(confirm, answered)

"""The tuning form's widgets: the scope switch, the four knobs with their ranges, extra flags,
the new profile's name, the buttons; the preflight and the diff beside them."""

from __future__ import annotations

from collections.abc import Iterator

from textual.containers import Horizontal, VerticalScroll
from textual.widget import Widget
from textual.widgets import Button, Label, Static, TextArea

from tui.profiles import KNOB_TABLE
from tui.ui.form_keys import FieldInput
from tui.ui.tuning.candidate import EXTRA, GENERAL, NAME, initial_values
from tui.ui.tuning.preflight_panel import PreflightPanel
from tui.ui.tuning.scope import scope_choice
from tui.ui.tuning.setup import FormSetup


def knob_label(knob: str) -> str:
    """The knob's label: its name and its row's range and unit (``tui.sglang.knobs``), shown
    above its input (empty input = SGLang's automatic value)."""
    return f"{knob}  [dim]{KNOB_TABLE[knob].help()}[/]"


def form_widgets(setup: FormSetup, gpu: int | None, scope: str | None) -> Iterator[Widget]:
    """The form's widgets, pre-filled from the running profile (a screen's compose body).

    Args:
        setup: What the form starts from.
        gpu: The GPU the change is for, or None for every GPU.
        scope: The scope chosen (``tui.ui.tuning.scope``), None while it is not.

    Yields:
        The title, then the body (inputs on the left, preflight and diff on the right).
    """
    values = initial_values(setup.running, gpu, setup.default_name)
    yield Static(id="tune-title")
    with Horizontal(id="tune-body"):
        with VerticalScroll(id="tune-inputs"):
            one = setup.gpu if setup.gpu is not None else setup.running.gpus[0]
            yield scope_choice(one, scope)
            yield Label(
                "[b]not chosen yet[/b]: Save and Apply will ask (ctrl+o switches)",
                id="tune-scope-note",
            )
            for knob, text in values.knobs:
                yield Label(knob_label(knob), classes="field-label")
                yield FieldInput(text, placeholder="auto", id=f"knob-{knob}", select_on_focus=False)
                yield Label(id=f"error-{knob}", classes="field-error")
            yield Label(
                "extra flags, one per line: --flag value | --flag | key=value",
                classes="field-label",
                id="extra-label",
            )
            yield TextArea(values.extra_flags, id="extra-flags", soft_wrap=False)
            yield Label(id=f"error-{EXTRA}", classes="field-error")
            yield Label("new profile name", classes="field-label")
            yield FieldInput(values.name, id="profile-name", select_on_focus=False)
            yield Label(id=f"error-{NAME}", classes="field-error")
            yield Label(id=f"error-{GENERAL}", classes="field-error")
            with Horizontal(id="tune-buttons"):
                yield Button("Apply", variant="error", id="tune-apply")
                yield Button("Save as new", variant="primary", id="tune-save")
                yield Button("Cancel", id="tune-cancel")
            yield Label(id="tune-blocked")
        with VerticalScroll(id="tune-results"):
            yield PreflightPanel(id="preflight")
            yield Static(id="tune-diff")

"""Whom a change of the tuning form is for: one GPU (a ``[gpu.N]`` override) or every GPU (the
profile's shared flags), chosen by the operator, never assumed.

Why: opened on a GPU, the form used to save a ``[gpu.0]`` override by default; the diff read
``gpu.0.mem_fraction_static: (unset) -> 0.9`` and a later rollout of the profile changed nothing
on the other GPUs. Now the form opened on every GPU (``T``) is for every GPU; opened on one GPU
(``t``) it shows both choices at its top, neither taken, and the first Save or Apply asks
(``ScopeScreen``) before anything is written. ``ctrl+o`` switches between the two.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Label, RadioButton, RadioSet

from tui.ui.dialog_keys import BUTTON_KEYS, KEYS_HINT_CSS, ButtonKeys, keys_hint
from tui.ui.gate import ReadOnlyGate

ONE_GPU = "one"
"""The change is a ``[gpu.N]`` override, applied to that GPU only."""
EVERY_GPU = "all"
"""The change is to the shared flags, applied to every GPU of the profile."""


def one_gpu_words(gpu: int) -> str:
    """The one-GPU choice in words (short: the form's column is 38 wide at 80x24)."""
    return f"GPU {gpu} only ([gpu.{gpu}] override)"


EVERY_GPU_WORDS = "every GPU (the shared flags)"
"""The every-GPU choice in words."""


def scope_choice(gpu: int, chosen: str | None) -> RadioSet:
    """The two choices at the top of the form (``chosen`` None: neither taken yet).

    Args:
        gpu: The GPU the one-GPU choice names.
        chosen: ``ONE_GPU``, ``EVERY_GPU`` or None.

    Returns:
        The radio set (id ``tune-scope``; its buttons ``scope-one`` and ``scope-all``).
    """
    return RadioSet(
        RadioButton(EVERY_GPU_WORDS, value=chosen == EVERY_GPU, id="scope-all"),
        RadioButton(one_gpu_words(gpu), value=chosen == ONE_GPU, id="scope-one"),
        id="tune-scope",
    )


class ScopeScreen(ModalScreen[str | None], ButtonKeys, ReadOnlyGate[str | None]):
    """Asks whether the form's change is for one GPU or every GPU; dismisses with ``ONE_GPU``,
    ``EVERY_GPU`` or None (cancel: nothing is saved)."""

    DEFAULT_CSS = (
        """
    ScopeScreen {
        align: center middle;
    }
    ScopeScreen > Vertical {
        width: 72;
        max-width: 100%;
        height: auto;
        border: thick $warning;
        background: $surface;
        padding: 1 2;
    }
    ScopeScreen #scope-question {
        width: 100%;
        text-style: bold;
    }
    ScopeScreen #scope-detail {
        width: 100%;
        margin: 1 0;
    }
    ScopeScreen Horizontal {
        height: auto;
    }
    ScopeScreen Button {
        margin-right: 1;
    }
    """
        + KEYS_HINT_CSS
    )

    BINDINGS = [
        Binding("g", "choose('one')", "This GPU only", id="scope.one"),
        Binding("a", "choose('all')", "Every GPU", id="scope.all"),
        Binding("n,escape", "cancel", "Cancel", id="scope.cancel"),
        *BUTTON_KEYS,
    ]

    def __init__(self, gpu: int, what: str) -> None:
        """Args:
        gpu: The GPU the form was opened on.
        what: What waits for the answer ('save', 'apply').
        """
        super().__init__()
        self.gpu = gpu
        """The GPU of the one-GPU choice."""
        self.what = what
        """The action that asked."""

    def compose(self) -> ComposeResult:
        """The question, what each answer does, the buttons and their keys."""
        with Vertical():
            yield Label(
                f"Is this change for GPU {self.gpu} only, or every GPU?", id="scope-question"
            )
            yield Label(
                f"GPU {self.gpu} only: the new profile carries a [gpu.{self.gpu}] override; a "
                "rollout of it changes nothing on the other GPUs.\n"
                "Every GPU: the profile's shared flags change; the form then shows that diff "
                f"and its preflight, and you {self.what} again.",
                id="scope-detail",
            )
            with Horizontal():
                yield Button(f"GPU {self.gpu} only", variant="primary", id="scope-one-button")
                yield Button("Every GPU", id="scope-all-button")
                yield Button("Cancel", id="scope-cancel-button")
            keys = [("g", f"GPU {self.gpu} only"), ("a", "Every GPU"), ("n/Esc", "Cancel")]
            yield keys_hint(keys, f"GPU {self.gpu} only")

    def on_mount(self) -> None:
        """What the form shows (its diff and preflight are for the one GPU) is focused."""
        self.query_one("#scope-one-button", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        """A button answers."""
        answer = {"scope-one-button": ONE_GPU, "scope-all-button": EVERY_GPU}
        self.dismiss(answer.get(event.button.id or ""))

    def action_choose(self, choice: str) -> None:
        """Answer ``choice``."""
        self.dismiss(choice)

    def action_cancel(self) -> None:
        """No answer: nothing is saved."""
        self.dismiss(None)

"""The keys, grouped by where they apply (`?`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.content import Content
from textual.keys import format_key
from textual.screen import ModalScreen
from textual.widgets import Static

from tui.ui.readonly import READ_ONLY, binding_changes_fleet

HelpSection = tuple[str, Iterable[BindingType]]
"""A heading and the bindings listed under it."""


def help_sections(app_bindings: Iterable[BindingType]) -> list[HelpSection]:
    """Every screen's keys, the modal ones included, in the order an operator meets them.

    Args:
        app_bindings: The keys that work everywhere (the app's).

    Returns:
        The sections of the help screen.
    """
    # Imported here: the screens import what they need, and nothing imports the help screen.
    from tui.ui.autotune.autotune_screen import AutotuneScreen
    from tui.ui.autotune.form_screen import AutotuneFormScreen
    from tui.ui.confirm import ConfirmScreen
    from tui.ui.detail.detail_screen import DetailScreen
    from tui.ui.detail.log_panel import LogPanel
    from tui.ui.detail.log_view import LogView
    from tui.ui.journal.journal_screen import JournalEntryScreen, JournalScreen
    from tui.ui.main_screen import MainScreen
    from tui.ui.pipeline.generation_pane import GenerationPane
    from tui.ui.quit_screen import QuitScreen
    from tui.ui.retune.apply_screen import ApplyScreen
    from tui.ui.retune.profile_picker import ProfilePickerScreen
    from tui.ui.rollout.canary_screen import CanaryScreen
    from tui.ui.rollout.rollout_screen import RolloutScreen
    from tui.ui.stop_screen import StopScreen
    from tui.ui.tuning.form_screen import TuningFormScreen

    return [
        ("Everywhere", app_bindings),
        ("Grid", MainScreen.BINDINGS),
        ("Generation pane (g)", GenerationPane.BINDINGS),
        ("Detail (Enter)", DetailScreen.BINDINGS),
        ("Log viewer (in the detail)", [*LogPanel.BINDINGS, *LogView.BINDINGS]),
        ("Tuning form (t, T)", TuningFormScreen.BINDINGS),
        ("Apply / rollback", ApplyScreen.BINDINGS),
        ("Canary (c)", CanaryScreen.BINDINGS),
        ("Rollout", RolloutScreen.BINDINGS),
        ("Autotune (a)", AutotuneScreen.BINDINGS),
        ("Autotune form (s)", AutotuneFormScreen.BINDINGS),
        ("Journal (j)", JournalScreen.BINDINGS),
        ("Journal entry", JournalEntryScreen.BINDINGS),
        ("Stop a server (k, K)", StopScreen.BINDINGS),
        ("Confirm", ConfirmScreen.BINDINGS),
        ("Profile picker", ProfilePickerScreen.BINDINGS),
        ("Quit (q)", QuitScreen.BINDINGS),
        ("This help (?)", HelpScreen.BINDINGS),
    ]


def key_label(keys: str) -> str:
    """How a binding's keys read on screen: 'left_square_bracket' -> '[', 'ctrl+s' -> '^s',
    'escape,enter' -> 'esc / ⏎'."""
    labels = []
    for key in keys.split(","):
        *modifiers, name = key.split("+")
        label = format_key(name)
        if "ctrl" in modifiers:
            modifiers.remove("ctrl")
            label = f"^{label}"
        labels.append("+".join([*modifiers, label]))
    return " / ".join(labels)


def _rows(bindings: Iterable[BindingType]) -> list[tuple[str, str, str | None]]:
    """(keys, description, binding id) per binding; a run of digit keys numbering one thing is one
    row (with the first's id)."""
    rows: list[tuple[str, str, str | None]] = []
    run: list[Binding] = []

    def flush() -> None:
        if len(run) > 2:
            stem = run[0].description[:-1].rstrip()
            first, last = run[0].key, run[-1].key
            rows.append((f"{first}-{last}", f"{stem} {first}-{last}", run[0].id))
        else:
            rows.extend((key_label(b.key), b.description, b.id) for b in run)
        run.clear()

    for binding in Binding.make_bindings(bindings):
        numbered = binding.key.isdigit() and binding.description.endswith(binding.key)
        if numbered and (not run or run[0].description[:-1] == binding.description[:-1]):
            run.append(binding)
            continue
        flush()
        if numbered:
            run.append(binding)
            continue
        label = binding.key_display or key_label(binding.key)
        # A Footer word may be short ('Pipeline'); its tooltip is what the key does, in full.
        words = binding.tooltip or binding.description
        if rows and rows[-1][1] == words:  # 'escape,enter' was split in two
            label = f"{rows.pop()[0]} / {label}"
        rows.append((label, words, binding.id))
    flush()
    return rows


def help_text(sections: Sequence[HelpSection], readonly: bool = False) -> Content:
    """Each section's heading, then one line per binding: its keys and its description.

    Args:
        sections: Headings with their bindings.
        readonly: Mark the keys that read-only mode disables.

    Returns:
        The text of the help screen.
    """
    lines: list[Content] = []
    for heading, bindings in sections:
        if lines:
            lines.append(Content(""))
        lines.append(Content.styled(heading, "bold $accent"))
        for keys, description, binding_id in _rows(bindings):
            line = Content.assemble((f"  {keys:<18}", "bold"), description)
            if readonly and binding_changes_fleet(binding_id):
                line = Content.assemble(line, (f"  (disabled: {READ_ONLY})", "$text-muted"))
            lines.append(line)
    return Content("\n").join(lines)


class HelpScreen(ModalScreen[None]):
    """Every key of the console; Escape, q or ? closes it."""

    DEFAULT_CSS = """
    HelpScreen {
        align: center middle;
    }
    HelpScreen > VerticalScroll {
        width: 72;
        max-width: 100%;
        height: auto;
        max-height: 90%;
        border: thick $primary;
        border-title-style: bold;
        background: $surface;
        padding: 0 1;
    }
    """

    BINDINGS = [Binding("escape,question_mark,q", "dismiss", "Close help", id="help.close")]

    def __init__(self, sections: Sequence[HelpSection], readonly: bool = False) -> None:
        """Args:
        sections: Headings with their bindings, in display order.
        readonly: The console is read-only: the keys that would change the fleet say so.
        """
        super().__init__()
        self.sections = tuple(sections)
        """What to list."""
        self.readonly = readonly
        """Whether the fleet-changing keys are marked disabled."""

    def compose(self) -> ComposeResult:
        """One scrollable text of every section."""
        with VerticalScroll() as scroll:
            scroll.border_title = "Keys"
            yield Static(help_text(self.sections, self.readonly), id="help-text")

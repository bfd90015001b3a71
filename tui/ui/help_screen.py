"""The keys, grouped by where they apply (`?`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Static

from tui.ui.readonly import READ_ONLY, binding_changes_fleet

HelpSection = tuple[str, Iterable[BindingType]]
"""A heading and the bindings listed under it."""


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
        for binding in Binding.make_bindings(bindings):
            keys = binding.key_display or binding.key.replace(",", " / ")
            line = Content.assemble((f"  {keys:<18}", "bold"), binding.description)
            if readonly and binding_changes_fleet(binding.id):
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

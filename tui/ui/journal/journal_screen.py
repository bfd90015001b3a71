"""The journal screen: every apply, canary and rollout, newest first; Enter shows one."""

from __future__ import annotations

from collections.abc import Callable

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import DataTable, Static

from tui.ops.journal import JournalEntry, JournalRead
from tui.ui.footer import FleetFooter
from tui.ui.journal.entry_view import ROW_HEADER, entry_detail, entry_row


class JournalEntryScreen(ModalScreen[None]):
    """One entry's detail: diff, per-GPU reports, verdict."""

    DEFAULT_CSS = """
    JournalEntryScreen {
        align: center middle;
    }
    JournalEntryScreen > VerticalScroll {
        width: 90%;
        height: 85%;
        border: thick $primary;
        background: $surface;
        padding: 0 1;
    }
    """

    BINDINGS = [Binding("escape,enter,q", "close", "Close", id="journal.entry.close")]

    def __init__(self, entry: JournalEntry) -> None:
        """Args:
        entry: The journal entry.
        """
        super().__init__()
        self.entry = entry
        """The entry shown."""

    def compose(self) -> ComposeResult:
        """The detail text."""
        with VerticalScroll():
            yield Static(entry_detail(self.entry), id="journal-entry")

    def action_close(self) -> None:
        """Back to the list."""
        self.dismiss(None)


class JournalScreen(Screen[None]):
    """The list of journal entries, read in a thread worker."""

    DEFAULT_CSS = """
    JournalScreen DataTable {
        height: 1fr;
    }
    JournalScreen #journal-note {
        height: auto;
        padding: 0 1;
        color: $text-muted;
    }
    """

    BINDINGS = [
        Binding("escape,j", "close", "Back", id="journal.close"),
        Binding("enter", "open_entry", "Details", id="journal.open", show=True),
    ]

    def __init__(self, reader: Callable[[], JournalRead]) -> None:
        """Args:
        reader: Reads the journal (blocking).
        """
        super().__init__()
        self.reader = reader
        """The journal source."""
        self.entries: list[JournalEntry] = []
        """Entries shown, newest first."""

    def compose(self) -> ComposeResult:
        """A note line, the table, the footer."""
        yield Static("reading the journal...", id="journal-note")
        yield DataTable(id="journal-table", cursor_type="row", zebra_stripes=True)
        yield FleetFooter()

    def on_mount(self) -> None:
        """Columns, then read."""
        self.query_one(DataTable).add_columns(*ROW_HEADER)
        self._read()

    @work(thread=True, group="journal-read", exclusive=True, exit_on_error=False)
    def _read(self) -> None:
        read = self.reader()
        self.app.call_from_thread(self._show, read)

    def _show(self, read: JournalRead) -> None:
        # By start, newest first: entries are written when an operation ends, so a long apply
        # lands in the file after a short one that started later (ties: the later line first).
        self.entries = sorted(
            reversed(read.entries), key=lambda entry: entry.started_at, reverse=True
        )
        table = self.query_one(DataTable)
        table.clear()
        for index, entry in enumerate(self.entries):
            table.add_row(*entry_row(entry), key=str(index))
        note = f"{len(self.entries)} entries, newest first; Enter shows one"
        if not self.entries:
            note = "the journal is empty: no apply has been recorded yet"
        if read.skipped:
            note += f" ({read.skipped} unreadable line(s) skipped)"
        if read.partial:
            note += f"; {read.partial}"
        if read.unreadable:
            note = read.unreadable
        self.query_one("#journal-note", Static).update(note)
        table.focus()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        """Enter on a row opens it."""
        self._open(event.cursor_row)

    def action_open_entry(self) -> None:
        """Open the highlighted entry."""
        self._open(self.query_one(DataTable).cursor_row)

    def _open(self, row: int) -> None:
        if 0 <= row < len(self.entries):
            self.app.push_screen(JournalEntryScreen(self.entries[row]))

    def action_close(self) -> None:
        """Back to the grid."""
        self.dismiss(None)

"""``LogView``: a log that is appended to, never rewritten (the line API, like toolong's).

Only the rows on screen are drawn. New lines are appended; while the view follows it stays at
the end, and once the operator scrolls up (or pauses) it stays on the lines shown while new ones
arrive below (when the scrollback drops its oldest lines, the view moves with the lines it shows).
Lines wrap at the width, or run on to be scrolled sideways. Error lines and allocation lines are
coloured (the log parser says which is which), the filter's matches are highlighted, and the
line a jump landed on is marked.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from rich.cells import cell_len
from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.cache import LRUCache
from textual.geometry import Size
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from tui.ui.detail.log_buffer import SCROLLBACK, LogBuffer
from tui.ui.detail.log_filter import LineFilter, LineKind, line_kind


def wrap_points(line: str, width: int) -> list[int]:
    """Where each row of ``line`` starts when it wraps at ``width`` characters: after the last
    space that leaves the row at least two thirds full, else at the width (a long token).

    Args:
        line: The line.
        width: Characters per row (>= 1).

    Returns:
        The start offsets, the first 0.
    """
    starts = [0]
    start = 0
    while len(line) - start > width:
        space = line.rfind(" ", start + (2 * width) // 3, start + width)
        start = space + 1 if space >= 0 else start + width
        starts.append(start)
    return starts


class LogView(ScrollView, can_focus=True):
    """A scrollable, filterable, wrapping log. The owner appends lines and sets the filter."""

    DEFAULT_CSS = """
    LogView {
        height: 1fr;
        scrollbar-gutter: stable;
        border: round $panel-lighten-2;
        border-title-style: bold;
        border-subtitle-color: $text-muted;
        background: $surface;
    }
    LogView:focus {
        border: round $accent;
    }
    LogView > .logview--error {
        color: $error;
        text-style: bold;
    }
    LogView > .logview--allocation {
        color: $accent;
    }
    LogView > .logview--match {
        background: $warning 40%;
    }
    LogView > .logview--mark {
        background: $primary 40%;
    }
    """

    COMPONENT_CLASSES = {
        "logview--error",
        "logview--allocation",
        "logview--match",
        "logview--mark",
    }

    BINDINGS = [
        Binding("up", "scroll_up", "Up", show=False, id="log.up"),
        Binding("down", "scroll_down", "Down", show=False, id="log.down"),
        Binding("left", "scroll_left", "Left", show=False, id="log.left"),
        Binding("right", "scroll_right", "Right", show=False, id="log.right"),
        Binding("pageup", "page_up", "Page up", show=False, id="log.page_up"),
        Binding("pagedown", "page_down", "Page down", show=False, id="log.page_down"),
        Binding("home", "scroll_home", "Top", show=False, id="log.top"),
        Binding("end,G", "follow", "Follow", show=False, id="log.follow"),
    ]

    wrap: reactive[bool] = reactive(True)
    """Long lines wrap at the width (else they run on, scrolled with left/right)."""
    following: reactive[bool] = reactive(True)
    """The view stays at the end as lines arrive (False: paused where it is)."""
    marked: reactive[int | None] = reactive(None)
    """Number of the line a jump landed on (highlighted), if any."""

    def __init__(self, max_lines: int = SCROLLBACK, *, id: str | None = None) -> None:
        """Args:
        max_lines: Scrollback (lines kept).
        id: The widget's id.
        """
        super().__init__(id=id)
        self.buffer = LogBuffer(max_lines)
        """The lines."""
        self.unseen = 0
        """Lines that arrived below while paused."""
        self.title = "Log"
        """Shown in the border (with the state in the subtitle)."""
        self._ends: list[int] = []  # rows through each shown line (prefix sums)
        self._longest = 0
        self._wrap_width = 0
        self._moving = False  # a scroll of ours, not the operator's
        self._kinds: LRUCache[int, LineKind | None] = LRUCache(4096)

    # --- content --------------------------------------------------------------------------

    def append_lines(self, lines: Sequence[str]) -> None:
        """Add lines at the end (they show if the filter keeps them)."""
        if not lines:
            return
        before = len(self.buffer.shown)
        top = None if self.following else self._top_line()
        dropped = self.buffer.append(lines)
        if dropped:
            self._rebuild()
        else:
            self._extend(before)
        if not self.following:
            self.unseen += len(self.buffer.shown) - (before - dropped)
            if dropped:  # the rows above moved up: stay on the same line
                self._move_to(self._row_of(top))
        self._settle()

    def set_filter(self, line_filter: LineFilter) -> None:
        """Show only the lines ``line_filter`` keeps."""
        top = self._top_line()
        self.buffer.set_filter(line_filter)
        self._rebuild()
        if top is not None and not self.following:
            self._move_to(self._row_of(top))
        self._settle()

    def clear(self) -> None:
        """Forget every line."""
        self.buffer.clear()
        self.marked = None
        self._rebuild()
        self._settle()

    @property
    def shown_lines(self) -> list[str]:
        """The lines that show, oldest first (for tests and the pager's position)."""
        return [self.buffer.line(n) for n in self.buffer.shown]

    # --- rows -----------------------------------------------------------------------------

    def _width(self) -> int:
        return max(1, self.scrollable_content_region.width)

    def _rows_of(self, line: str) -> int:
        if not self.wrap or len(line) <= self._wrap_width:
            return 1
        return len(wrap_points(line, self._wrap_width))

    def _rebuild(self) -> None:
        self._wrap_width = self._width()
        self._ends = []
        self._longest = 0
        self._extend(0)

    def _extend(self, start: int) -> None:
        """Count the rows of shown lines from index ``start`` on."""
        total = self._ends[-1] if self._ends else 0
        for number in self.buffer.shown[start:]:
            line = self.buffer.line(number)
            total += self._rows_of(line)
            self._ends.append(total)
            if not self.wrap:
                self._longest = max(self._longest, cell_len(line))

    def _settle(self) -> None:
        rows = self._ends[-1] if self._ends else 0
        width = self._wrap_width if self.wrap else self._longest + 1  # the last character too
        self.virtual_size = Size(width, rows)
        if self.following:
            self._move_to(self.max_scroll_y)
            self.call_after_refresh(self._to_end)  # again once the layout knows the new size
        self._subtitle()
        self.refresh()

    def _to_end(self) -> None:
        if self.following:
            self._move_to(self.max_scroll_y)

    def _row_of(self, number: int | None) -> int:
        """The first row of line ``number`` (or of the first shown line after it)."""
        if number is None:
            return 0
        index = bisect.bisect_left(self.buffer.shown, number)
        return self._ends[index - 1] if index else 0

    def _line_at(self, row: int) -> tuple[int, int] | None:
        """(index in shown, row within the line) of a row."""
        index = bisect.bisect_right(self._ends, row)
        if index >= len(self._ends):
            return None
        return index, row - (self._ends[index - 1] if index else 0)

    def _top_line(self) -> int | None:
        at = self._line_at(round(self.scroll_y))
        return None if at is None else self.buffer.shown[at[0]]

    # --- scrolling, following -----------------------------------------------------------------

    def _move_to(self, y: float) -> None:
        self._moving = True
        try:
            # force: the scrollbar that allows scrolling appears only at the next layout
            self.scroll_to(y=max(0.0, y), animate=False, immediate=True, force=True)
        finally:
            self._moving = False

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        """The operator scrolled: up pauses, back to the end follows again."""
        super().watch_scroll_y(old_value, new_value)
        if not self._moving and self.is_mounted:
            self.following = new_value >= self.max_scroll_y

    def watch_following(self, following: bool) -> None:
        """Following again: go to the end."""
        if following:
            self.unseen = 0
            self._move_to(self.max_scroll_y)
        self._subtitle()

    def action_follow(self) -> None:
        """Go to the end and stay there as lines arrive."""
        self.following = True

    def toggle_pause(self) -> None:
        """Pause where the view is, or follow again."""
        self.following = not self.following

    def watch_wrap(self) -> None:
        """Re-count the rows; keep the same line at the top."""
        if not self.is_mounted:
            return
        top = self._top_line()
        self._rebuild()
        self.scroll_to(x=0, animate=False, immediate=True)
        if not self.following:
            self._move_to(self._row_of(top))
        self._settle()

    def on_resize(self) -> None:
        """A new width means new wrapped rows."""
        if self.wrap and self._width() != self._wrap_width:
            top = self._top_line()
            self._rebuild()
            if not self.following:
                self._move_to(self._row_of(top))
        self._settle()

    def _subtitle(self) -> None:
        shown, kept = len(self.buffer.shown), len(self.buffer.lines)
        lines = f"{shown:,} of {kept:,} lines" if self.buffer.filter.active else f"{kept:,} lines"
        if self.following:
            state = "following"
        else:
            state = f"PAUSED, {self.unseen:,} new below" if self.unseen else "PAUSED"
        self.border_title = self.title
        self.border_subtitle = f"{lines} · {state} · {'wrap' if self.wrap else 'no wrap'}"

    # --- jumps ------------------------------------------------------------------------------

    def kind_of(self, number: int) -> LineKind | None:
        """The kind of line ``number`` (parsed once, remembered)."""
        if number in self._kinds:
            return self._kinds[number]
        kind = line_kind(self.buffer.line(number))
        self._kinds[number] = kind
        return kind

    def jump(self, kind: LineKind, step: int) -> bool:
        """Mark the next (1) or previous (-1) shown line of ``kind`` and bring it to the top.

        Args:
            kind: What to look for.
            step: Direction.

        Returns:
            False when there is none that way (nothing moves).
        """
        shown = self.buffer.shown
        origin = self.marked if self.marked is not None else self._top_line()
        if origin is None:
            return False
        index = bisect.bisect_left(shown, origin)
        if step > 0:
            candidates = range(index + (1 if self.marked is not None else 0), len(shown))
        else:
            candidates = range(min(index, len(shown)) - 1, -1, -1)
        for i in candidates:
            if self.kind_of(shown[i]) is kind:
                self.following = False
                self.marked = shown[i]
                self._move_to(self._row_of(shown[i]))
                self.refresh()
                return True
        return False

    # --- drawing ------------------------------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        """Row ``y`` of the view."""
        width = self.scrollable_content_region.width
        at = self._line_at(round(self.scroll_y) + y)
        if at is None:
            return Strip.blank(width, self.rich_style)
        index, part = at
        number = self.buffer.shown[index]
        line = self.buffer.line(number)
        if self.wrap:
            text = self._styled(number, line)
            starts = wrap_points(line, self._wrap_width)
            pieces = text.divide(starts[1:])
            piece = pieces[part] if part < len(pieces) else Text("")
            strip = Strip(list(piece.render(self.app.console)), piece.cell_len)
            return strip.extend_cell_length(width).crop(0, width).apply_style(self.rich_style)
        text = self._styled(number, line)
        strip = Strip(list(text.render(self.app.console)), text.cell_len)
        x = round(self.scroll_x)
        return strip.extend_cell_length(x + width).crop(x, x + width).apply_style(self.rich_style)

    def _styled(self, number: int, line: str) -> Text:
        text = Text(line, no_wrap=True, end="")
        kind = self.kind_of(number)
        if kind is LineKind.ERROR:
            text.stylize(self._component("logview--error"))
        elif kind is LineKind.ALLOCATION:
            text.stylize(self._component("logview--allocation"))
        include = self.buffer.filter.include
        if include is not None:
            match_style = self._component("logview--match")
            for match in include.finditer(line):
                if match.end() > match.start():
                    text.stylize(match_style, match.start(), match.end())
        if number == self.marked:
            text.stylize(self._component("logview--mark"))
        return text

    def _component(self, name: str) -> Style:
        return self.get_component_rich_style(name, partial=True)

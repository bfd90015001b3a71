"""The lines a log view holds: a bounded scrollback, numbered, with the filter's selection kept
up to date as lines arrive (pure: no Textual)."""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from tui.ui.detail.log_filter import LineFilter

SCROLLBACK = 10_000
"""Lines kept; older ones are dropped (the whole file is for search and the pager)."""


class LogBuffer:
    """Lines numbered from 0 since the view opened; the oldest beyond ``max_lines`` dropped.

    Args:
        max_lines: Lines kept (>= 1).
    """

    def __init__(self, max_lines: int = SCROLLBACK) -> None:
        if max_lines < 1:
            raise ValueError(f"max_lines must be >= 1, got {max_lines}")
        self.max_lines = max_lines
        """Lines kept."""
        self.lines: list[str] = []
        """The kept lines, oldest first."""
        self.first = 0
        """Number of ``lines[0]`` (lines dropped so far)."""
        self.filter = LineFilter()
        """Which lines show."""
        self.shown: list[int] = []
        """Numbers of the lines that show, in order."""

    @property
    def end(self) -> int:
        """Number the next line will get."""
        return self.first + len(self.lines)

    def line(self, number: int) -> str:
        """The line numbered ``number`` (it must still be kept)."""
        return self.lines[number - self.first]

    def append(self, new: Sequence[str]) -> int:
        """Add lines at the end; drop the oldest past ``max_lines``.

        Args:
            new: The lines, oldest first.

        Returns:
            How many lines that showed were dropped from the front (a view that stays where
            it is moves up by as many rows).
        """
        start = self.end
        keeps = self.filter.keeps if self.filter.active else None
        self.lines.extend(new)
        self.shown.extend(start + i for i, line in enumerate(new) if keeps is None or keeps(line))
        # Trim in steps of a tenth: dropping one line per append would shift the list each time.
        if len(self.lines) > self.max_lines + self.max_lines // 10:
            drop = len(self.lines) - self.max_lines
            del self.lines[:drop]
            self.first += drop
            gone = bisect.bisect_left(self.shown, self.first)
            del self.shown[:gone]
            return gone
        return 0

    def set_filter(self, line_filter: LineFilter) -> None:
        """Show the lines ``line_filter`` keeps (the selection is made again)."""
        self.filter = line_filter
        if not line_filter.active:
            self.shown = list(range(self.first, self.end))
            return
        self.shown = [
            self.first + i for i, line in enumerate(self.lines) if line_filter.keeps(line)
        ]

    def clear(self) -> None:
        """Forget every line (the numbering goes on)."""
        self.first = self.end
        self.lines = []
        self.shown = []

"""The log viewer's filters and the kinds of line it jumps to (pure: no Textual).

A filter is a regular expression, smart-cased like ripgrep's ``-S``: case-insensitive unless it
has an upper-case letter. A pattern that does not compile is a ``FilterError`` with one line that
names the field, the pattern and where it breaks, for the field's error label.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from tui.logs import events as ev
from tui.logs.parser import RULES, parse_line
from tui.logs.state import ALLOCATION_KINDS


class FilterError(ValueError):
    """A filter that is not a valid regular expression (the message is one line)."""


def compile_filter(field: str, text: str) -> re.Pattern[str] | None:
    """The pattern of a filter field.

    Args:
        field: The field's name, for the error ('filter', 'exclude', 'search').
        text: What was typed (empty: no filter).

    Returns:
        The compiled pattern, or None for an empty field.

    Raises:
        FilterError: ``text`` is not a valid regular expression.
    """
    if not text:
        return None
    flags = 0 if any(c.isupper() for c in text) else re.IGNORECASE
    try:
        return re.compile(text, flags)
    except re.error as error:
        where = f" at position {error.pos}" if error.pos is not None else ""
        raise FilterError(f"{field} /{text}/: {error.msg}{where}") from None


@dataclass(frozen=True, slots=True)
class LineFilter:
    """Which lines show: those ``include`` finds (all when None) that ``exclude`` does not."""

    include: re.Pattern[str] | None = None
    """Lines must match this."""
    exclude: re.Pattern[str] | None = None
    """Lines must not match this."""

    @property
    def active(self) -> bool:
        """Whether any line can be hidden."""
        return self.include is not None or self.exclude is not None

    def keeps(self, line: str) -> bool:
        """Whether ``line`` shows."""
        if self.include is not None and self.include.search(line) is None:
            return False
        return self.exclude is None or self.exclude.search(line) is None


class LineKind(StrEnum):
    """What the jump keys look for."""

    ERROR = "error"
    """An OOM, a crash, a refused argument: the parser's error lines."""
    ALLOCATION = "allocation"
    """Weights, the Mamba and KV pools, the pool summary, SGLang's caps."""


def kind_anchors(kind: LineKind) -> re.Pattern[str]:
    """A pattern every line of ``kind`` matches: the anchors of the parser's rules for it (a
    rule is tried only when one is in the line). The whole-file search's cheap pre-check, so a
    block without any is skipped in one scan; ``line_kind`` decides each line that has one.

    Args:
        kind: What the jump keys look for.

    Returns:
        The alternation of the anchors.
    """
    kinds = {ev.ERROR} if kind is LineKind.ERROR else ALLOCATION_KINDS
    anchors = sorted({a for rule in RULES if rule.kind in kinds for a in rule.anchors})
    return re.compile("|".join(re.escape(a) for a in anchors))


def line_kind(line: str) -> LineKind | None:
    """What the log parser says ``line`` is, among the kinds the viewer marks.

    Args:
        line: One raw log line.

    Returns:
        Its kind, or None for any other line (a Decode line, an access line, ...).
    """
    event = parse_line(line)
    if event is None:
        return None
    if event.kind == ev.ERROR:
        return LineKind.ERROR
    if event.kind in ALLOCATION_KINDS:
        return LineKind.ALLOCATION
    return None

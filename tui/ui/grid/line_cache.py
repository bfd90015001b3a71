"""``line``: a panel's line built once for the same words (the panels and the fleet row)."""

from __future__ import annotations

from textual.content import Content

LINES_KEPT = 1024
"""Distinct lines ``line`` keeps (all are dropped at once past this, and made again). Why so
few: a line need only outlive one reading to be found again; under load the moving lines add
20-30 a second (seven panels), so this is a clear every minute or so, ~0.5 MB at most."""

_lines: dict[tuple[str | tuple[str, str], ...], Content] = {}


def line(*parts: str | tuple[str, str]) -> Content:
    """``Content.assemble(*parts)``: the same object for the same parts (text, or text and style).

    Why: most of a panel's lines read as they did a second ago (the state, memory, KV and max
    running lines under load); built anew at each reading they cost their construction, and the
    panel's line diff (``changed_span``) compared each one's text and spans. The same object
    passes that diff at once (``old is new``). Content is immutable, so sharing it is safe.
    Why parts and not Content as the key: Content compares by its text only.
    """
    content = _lines.get(parts)
    if content is None:
        if len(_lines) >= LINES_KEPT:
            _lines.clear()
        content = _lines[parts] = Content.assemble(*parts)
    return content

"""Multi-line records of a log, read in order: Python tracebacks and warnings as one event each.

:func:`~tui.logs.parser.parse_line` judges one line; some records span several. This reader
(what ``gpufleet logs parse`` prints) keeps a little state across lines:

* a traceback (``Traceback (most recent call last):``, alone or after ``Scheduler hit an
  exception:``) runs through its indented frame and source lines (and the ``During handling of
  the above exception ...`` links of a chain) to its first unindented line, the exception: the
  whole is **one** error event, classified by that last line (``tui.logs.errors``: a ValueError
  saying ``Loaded weights leave no GPU memory`` is an OOM), with ``context`` the header's reason,
  ``frames``, ``where`` (the innermost frame) and ``first_line``; unstamped lines right after the
  exception line continue its message (``Try to allocate 5 tokens.``) and belong to it;
* a Python warning (``launch_server.py:56: UserWarning: ...``) takes the indented lines after it
  (the rest of its message, the source line ``warnings.warn(``).

Each :class:`Record` says which lines it covers, so a caller can count what was understood.
The console's fast path (``tui.logs.ingest``) stays per line: a traceback's header and its
exception line are both error events there, and ``tui.logs.state`` keeps the root cause.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from tui.logs import events as ev
from tui.logs.errors import classify_error
from tui.logs.events import LogEvent
from tui.logs.fields import Fields
from tui.logs.parser import parse_line, split_prefix

_TRACEBACK = "Traceback (most recent call last):"
_CHAIN = ("During handling of the above exception", "The above exception was the direct cause")
_FRAME = re.compile(r'^\s+File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<function>\S+)')


@dataclass(frozen=True, slots=True)
class Record:
    """One record of the log: a recognised event over ``first``..``last``, or one line that is
    of no kind (``event`` None), or a blank line (``blank``)."""

    event: LogEvent | None
    """The event, None when the line says nothing known."""
    first: int
    """1-based number of its first line."""
    last: int
    """1-based number of its last line."""
    text: str
    """The first line as read."""
    blank: bool = False
    """An empty (or whitespace-only) line: nothing to understand."""

    @property
    def lines(self) -> int:
        """How many lines it covers."""
        return self.last - self.first + 1


def _indented(text: str) -> bool:
    return text[:1] in (" ", "\t") and bool(text.strip())


class _Traceback:
    """A traceback being read."""

    def __init__(self, header: LogEvent | None, first: int, text: str) -> None:
        self.header, self.first, self.text = header, first, text
        self.frames = 0
        self.where = ""
        self.exception: tuple[str, int] | None = None
        self.tail: list[str] = []

    def body(self, text: str) -> None:
        frame = _FRAME.match(text)
        if frame:
            self.frames += 1
            name = frame["file"].rsplit("/", 1)[-1]
            self.where = f"{name}:{frame['line']} in {frame['function']}"

    def event(self, last: int) -> LogEvent:
        if self.exception is None and self.header is not None:
            return self.header  # cut short before its exception: the header is all there is
        exception_text, number = self.exception or ("", last)
        message = " ".join([exception_text.strip(), *(t.strip() for t in self.tail)]).strip()
        fields: Fields = dict(classify_error(message) or {"reason": "exception", "fatal": True})
        if self.header is not None and self.header.kind == ev.ERROR:
            fields["context"] = str(self.header.get("reason", ""))
            # The process that printed it died of it (SGLang's scheduler, detokenizer).
            fields["fatal"] = bool(fields.get("fatal")) or bool(self.header.get("fatal"))
        fields.update(frames=self.frames, first_line=self.first)
        if self.where:
            fields["where"] = self.where
        stamp = self.header.stamp if self.header is not None else None
        return LogEvent(ev.ERROR, fields, message or self.text.strip(), stamp, None, number)


def read_records(lines: Iterable[str], first_line: int = 1) -> Iterator[Record]:
    """Read a log's lines into records, in order.

    Args:
        lines: the lines, without their newlines.
        first_line: the number of the first one.

    Returns:
        One record per event or unrecognised line; a traceback or a warning with its
        continuation lines is one record.
    """
    tb: _Traceback | None = None
    warning: tuple[LogEvent, int, str] | None = None
    number = first_line - 1
    for number, text in enumerate(lines, start=first_line):
        if tb is not None:
            stamped = split_prefix(text)[1] is not None
            if tb.exception is None and not stamped:
                if not text.strip() or _indented(text) or text.startswith(_CHAIN):
                    tb.body(text)
                    continue
                if text.startswith(_TRACEBACK):
                    continue  # the chained exception's own traceback
                tb.exception = (text, number)
                continue
            # After the exception line: its message's own further lines (no stamp, no kind).
            # A stamped line ends it, exception or not (a traceback cut short).
            if tb.exception is not None and text.strip() and not stamped and not parse_line(text):
                tb.tail.append(text)
                continue
            yield Record(tb.event(number - 1), tb.first, number - 1, tb.text)
            tb = None
        if warning is not None:
            if _indented(text):
                continue
            event, start, raw = warning
            yield Record(event, start, number - 1, raw)
            warning = None
        if not text.strip():
            yield Record(None, number, number, text, blank=True)
            continue
        parsed = parse_line(text, number)
        if _TRACEBACK in text:
            tb = _Traceback(parsed, number, text)
            continue
        if parsed is not None and parsed.kind == ev.WARNING:
            warning = (parsed, number, text)
            continue
        yield Record(parsed, number, number, text)
    if tb is not None:
        yield Record(tb.event(number), tb.first, number, tb.text)
    if warning is not None:
        event, start, raw = warning
        yield Record(event, start, number, raw)

"""The prompt file: JSONL, one prompt per line, identity = 0-based line index.

A line is either ``{"messages": [...]}`` (sent to ``/v1/chat/completions``) or ``{"prompt": "..."}``
(sent to ``/v1/completions``). Opening the file scans it once to validate every line and to keep
only the byte offset of each line start (8 bytes a prompt); prompt text is read back lazily with
``os.pread`` when the prompt is dispatched, so 913,786 prompts cost ~7 MB, not their text.
"""

from __future__ import annotations

import json
import os
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class PromptFileError(Exception):
    """The prompt file cannot be used (missing, unreadable, or malformed lines refused)."""


@dataclass(frozen=True, slots=True)
class BadLine:
    """One malformed line of the prompt file."""

    line: int
    """1-based line number, as an editor shows it."""
    reason: str
    """What is wrong with it."""

    @property
    def index(self) -> int:
        """The prompt index the line would have had."""
        return self.line - 1


def _check(obj: Any) -> str | None:
    """Return why a parsed line is not a prompt, or None when it is one."""
    if not isinstance(obj, dict):
        return f"expected a JSON object, got {type(obj).__name__}"
    if "messages" in obj:
        messages = obj["messages"]
        if not isinstance(messages, list) or not messages:
            return "field 'messages' must be a non-empty list of {role, content} objects"
        for position, message in enumerate(messages):
            if not isinstance(message, dict) or "role" not in message or "content" not in message:
                return f"field 'messages'[{position}] must be an object with 'role' and 'content'"
        return None
    if "prompt" in obj:
        if not isinstance(obj["prompt"], str):
            return f"field 'prompt' must be a string, got {type(obj['prompt']).__name__}"
        return None
    return "needs a 'messages' list or a 'prompt' string"


class PromptFile:
    """Lazily read prompts of a validated JSONL file."""

    def __init__(self, path: Path, offsets: array[int], bad: list[BadLine]) -> None:
        """Use :meth:`open`."""
        self.path = path
        """The JSONL file."""
        self._offsets = offsets
        self.bad_lines = bad
        """Malformed lines (skipped)."""
        self._bad = {b.index for b in bad}
        self._fd = os.open(path, os.O_RDONLY)

    @classmethod
    def open(cls, path: Path, on_bad_line: str = "skip") -> PromptFile:
        """Scan and validate the file.

        Args:
            path: the JSONL prompt file.
            on_bad_line: 'skip' (report and skip malformed lines) or 'refuse' (raise on any).

        Returns:
            The opened file.

        Raises:
            PromptFileError: the file is missing/unreadable, or has malformed lines and
                on_bad_line is 'refuse'.
        """
        if on_bad_line not in ("skip", "refuse"):
            raise PromptFileError(f"--on-bad-line={on_bad_line!r}: allowed values are skip, refuse")
        offsets: array[int] = array("q")
        bad: list[BadLine] = []
        position = 0
        try:
            with open(path, "rb") as handle:
                for number, raw in enumerate(handle, start=1):
                    offsets.append(position)
                    position += len(raw)
                    try:
                        reason = _check(json.loads(raw))
                    except ValueError as exc:
                        reason = f"not valid JSON ({exc})"
                    if reason is not None:
                        bad.append(BadLine(number, reason))
        except FileNotFoundError:
            raise PromptFileError(f"--prompts={path}: no such file") from None
        except (IsADirectoryError, PermissionError) as exc:
            raise PromptFileError(f"--prompts={path}: cannot read it ({exc.strerror})") from None
        offsets.append(position)
        if bad and on_bad_line == "refuse":
            shown = "; ".join(f"line {b.line}: {b.reason}" for b in bad[:10])
            more = f" (and {len(bad) - 10} more)" if len(bad) > 10 else ""
            raise PromptFileError(
                f"--prompts={path}: {len(bad)} malformed line(s): {shown}{more}; "
                "fix them or pass --on-bad-line skip"
            )
        return cls(path, offsets, bad)

    def __len__(self) -> int:
        """Number of lines (prompt indices), valid or not."""
        return len(self._offsets) - 1

    @property
    def valid_count(self) -> int:
        """Number of valid prompts."""
        return len(self) - len(self._bad)

    def is_valid(self, index: int) -> bool:
        """Whether line ``index`` holds a usable prompt."""
        return index not in self._bad

    def read(self, index: int) -> dict[str, Any]:
        """Parse the prompt at ``index`` (one pread)."""
        start = self._offsets[index]
        raw = os.pread(self._fd, self._offsets[index + 1] - start, start)
        obj: dict[str, Any] = json.loads(raw)
        return obj

    def close(self) -> None:
        """Close the file descriptor."""
        os.close(self._fd)


def request_for(prompt: dict[str, Any], model: str, max_tokens: int) -> tuple[str, bytes]:
    """Build the OpenAI-compatible request for one prompt.

    Args:
        prompt: a validated prompt object.
        model: the model name sent to the server.
        max_tokens: the completion length limit.

    Returns:
        (endpoint path, JSON body bytes).
    """
    if "messages" in prompt:
        body = {"model": model, "messages": prompt["messages"], "max_tokens": max_tokens}
        return "/v1/chat/completions", json.dumps(body).encode()
    body = {"model": model, "prompt": prompt["prompt"], "max_tokens": max_tokens}
    return "/v1/completions", json.dumps(body).encode()

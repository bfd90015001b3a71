"""The argv that opens a log in the operator's ``$PAGER`` (pure: a list, never a shell string)."""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from pathlib import Path

DEFAULT_PAGER = "less"
"""When ``$PAGER`` is unset or empty."""


class PagerError(ValueError):
    """``$PAGER`` cannot be read as a command (the message says why, in one line)."""


def pager_argv(
    path: Path, line: int | None = None, env: Mapping[str, str] | None = None
) -> list[str]:
    """``$PAGER``'s words (split as a shell would split them, but no shell runs), then the file.

    ``less`` opens at the end of a log (``+G``), or at ``line`` (``+N``); another pager just
    gets the file.

    Args:
        path: The log.
        line: 1-based line to open at, when known.
        env: The environment (default: this process's).

    Returns:
        The argv.

    Raises:
        PagerError: ``$PAGER`` has unbalanced quotes.
    """
    value = (env if env is not None else os.environ).get("PAGER", "")
    try:
        words = shlex.split(value)
    except ValueError as error:
        raise PagerError(f"PAGER={value!r}: cannot be split into a command: {error}") from None
    words = words or [DEFAULT_PAGER]
    if Path(words[0]).name == "less":
        words.append(f"+{line}" if line else "+G")
    return [*words, str(path)]

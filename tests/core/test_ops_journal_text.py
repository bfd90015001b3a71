"""``gpufleet journal``'s text: never ``? -> profile``, never an empty GPU list."""

from __future__ import annotations

import pytest

from tui.ops.cli.journal import format_entry
from tui.ops.journal import JournalEntry


@pytest.mark.parametrize(
    ("entry", "head", "never"),
    [
        (
            JournalEntry("start", 0.0, 5.0, True, (0, 1), None, "sim-baseline"),
            "start sim-baseline on GPUs 0,1: ok",
            "?",
        ),
        (JournalEntry("apply", 0.0, 5.0, True, (3,), "a", "b"), "apply a -> b on GPUs 3: ok", "?"),
        (JournalEntry("apply", 0.0, 5.0, True, (3,), "b", "b"), "apply b on GPUs 3: ok", "->"),
        (JournalEntry("pipeline-start", 0.0, 1.0, True), "pipeline-start: ok", "GPUs"),
    ],
)
def test_journal_lines_name_what_is_known(entry: JournalEntry, head: str, never: str) -> None:
    first = format_entry(entry)[0]
    assert head in first and never not in first.split("  ", 1)[1], first

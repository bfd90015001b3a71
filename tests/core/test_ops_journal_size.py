"""A journal past the readers' bound is read by its newest entries and said so, and gpufleet no
longer lets one grow that far (issue 36).

The red team's journal of 257 MiB was refused by every reader as "not a regular file, not a
journal": `gpufleet journal` exit 1, the console's and the agent's journal empty. The bounds are
made small here (the code's are 256 MiB to read, 128 MiB to rotate); the files are real.
"""

from __future__ import annotations

import pytest

from tui import paths
from tui.ops import journal
from tui.ops.cli import journal as journal_cli
from tui.ops.entries import simple_entry

pytestmark = [pytest.mark.timeout(60)]


def _entry(n: int) -> journal.JournalEntry:
    return simple_entry("kill", float(n), float(n) + 1, True, (0,), "test", f"entry {n:05d}")


def _grow(count: int) -> None:
    for n in range(count):
        journal.append(_entry(n))


def test_a_journal_past_the_read_bound_is_read_by_its_newest_entries(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(journal, "ROTATE_BYTES", 1 << 30)  # as an older gpufleet: never moved
    _grow(300)
    size = paths.journal_file().stat().st_size
    monkeypatch.setattr(journal, "JOURNAL_LIMIT", size // 3)
    read = journal.read_journal()
    assert not read.unreadable and read.skipped == 0, read.unreadable
    summaries = [entry.summary for entry in read.entries]
    assert summaries[-1] == "entry 00299" and 80 < len(summaries) < 120, len(summaries)
    assert f"{paths.journal_file()} is " in read.partial and "newest" in read.partial

    assert journal_cli.main(["--last", "1"]) == 0
    out, err = capsys.readouterr()
    assert "entry 00299" in out
    assert err.count("\n") == 1 and "older entries left out" in err, err


def test_a_journal_past_the_rotation_size_is_moved_aside_before_the_next_entry(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(journal, "ROTATE_BYTES", 8 << 10)
    _grow(40)
    current = paths.journal_file()
    kept = journal.rotated(current)
    assert kept.exists() and kept.stat().st_size >= 8 << 10
    assert current.stat().st_size < 8 << 10
    everything = journal.read_journal(kept).entries + journal.read_journal().entries
    assert [e.summary for e in everything] == [f"entry {n:05d}" for n in range(40)]
    assert kept.stat().st_mode & 0o777 == 0o600 and current.stat().st_mode & 0o777 == 0o600

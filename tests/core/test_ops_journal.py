"""The journal: typed entries appended and read back, torn and wrong-shaped lines skipped, CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tui import paths
from tui.ops.cli import journal as journal_cli
from tui.ops.entries import apply_entry, simple_entry
from tui.ops.journal import JournalEntry, append, read_journal
from tui.ops.marks import JournalMarks
from tui.retune.events import (
    ApplyResult,
    EffectiveValues,
    RequestedValues,
    ThroughputComparison,
    VerifyReport,
)


def make_result(ok: bool = True) -> ApplyResult:
    report = VerifyReport(
        gpu=5,
        ok=ok,
        profile="aggressive",
        requested=RequestedValues(0.93, 200, 0.6, 64),
        effective=EffectiveValues(max_running_requests=40, mamba_slots=200, kv_tokens=798080),
        time_to_ready_s=None if not ok else 30.2,
        failure=None if ok else "OOM: RuntimeError: Not enough memory.",
        error_reason=None if ok else "oom",
    )
    tp = ThroughputComparison((1.0, 2.0, 3.0), (2.0, 3.0, 4.0), "no measurable difference", 0.5)
    return ApplyResult(
        "aggressive", {5: "baseline"}, (5,), (report,), tp, 100.0, 130.0, diff=("a -> b",)
    )


def test_append_and_read_back() -> None:
    append(apply_entry(make_result(), "cli"))
    append(apply_entry(make_result(ok=False), "console"))
    read = read_journal()
    assert read.skipped == 0
    assert [e.ok for e in read.entries] == [True, False]
    first = read.entries[0]
    assert (first.type, first.source, first.target, first.by) == (
        "apply",
        "baseline",
        "aggressive",
        "cli",
    )
    assert first.gpus == (5,) and read.entries[1].failed == (5,)
    assert first.detail["reports"][0]["effective"]["max_running_requests"] == 40
    assert first.detail["reports"][0]["capped"] is True
    assert json.loads(paths.journal_file().read_text().splitlines()[0])["schema"] == 2


def test_torn_last_line_is_skipped_and_next_append_is_intact() -> None:
    append(apply_entry(make_result(), "cli"))
    with paths.journal_file().open("ab") as handle:
        handle.write(b'{"type": "apply", "profile": "torn')  # crash mid-write
    read = read_journal()
    assert len(read.entries) == 1 and read.skipped == 1
    append(simple_entry("kill", 1.0, 2.0, True, (3,), "console", "stopped GPU 3"))
    read = read_journal()
    assert [e.type for e in read.entries] == ["apply", "kill"]
    assert read.skipped == 1


@pytest.mark.parametrize(
    "line",
    [
        "[]",
        '"apply"',
        '{"type": 3, "started_at": 1}',
        '{"type": "apply"}',
        '{"type": "apply", "started_at": "yesterday"}',
        '{"type": "apply", "started_at": 1, "gpus": "0,1"}',
        '{"type": "apply", "started_at": 1, "gpus": [true]}',
        '{"type": "apply", "started_at": 1, "refused": 7}',
        '{"type": "apply", "started_at": 1, "source": {"a": 1}}',
        "[" * 100_000,
    ],
)
def test_a_line_of_the_wrong_shape_is_skipped_and_named(line: str) -> None:
    append(apply_entry(make_result(), "cli"))
    with paths.journal_file().open("a") as handle:
        handle.write(line + "\n")
    read = read_journal()
    assert len(read.entries) == 1 and read.skipped == 1
    assert read.first_problem.startswith(f"{paths.journal_file()}:2: ")
    assert journal_cli.main([]) == 0  # the CLI prints what it can read
    assert [m.t for m in JournalMarks()()] == [100.0]


def test_an_older_entry_is_read_with_its_fields_mapped() -> None:
    old = {
        "schema": 1,
        "type": "apply",
        "profile": "aggressive",
        "previous_profiles": {"5": "baseline"},
        "gpus": [5],
        "ok": True,
        "started_at": 10.0,
        "finished_at": 20.0,
        "reports": [{"gpu": 5, "ok": True}],
    }
    paths.journal_file().parent.mkdir(parents=True, exist_ok=True)
    paths.journal_file().write_text(json.dumps(old) + "\n")
    (entry,) = read_journal().entries
    assert (entry.source, entry.target, entry.gpus) == ("baseline", "aggressive", (5,))
    assert entry.detail["reports"] == [{"gpu": 5, "ok": True}]


def test_missing_journal_reads_empty(tmp_path: Path) -> None:
    assert read_journal(tmp_path / "none.jsonl").entries == ()
    entry = JournalEntry("kill", 1.0, 2.0, True)
    assert JournalEntry.from_json(entry.to_json()) == entry


def test_cli_prints_readably_and_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    append(apply_entry(make_result(), "cli"))
    append(apply_entry(make_result(ok=False), "cli"))
    assert journal_cli.main([]) == 0
    out = capsys.readouterr().out
    assert "apply baseline -> aggressive on GPUs 5: ok" in out
    assert "requested 64 -> effective 40 (CAPPED)" in out
    assert "FAILED OOM: RuntimeError: Not enough memory." in out
    assert journal_cli.main(["--json", "--last", "1"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["ok"] is False
    assert journal_cli.main(["--last", "0"]) == 2

"""The journal: append, read back after 'restarts', tolerate a torn last line, print."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tui import paths
from tui.retune import journal_cli
from tui.retune.events import (
    ApplyResult,
    EffectiveValues,
    RequestedValues,
    ThroughputComparison,
    VerifyReport,
)
from tui.retune.journal import append_entry, read_journal, record_apply


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
    record_apply(make_result())
    record_apply(make_result(ok=False))
    read = read_journal()
    assert read.skipped == 0
    assert [e["ok"] for e in read.entries] == [True, False]
    first = read.entries[0]
    assert first["type"] == "apply" and first["schema"] == 1
    assert first["reports"][0]["effective"]["max_running_requests"] == 40
    assert first["reports"][0]["capped"] is True
    assert first["previous_profiles"] == {"5": "baseline"}
    assert paths.journal_file().exists()


def test_torn_last_line_is_skipped_and_next_append_is_intact() -> None:
    record_apply(make_result())
    with paths.journal_file().open("ab") as handle:
        handle.write(b'{"type": "apply", "profile": "torn')  # crash mid-write
    read = read_journal()
    assert len(read.entries) == 1 and read.skipped == 1
    append_entry({"type": "canary", "gpu": 3})
    read = read_journal()
    assert [e["type"] for e in read.entries] == ["apply", "canary"]
    assert read.skipped == 1


def test_missing_journal_reads_empty_and_type_is_required(tmp_path: Path) -> None:
    assert read_journal(tmp_path / "none.jsonl").entries == ()
    with pytest.raises(ValueError, match="type"):
        append_entry({"profile": "x"})


def test_cli_prints_readably_and_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    record_apply(make_result())
    record_apply(make_result(ok=False))
    assert journal_cli.main([]) == 0
    out = capsys.readouterr().out
    assert "apply aggressive on GPUs 5: ok" in out
    assert "requested 64 -> effective 40 (CAPPED)" in out
    assert "FAILED OOM: RuntimeError: Not enough memory." in out
    assert journal_cli.main(["--json", "--last", "1"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["ok"] is False
    assert journal_cli.main(["--last", "0"]) == 2

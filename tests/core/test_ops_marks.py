"""The chart's markers from the journal: only operations that changed a server, named by what
they did, at the moment the servers changed, with their windows; read again only on a change."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from ui_helpers import verify_report

from tui.ops import marks as marks_module
from tui.ops.entries import apply_entry, canary_entry, simple_entry
from tui.ops.journal import JournalEntry, JournalRead, append
from tui.ops.marks import JournalMarks, OperationMark, Window, gpus_words, mark_of, marks_of
from tui.retune.events import ApplyResult, ThroughputComparison
from tui.rollout.canary_result import CanaryResult

T = 1_000_000.0


def apply_result(**changes: Any) -> ApplyResult:
    comparison = ThroughputComparison(
        (1.0,), (2.0,), "better", before_window=(T, T + 30), after_window=(T + 90, T + 120)
    )
    reports = tuple(verify_report(gpu, "sim-aggressive") for gpu in range(7))
    result = ApplyResult(
        "sim-aggressive", dict.fromkeys(range(7), "sim-baseline"), tuple(range(7)), reports,
        comparison, T, T + 130,
    )  # fmt: skip
    return replace(result, **changes)


def kill(
    ok: bool, gpus: tuple[int, ...], failed: tuple[int, ...] = (), at: float = T
) -> JournalEntry:
    return simple_entry("kill", at, at + 5, ok, gpus, "console", "stopped", failed=failed)


def reattached(at: float, kept: list[int]) -> JournalEntry:
    """A start of GPUs 0-2 by the demo that found ``kept`` running (re-attached, not started)."""
    entry = simple_entry("start", at, at + 1, True, (0, 1, 2), "demo", "3/3", target="sim-baseline")
    return replace(entry, detail={"reattached": kept})


def test_an_apply_is_named_and_marked_when_its_servers_changed_with_its_windows() -> None:
    mark = mark_of(apply_entry(apply_result(), "console"))
    assert mark == OperationMark(
        T + 30,  # the end of the window before: the servers were stopped then, not at its start
        "apply",
        "apply sim-aggressive GPUs 0-6",
        True,
        (Window("before", T, T + 30), Window("after", T + 90, T + 120)),
    )


def test_a_canary_is_named_by_its_profile_and_gpu_with_its_baseline_and_window() -> None:
    result = CanaryResult(
        "sim-m120", 0, (1, 2), "sim-baseline", "better", "", None, None,
        started_at=T, finished_at=T + 200, baseline_window=(T, T + 20),
        measure_window=(T + 80, T + 200), report=verify_report(0, "sim-m120"),
    )  # fmt: skip
    mark = mark_of(canary_entry(result, "console"))
    assert mark is not None and (mark.t, mark.label) == (T + 20, "canary sim-m120 GPU 0")
    assert mark.windows == (Window("before", T, T + 20), Window("after", T + 80, T + 200))


def test_only_operations_that_changed_a_server_are_marked() -> None:
    entries = [
        apply_entry(apply_result(refused=("gpus: GPU 9 is not in the fleet",)), "console"),
        kill(False, (3,), failed=(3,)),  # nothing stopped
        simple_entry("pipeline-start", T, T, True, (), "console", "pipeline pid 7"),
        simple_entry("autotune-summary", T, T, True, (0,), "autotune", "done"),
        JournalEntry("rollout", T, T + 60, True, (1, 2), target="x", detail={"steps": 2}),
        JournalEntry("rollout-step", T + 1, T + 30, True, (1,), target="sim-aggressive"),
        kill(False, (3, 4), failed=(4,)),  # GPU 3 stopped: a change, failed as a whole
        simple_entry("start", T, T + 9, True, (0, 1, 2), "cli", "3/3", target="sim-baseline"),
        # a start that found every server running (re-attached): nothing changed
        reattached(T, [0, 1, 2]),
        # GPU 2 launched, 0 and 1 re-attached: only GPU 2 changed
        reattached(T + 2, [0, 1]),
    ]
    labels = [m.label for m in marks_of(entries)]
    assert labels == [
        "kill GPUs 3,4 (failed)",
        "start sim-baseline GPUs 0-2",
        "rollout sim-aggressive GPU 1",
        "start sim-baseline GPU 2",
    ]
    assert gpus_words((0, 1, 2, 3, 5, 6)) == "GPUs 0-3,5,6"


def test_an_older_entry_without_windows_is_marked_at_its_start() -> None:
    entry = apply_entry(apply_result(), "cli")
    detail = {**entry.detail, "throughput": {"verdict": "better"}}  # before windows were kept
    mark = mark_of(replace(entry, detail=detail))
    assert mark is not None and mark.t == T and mark.windows == ()


def test_the_journal_is_read_again_only_when_it_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    reads: list[Path | None] = []
    real = marks_module.read_journal

    def counting(path: Path | None = None) -> JournalRead:
        reads.append(path)
        return real(path)

    monkeypatch.setattr(marks_module, "read_journal", counting)
    source = JournalMarks()
    assert source() == [] and reads == []  # no journal: nothing to read
    append(apply_entry(apply_result(), "console"))
    first = source()
    assert [m.kind for m in first] == ["apply"] and len(reads) == 1
    assert source() == first and len(reads) == 1  # unchanged: not parsed again
    append(kill(True, (3,), at=T + 300))
    assert [m.label for m in source()] == ["apply sim-aggressive GPUs 0-6", "kill GPU 3"]
    assert len(reads) == 2


def test_marks_of_some_gpus_keep_the_operations_on_any_of_them() -> None:
    entries = [kill(True, (3,)), kill(True, (5,), at=T + 1), kill(True, (2, 3, 4), at=T + 2)]
    assert [m.label for m in marks_of(entries, frozenset({3}))] == ["kill GPU 3", "kill GPUs 2-4"]
    assert [m.label for m in marks_of(entries, frozenset({6}))] == []
    assert len(marks_of(entries)) == 3  # no filter: every operation
    source = JournalMarks(gpus=frozenset({5}))
    for entry in entries:
        append(entry)
    assert [m.label for m in source()] == ["kill GPU 5"]

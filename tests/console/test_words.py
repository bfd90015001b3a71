"""Counted nouns: '1 canary', never '1 canaries' (issue 30: '5.1 / 1800 GPU-s exploring,
1 canaries' on the autotune screen, 'over 1 look(s)' in a canary's verdict)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ui_helpers import pipeline_status, scripted_canary

from tui.autotune.record import summary_entry
from tui.autotune.status import describe_status
from tui.retune.events import MeasureProgress
from tui.ui.autotune.autotune_screen import describe
from tui.ui.autotune.strip_line import autotune_line
from tui.ui.describe import describe_pipeline_stop
from tui.ui.journal.autotune_view import autotune_lines
from tui.ui.rollout.describe import canary_verdict_lines, measuring_line
from tui.words import counted, plural


def test_a_count_of_one_takes_the_singular_and_anything_else_the_plural() -> None:
    assert [counted(n, "canary") for n in (0, 1, 2)] == ["0 canaries", "1 canary", "2 canaries"]
    assert counted(1, "look") == "1 look" and counted(3, "look") == "3 looks"
    assert counted("1", "request") == "1 request"  # as num() writes it
    assert counted("1,234", "request") == "1,234 requests"
    assert counted("–", "canary") == "– canaries"  # unknown: the dash, plural
    assert counted(1.5, "sample") == "1.5 samples"
    assert plural("entry", 2) == "entries" and plural("GPU", 1) == "GPU"


def _doc(canaries: int) -> dict[str, Any]:
    return {
        "phase": "canary",
        "pid": 1,
        "incumbent": {"profile": "sim-baseline", "knobs": {}},
        "spent": {"wall_s": 60.0, "explore_gpu_s": 5.1, "canaries": canaries},
        "budget": {"wall_s": 3600.0, "explore_gpu_s": 1800.0},
    }


def test_one_canary_reads_one_canary_wherever_autotune_counts_them() -> None:
    doc = _doc(1)
    line = autotune_line(doc, alive=True, now=0.0)
    assert line is not None
    texts = {
        "strip": line.plain,
        "screen": describe(doc, alive=True),
        "status": describe_status(doc),
        "summary": summary_entry(0.0, True, (0,), "a", "a", "done", [], doc["spent"]).summary,
    }
    journal = summary_entry(0.0, True, (0,), "a", "a", "done", [], doc["spent"])
    texts["journal"] = "\n".join(c.plain for c in autotune_lines(journal))
    for where, text in texts.items():
        assert "1 canaries" not in text, where
    assert "5.1 / 1800 GPU-s exploring, 1 canary" in texts["screen"]
    assert "GPU-s, 1 canary" in texts["strip"]
    assert "autotune: 0 canaries" in texts["summary"]  # no record launched
    assert "GPU-seconds exploring, 1 canary" in texts["journal"]
    assert "2 canaries" in describe(_doc(2), alive=True)


def test_one_look_one_sample_one_request() -> None:
    result = replace(scripted_canary()("sim-x", 0)[1], looks=1)
    verdict = "\n".join(text for text, _ in canary_verdict_lines(result))
    assert "over 1 look (each at" in verdict and "look(s)" not in verdict
    assert "over 1 look, sure" in result.describe()
    assert "1 sample (" in measuring_line(MeasureProgress("before", 1, 30.0))
    stop = describe_pipeline_stop(replace(pipeline_status(), in_flight=1))
    assert "; 1 request in flight: dropped" in stop

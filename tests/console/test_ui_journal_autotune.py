"""The journal shows the autotune search's entries readably: a measured candidate's knobs,
prediction, effect with its interval and decision; a rejected one as never launched; the
search's summary (pure: entries built by the search's own record functions)."""

from __future__ import annotations

from tui.autotune.record import CandidateRecord, candidate_entry, summary_entry
from tui.ui.journal.entry_view import entry_detail, entry_row


def record(**changes: object) -> CandidateRecord:
    base = CandidateRecord(
        index=3,
        key="max_running_requests=32",
        profile="autotune-12031200-3",
        knobs={"max_running_requests": 32.0},
        incumbent="sim-baseline",
        decision="dropped",
        why="worse: rolled back to sim-baseline",
        launched=True,
        prediction={"fits": True, "why_not": None, "mamba_slots": 80, "kv_tokens": 812000,
                    "max_running_effective": 32, "capped": False, "calibrated": True},
        verdict="worse",
        canary_tokens_per_s=2710.0,
        control_tokens_per_s=2840.5,
        relative=-0.0457,
        rel_low=-0.071,
        rel_high=-0.02,
        level=0.95,
        window_s=60.0,
        explore_gpu_s=31.25,
        gpu=0,
        started_at=1_700_000_000.0,
        finished_at=1_700_000_090.0,
    )  # fmt: skip
    fields = {f: getattr(base, f) for f in base.__slots__}
    return CandidateRecord(**{**fields, **changes})


def test_a_measured_candidate_reads_with_its_prediction_effect_and_decision() -> None:
    entry = candidate_entry(record())
    assert entry_row(entry)[4] == "dropped -4.6%"
    text = entry_detail(entry).plain
    assert "knobs: max_running_requests=32\n" in text
    assert "measured against: sim-baseline" in text
    assert "prediction: fits; 32 running requests, 812000 KV tokens, 80 Mamba slots" in text
    assert "measured on GPU 0 over 60 s: canary 2,710 vs control 2,840 tok/s per GPU" in text
    assert "effect: -4.6% (95% interval -7.1% .. -2.0%), verdict worse" in text
    assert "exploration cost: 31.2 GPU-seconds" in text
    assert "decision: dropped: worse: rolled back to sim-baseline" in text


def test_a_rejected_candidate_reads_as_never_launched_and_the_summary_as_the_search() -> None:
    rejected = record(
        decision="rejected",
        why="does not fit: KV pool below the minimum",
        launched=False,
        prediction={"fits": False, "why_not": "does not fit: KV pool below the minimum"},
        verdict=None, relative=None, rel_low=None, rel_high=None,
    )  # fmt: skip
    entry = candidate_entry(rejected)
    assert entry_row(entry)[4] == "rejected"
    text = entry_detail(entry).plain
    assert "prediction: will not fit: does not fit: KV pool below the minimum" in text
    assert "never launched" in text and "measured on GPU" not in text
    summary = summary_entry(
        1_700_000_000.0, True, (0, 1), "sim-baseline", "autotune-12031200-2",
        "no untried neighbour fits", [record(decision="kept"), rejected],
        {"wall_s": 900.0, "explore_gpu_s": 62.5, "canaries": 2, "paused_s": 120.0},
    )  # fmt: skip
    assert entry_row(summary)[4] == "1 adopted"
    text = entry_detail(summary).plain
    assert "ended: no untried neighbour fits" in text
    assert "candidates: 2, adopted: max_running_requests=32" in text
    assert "spent: 900 s of wall time (+120 s paused), 62.5 GPU-seconds exploring, 2" in text

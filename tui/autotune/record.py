"""What the search records of each candidate: one status row and one journal entry.

The journal entry (type ``autotune-candidate``) carries the candidate's knobs, its prediction
(the preflight on the canary GPU), its measured effect with the interval, whether it was kept
or dropped and why; ``autotune-summary`` closes a search. Both go through
``tui.ops.journal.append`` like every operation's entry; the canaries, rollbacks and rollouts
the search runs are journalled by ``FleetOps`` themselves.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from tui.autotune.space import Candidate
from tui.ops.journal import JournalEntry
from tui.retune.preflight import Preflight
from tui.retune.verdict import effect_words, verdict_words
from tui.rollout.canary_result import CanaryResult
from tui.words import counted

Decision = str
"""rejected (by the preflight), skipped (predicted identical to the incumbent), kept (adopted),
dropped (rolled back), abandoned (not measured: the load changed under its canary; rolled
back, no verdict), stopped, failed."""


@dataclass(frozen=True, slots=True)
class CandidateRecord:
    """One candidate, as the status and the journal show it."""

    index: int
    """1-based order in the search."""
    key: str
    """Its knob moves ('max_running_requests=32')."""
    profile: str
    """The candidate profile's name."""
    knobs: dict[str, float]
    """The knobs it sets."""
    incumbent: str
    """The profile it was measured against."""
    decision: Decision
    """rejected, skipped, kept, superseded, dropped, abandoned, stopped or failed."""
    why: str
    """Why, in words."""
    launched: bool
    """True when it ran on the canary GPU."""
    prediction: dict[str, Any]
    """The preflight: fits, why_not, mamba slots, KV tokens, effective max running."""
    verdict: str | None = None
    """The canary's verdict."""
    canary_tokens_per_s: float | None = None
    """Canary GPU output tokens/s over the window."""
    control_tokens_per_s: float | None = None
    """Mean control GPU output tokens/s over the window."""
    relative: float | None = None
    """Canary vs control, relative."""
    rel_low: float | None = None
    """Lower end of its interval."""
    rel_high: float | None = None
    """Upper end of its interval."""
    level: float | None = None
    """The interval's confidence level."""
    window_s: float | None = None
    """Seconds measured."""
    explore_gpu_s: float = 0.0
    """Exploration GPU-seconds it cost."""
    gpu: int | None = None
    """The canary GPU."""
    beside: dict[str, Any] | None = None
    """TTFT p90, ITL p90 and tokens per joule, canary against control, per side
    (``tui.rollout.beside.Beside.to_json``; None: not measured)."""
    started_at: float = 0.0
    """time.time() at its start."""
    finished_at: float = 0.0
    """time.time() at its end."""

    def to_json(self) -> dict[str, Any]:
        """JSON-ready fields."""
        return asdict(self)


def prediction_of(p: Preflight) -> dict[str, Any]:
    """The preflight's prediction as recorded."""
    return {
        "fits": p.fits,
        "why_not": p.why_not,
        "mamba_slots": p.mamba_slots,
        "kv_tokens": p.kv_tokens,
        "max_running_effective": p.max_running_effective,
        "capped": p.capped,
        "calibrated": p.calibrated,
    }


def measured(
    record: CandidateRecord, result: CanaryResult, explore_gpu_s: float
) -> CandidateRecord:
    """``record`` with what the canary measured."""
    from dataclasses import replace

    t = result.tokens
    return replace(
        record,
        verdict=result.verdict,
        canary_tokens_per_s=None if t is None else round(t.canary_mean, 3),
        control_tokens_per_s=None if t is None else round(t.control_mean, 3),
        relative=None if t is None else round(t.relative, 5),
        rel_low=None if t is None else round(t.rel_low, 5),
        rel_high=None if t is None else round(t.rel_high, 5),
        level=None if t is None else t.level,
        window_s=result.window_s,
        explore_gpu_s=explore_gpu_s,
        beside=result.beside.to_json() if result.beside is not None else None,
    )


def new_record(
    index: int, candidate: Candidate, profile: str, incumbent: str, prediction: Preflight
) -> CandidateRecord:
    """A candidate before it is decided."""
    return CandidateRecord(
        index=index,
        key=candidate.key(),
        profile=profile,
        knobs={k: float(v) for k, v in candidate.knobs},
        incumbent=incumbent,
        decision="pending",
        why="",
        launched=False,
        prediction=prediction_of(prediction),
        gpu=prediction.gpu,
        started_at=time.time(),
    )


def invalid_record(
    index: int, move: Candidate, profile: str, incumbent: str, why: str, gpu: int
) -> CandidateRecord:
    """A candidate whose profile does not validate (rejected before any prediction)."""
    return CandidateRecord(
        index=index,
        key=move.key(),
        profile=profile,
        knobs={k: float(v) for k, v in move.knobs},
        incumbent=incumbent,
        decision="rejected",
        why=why,
        launched=False,
        prediction={"fits": False, "why_not": why},
        gpu=gpu,
        started_at=time.time(),
    )


def history_point(record: CandidateRecord) -> dict[str, Any]:
    """A measured candidate as a point of the status's throughput history (the plot's)."""
    return {
        "t": round(time.time(), 3),
        "index": record.index,
        "key": record.key,
        "canary_tokens_per_s": record.canary_tokens_per_s,
        "control_tokens_per_s": record.control_tokens_per_s,
        "relative": record.relative,
        "verdict": record.verdict,
    }


def candidate_line(c: Mapping[str, Any]) -> str:
    """One candidate in one line, the same wherever it is shown (the console, ``gpufleet
    autotune status``, the journal): ``#3 max_running_requests=64: dropped; no measurable
    difference: +27.5% (95% CI -30.1% .. +85.1%); rolled back to sim-baseline``.

    Args:
        c: A candidate as the status document holds it (``CandidateRecord.to_json``).

    Returns:
        Its index, move, decision, verdict with the estimate and interval, and why.
    """
    parts = [f"#{c.get('index')} {c.get('key')}: {c.get('decision')}"]
    verdict, relative, why = c.get("verdict"), c.get("relative"), str(c.get("why") or "")
    if verdict and relative is None and why.startswith(str(verdict)):
        verdict = None  # the why says it ('not measured (no verdict: ...)'): once is enough
    if verdict:
        parts.append(
            verdict_words(
                str(verdict),
                _number(relative),
                _number(c.get("rel_low")),
                _number(c.get("rel_high")),
                _number(c.get("level")),
            )
        )
    elif isinstance(relative, int | float):  # a document of an older search: no verdict kept
        parts.append(
            effect_words(float(relative), _number(c.get("rel_low")), _number(c.get("rel_high")))
        )
    beside = c.get("beside")
    if isinstance(beside, Mapping) and isinstance(beside.get("short"), str):
        parts.append(beside["short"])
    if why:
        parts.append(why)
    return "; ".join(parts)


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def candidate_entry(record: CandidateRecord) -> JournalEntry:
    """The ``autotune-candidate`` journal entry of a decided candidate."""
    return JournalEntry(
        type="autotune-candidate",
        started_at=record.started_at,
        finished_at=record.finished_at or time.time(),
        ok=record.decision in ("kept", "superseded", "dropped", "abandoned", "rejected", "skipped"),
        gpus=(record.gpu,) if record.launched and record.gpu is not None else (),
        source=record.incumbent,
        target=record.profile,
        by="autotune",
        summary=f"candidate {candidate_line(record.to_json())}",
        verdict=record.verdict,
        # Refused: nothing ran (the preflight's); one rejected by its measured TTFT ran.
        refused=(record.why,) if record.decision == "rejected" and not record.launched else (),
        lost_gpu_seconds=record.explore_gpu_s if record.launched else None,
        detail=record.to_json(),
    )


def summary_entry(
    started_at: float,
    ok: bool,
    gpus: tuple[int, ...],
    first: str,
    final: str,
    reason: str,
    records: list[CandidateRecord],
    spent: dict[str, Any],
) -> JournalEntry:
    """The ``autotune-summary`` entry that closes a search."""
    kept = [r.key for r in records if r.decision == "kept"]
    rejected = sum(1 for r in records if r.decision == "rejected")
    launched = sum(1 for r in records if r.launched)
    return JournalEntry(
        type="autotune-summary",
        started_at=started_at,
        finished_at=time.time(),
        ok=ok,
        gpus=gpus,
        source=first,
        target=final,
        by="autotune",
        summary=(
            f"autotune: {counted(launched, 'canary')}, {rejected} rejected by the preflight, "
            f"{len(kept)} adopted; fleet on {final}; {reason}"
        ),
        lost_gpu_seconds=float(spent.get("explore_gpu_s", 0.0)),
        detail={"adopted": kept, "reason": reason, "spent": spent, "candidates": len(records)},
    )

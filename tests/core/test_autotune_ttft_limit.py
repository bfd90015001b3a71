"""``gpufleet autotune --max-ttft-p90 S``: a candidate whose canary window's TTFT p90 exceeds S is
rejected with that reason, whatever its throughput (canaries answered by hand, no servers)."""

from __future__ import annotations

import tomllib
from dataclasses import replace
from pathlib import Path

import pytest
from ui_helpers import verify_report

from bench.simfleet import BASELINE, sim_profile_text
from tui.autotune import cli
from tui.autotune.options import AutotuneOptions
from tui.autotune.record import candidate_line
from tui.autotune.search import Autotuner
from tui.autotune.space import Candidate, candidate_profile, knobs_of
from tui.autotune.strategy import Ranked
from tui.autotune.trials import Trial
from tui.ops.journal import read_journal
from tui.ops.service import FleetOps
from tui.profiles import Profile, profile_from_dict
from tui.retune.preflight import preflight
from tui.rollout.beside import Beside, Change, Side
from tui.rollout.canary_result import CanaryResult
from tui.rollout.stats import paired

WINDOW = (1000.0, 1060.0)


def better(ttft_p90_s: float | None) -> CanaryResult:
    """A canary 20% better in throughput, its TTFT p90 ``ttft_p90_s`` against 0.5 s."""
    control = [1000.0 + 5 * (i % 3) for i in range(8)]
    tok = paired([c * 1.2 for c in control], control, 0.95)
    assert tok is not None and tok.rel_low > 0
    change = Change(None, note="too few requests (canary n=3, control n=300; a p90 needs 20)")
    if ttft_p90_s is not None:
        change = Change(ttft_p90_s / 0.5 - 1, ttft_p90_s / 0.5 - 1.2, ttft_p90_s / 0.5 - 0.8, 0.95)
    beside = Beside(
        Side("canary", (0,), WINDOW, ttft_p90_s, 400, 0.02, 9000, 72000.0, 42000.0, 72000 / 42000),
        Side("control", (1,), WINDOW, 0.5, 300, 0.02, 8000, 60000.0, 42000.0, 60000 / 42000),
        change,
        Change(0.0, -0.01, 0.01, 0.95),
        Change(0.2, 0.18, 0.22, 0.95),
        8,
    )
    return CanaryResult("c", 0, (1,), "inc", "better", "interval above 0", tok, None,
                        report=verify_report(0, "c"), beside=beside)  # fmt: skip


def tuner_on(
    tmp_path: Path, result: CanaryResult, limit: float | None
) -> tuple[Autotuner, list[str]]:
    text = sim_profile_text("t-baseline", [0, 1], [41000, 41001], str(tmp_path), BASELINE, 10.0)
    seed = profile_from_dict(tomllib.loads(text), "t-baseline")
    inc = candidate_profile(seed, Candidate.of({"max_mamba_cache_size": 320}), "inc")
    tuner = Autotuner(FleetOps(by="autotune"), AutotuneOptions(gpu=0, max_ttft_p90_s=limit))
    tuner.incumbent, tuner.gpu = inc, 0
    tuner.knobs = knobs_of(inc, tuner.options.space)
    back: list[str] = []

    async def canary(profile: Profile, controls: list[int]) -> tuple[CanaryResult, bool]:
        return result, False

    async def back_to(profile: Profile, gpus: list[int] | None = None) -> None:
        back.append(profile.name)

    tuner._canary = canary  # type: ignore[method-assign]  # the test's stand-in
    tuner._back_to = back_to  # type: ignore[method-assign]  # the test's stand-in
    return tuner, back


async def test_a_better_candidate_over_the_ttft_limit_is_rejected_and_rolled_back(
    tmp_path: Path,
) -> None:
    tuner, back = tuner_on(tmp_path, better(4.2), limit=2.0)
    assert tuner.incumbent is not None
    best = Ranked(Candidate.of({"max_running_requests": 72}), preflight(tuner.incumbent, 0), ())
    assert await tuner._try(best, [1]) is None  # the search goes on
    (record,) = tuner.records
    assert record.decision == "rejected" and record.verdict == "better"
    assert record.why == "TTFT p90 4.2 s over --max-ttft-p90 2 s; rolled back to inc"
    assert back == ["inc"] and record.launched
    line = candidate_line(record.to_json())  # the console's table, `autotune status`, journal
    assert "TTFT p90 4.2 vs 0.5 s (+740.0%), tokens/J 1.71 vs 1.43 (+20.0%)" in line
    assert line.endswith("TTFT p90 4.2 s over --max-ttft-p90 2 s; rolled back to inc")
    (entry,) = [e for e in read_journal().entries if e.type == "autotune-candidate"]
    assert entry.refused == () and entry.gpus == (0,)  # it ran: rejected, not refused
    assert entry.detail["beside"]["canary"]["ttft_p90_s"] == 4.2
    assert "over --max-ttft-p90 2 s" in entry.summary


async def test_within_the_limit_or_without_one_it_is_kept_and_unmeasured_is_not_assumed_kept(
    tmp_path: Path,
) -> None:
    tuner, _ = tuner_on(tmp_path, better(1.9), limit=2.0)
    assert tuner.incumbent is not None
    best = Ranked(Candidate.of({"max_running_requests": 72}), preflight(tuner.incumbent, 0), ())
    profile = tuner.incumbent

    def trial(result: CanaryResult) -> Trial:
        record = replace(tuner.records[0]) if tuner.records else None
        return Trial(best, profile, record, result)  # type: ignore[arg-type]  # None: the limit reads no record

    assert tuner._over_ttft_limit(trial(better(1.9))) is None
    assert tuner._over_ttft_limit(trial(better(None))) == (
        "TTFT p90 not measured (too few requests (canary n=3, control n=300; a p90 needs 20)): "
        "--max-ttft-p90 2 s cannot be checked"
    )
    unread = tuner._over_ttft_limit(trial(replace(better(1.9), beside=None)))
    assert unread is not None and unread.startswith("TTFT p90 not measured (not read)")
    free, _ = tuner_on(tmp_path, better(40.0), limit=None)
    assert free._over_ttft_limit(trial(better(40.0))) is None  # the default: no limit


@pytest.mark.parametrize("value", ["0", "-1", "abc", "3601", "nan"])
def test_a_bad_limit_is_one_line_naming_the_option_and_its_range(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["start", "--max-ttft-p90", value]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith(f"gpufleet autotune start: --max-ttft-p90 {value!r}")
    assert err.rstrip().endswith("allowed range (0, 3600] seconds")

"""Canary statistics, sampling and cost on synthetic samples (no processes, fast)."""

from __future__ import annotations

import random

import pytest

from tui.rollout.cost import lost_throughput
from tui.rollout.sampling import Reading, interval_rates
from tui.rollout.stats import decide, intervals_needed, look_level, paired


def drifting(n: int, effect: float, noise: float, seed: int) -> tuple[list[float], list[float]]:
    """Canary and control rates sharing a strong workload drift, the canary scaled by 1+effect."""
    rng = random.Random(seed)
    canary, control = [], []
    for i in range(n):
        load = 1000.0 * (1.0 + 0.4 * ((i % 7) / 7.0))  # drift moves every GPU alike
        control.append(load * (1.0 + rng.gauss(0, noise)))
        canary.append(load * (1.0 + effect) * (1.0 + rng.gauss(0, noise)))
    return canary, control


def test_paired_estimate_recovers_the_effect_under_drift() -> None:
    canary, control = drifting(40, 0.10, 0.01, seed=1)
    est = paired(canary, control, 0.95)
    assert est is not None
    assert est.relative == pytest.approx(0.10, abs=0.01)
    assert est.rel_low > 0.05 and est.rel_high < 0.15
    assert decide(est, 0.03).verdict == "better"
    # Unpaired, the 40% drift would swamp a 10% effect: the paired interval is far narrower.
    assert est.rel_high - est.rel_low < 0.03


def test_worse_and_no_difference() -> None:
    worse = paired(*drifting(20, -0.3, 0.02, seed=2))
    assert worse is not None and decide(worse, 0.03).verdict == "worse"
    same = paired(*drifting(30, 0.0, 0.005, seed=3), level=0.95)
    assert same is not None
    decision = decide(same, 0.03)
    assert decision.verdict == "no measurable difference" and decision.final
    assert same.rel_low <= 0.0 <= same.rel_high


def test_undecided_says_how_many_more_intervals() -> None:
    canary, control = drifting(6, 0.02, 0.03, seed=4)
    est = paired(canary, control, 0.95)
    assert est is not None
    decision = decide(est, 0.01)
    assert not decision.final
    more = decision.more_intervals_to_exclude_zero
    assert more is not None and more > 0
    # With that many more pairs at the same spread, the half-width shrinks to the effect.
    need = intervals_needed(est, abs(est.log_ratio))
    assert need == est.n + more


def test_the_interval_of_a_ratio_never_leaves_minus_100_percent() -> None:
    # The demo's candidate #16: the job ended during its window, the canary's rate fell to a
    # tail of a few hundred tok/s against controls still finishing theirs; at the per-look level
    # of 32 looks an interval symmetric around -54% read -108.1% .. -0.6%: a rate below zero.
    canary = [2400.0, 2300.0, 150.0, 20.0, 0.0, 0.0, 5.0]
    control = [2500.0, 2600.0, 2400.0, 1800.0, 900.0, 400.0, 100.0]
    est = paired(canary, control, look_level(0.95, 32))
    assert est is not None and est.relative < -0.3
    assert -1.0 < est.rel_low < est.relative < est.rel_high
    assert -est.control_mean < est.abs_low < est.abs_diff < est.abs_high
    # the log-ratio interval is asymmetric: further above the estimate than below it
    assert est.rel_high - est.relative > est.relative - est.rel_low
    # a canary that made nothing has no ratio interval at all (its log is -inf): None, and the
    # canary says why instead of "worse: -100.0%"
    assert paired([0.0] * 6, [2500.0] * 6) is None


def test_bonferroni_level_per_look_and_bad_input() -> None:
    assert look_level(0.95, 1) == pytest.approx(0.95)
    assert look_level(0.95, 10) == pytest.approx(0.995)
    with pytest.raises(ValueError, match="looks"):
        look_level(0.95, 0)
    with pytest.raises(ValueError, match="level"):
        paired([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], 1.5)
    assert paired([1.0, 2.0], [1.0, 2.0]) is None


def test_interval_rates_survive_restart_and_downtime() -> None:
    r = [
        Reading(0.0, 0.0, {0: (0.0, 0.0), 1: (500.0, 5.0)}),
        Reading(1.0, 1.0, {0: (100.0, 1.0), 1: (600.0, 6.0)}),
        Reading(2.0, 2.0, {0: (200.0, 2.0), 1: None}),  # GPU 1 down
        Reading(3.0, 3.0, {0: (300.0, 3.0), 1: (40.0, 0.0)}),  # new process: counter from 0
    ]
    rates = interval_rates(r, [0, 1])
    assert [x.tokens[0] for x in rates] == [100.0, 100.0, 100.0]
    assert [x.tokens[1] for x in rates] == [100.0, 0.0, 40.0]
    assert rates[0].requests == {0: 1.0, 1: 1.0}


def test_a_reading_a_server_missed_is_not_a_stop() -> None:
    # GPU 0's /metrics was slow at t=2 (the probe gave up): the same process answered at t=3
    # with what it made since t=1. It read 0 then twice its rate (100, 0, 200): the demo's
    # canary intervals of 0 and 136k tok/s around 68k, an interval of -34% .. +62% around +3%.
    r = [
        Reading(0.0, 0.0, {0: (0.0, 0.0), 1: (0.0, 0.0)}),
        Reading(1.0, 1.0, {0: (100.0, 1.0), 1: (100.0, 1.0)}),
        Reading(2.0, 2.0, {0: None, 1: None}),
        Reading(3.0, 3.0, {0: (300.0, 3.0), 1: (40.0, 0.0)}),  # GPU 1: a new process
        Reading(4.0, 4.0, {0: (400.0, 4.0), 1: (140.0, 1.0)}),
    ]
    rates = interval_rates(r, [0, 1])
    assert [x.tokens[0] for x in rates] == [100.0, 100.0, 100.0, 100.0]
    assert [x.requests[0] for x in rates] == [1.0, 1.0, 1.0, 1.0]
    assert [x.tokens[1] for x in rates] == [100.0, 0.0, 40.0, 100.0]  # down: it made nothing


def test_cost_of_one_gpu_down_for_two_seconds() -> None:
    # Two GPUs at 100 tok/s each; GPU 1 is down in [4, 6), then back at 100.
    readings = []
    totals = [0.0, 0.0]
    for t in range(12):
        if t > 0:
            totals[0] += 100.0
            if not 4 < t <= 6:
                totals[1] += 100.0
        readings.append(Reading(float(t), float(t), {0: (totals[0], 0.0), 1: (totals[1], 0.0)}))
    cost = lost_throughput(interval_rates(readings, [0, 1]), [0, 1], 4.0, 6.0, settle_s=3.0)
    assert cost.lost_gpu_seconds == pytest.approx(2.0)
    assert cost.gpu_downtime_gpu_seconds == pytest.approx(2.0)
    assert cost.recovered and cost.per_gpu_baseline_tokens_per_s == pytest.approx(100.0)
    none = lost_throughput(interval_rates(readings, [0, 1]), [0, 1], 0.0, 1.0, settle_s=1.0)
    assert none.lost_gpu_seconds is None and "before" in none.note


def test_look_from_turns_intervals_into_seconds() -> None:
    from tui.rollout.canary_result import CanaryLook, look_from

    canary = [110.0, 112.0, 108.0, 111.0, 109.0, 113.0]
    control = [100.0, 101.0, 99.0, 100.0, 100.0, 102.0]
    est = paired(canary, control, look_level(0.95, 4))
    decision = decide(est, 0.03)
    look = look_from(3, 6, decision, 5.0)
    assert isinstance(look, CanaryLook) and look.gpu == 3
    assert (look.intervals, look.window_s, look.verdict) == (6, 30.0, decision.verdict)
    assert look.estimate == decision.estimate
    more = decision.more_intervals_to_bound
    assert look.more_s_to_bound == (None if more is None else more * 5.0)

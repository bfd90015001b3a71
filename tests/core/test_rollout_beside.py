"""The figures beside throughput, from readings made by hand (no servers: fast)."""

from __future__ import annotations

import math

from bench.prom_reference import reference_quantile
from tui.rollout.beside import MIN_OBSERVATIONS, measured_beside, steps
from tui.rollout.sampling import Counts, Reading
from tui.servers.histogram import TTFT, Histogram

BOUNDS = (0.1, 0.2, 0.4, 0.8, 1.6, math.inf)


def cumulative(per_bucket: list[float]) -> tuple[float, ...]:
    out, total = [], 0.0
    for n in per_bucket:
        total += n
        out.append(total)
    return tuple(out)


def readings(
    per_step: dict[int, list[float]],
    n: int,
    tokens: dict[int, float],
    watts: dict[int, float | None],
    reset_at: int | None = None,
) -> list[Reading]:
    """``n + 1`` observed readings 1 s apart: each step adds ``per_step[gpu]`` to its TTFT
    buckets (one a step more in the last bucket on odd steps), ``tokens[gpu]`` tokens and
    ``watts[gpu]`` joules; GPU 0 restarts (counters from 0) at step ``reset_at``."""
    out = []
    ttft = {g: [0.0] * len(BOUNDS) for g in per_step}
    made = dict.fromkeys(per_step, 0.0)
    joules = dict.fromkeys(per_step, 0.0)
    for i in range(n + 1):
        if i:
            for g, adds in per_step.items():
                if g == 0 and i == reset_at:
                    ttft[g], made[g] = [0.0] * len(BOUNDS), 0.0
                for b, a in enumerate(adds):
                    ttft[g][b] += a + (1.0 if b == 2 and i % 2 else 0.0)
                made[g] += tokens[g]
                joules[g] += watts[g] or 0.0
        latency = {g: {TTFT: Histogram(BOUNDS, cumulative(ttft[g]))} for g in per_step}
        values: dict[int, Counts | None] = {g: (made[g], 0.0) for g in per_step}
        metered = {g: (joules[g] if watts[g] is not None else None) for g in per_step}
        out.append(Reading(float(i), 1000.0 + i, values, latency, metered, True))
    return out


def test_a_slower_canary_s_ttft_p90_and_tokens_per_joule_against_a_reference() -> None:
    canary = [0.0, 2.0, 4.0, 6.0, 2.0, 0.0]  # slower: most in 0.4..1.6 s
    control = [4.0, 8.0, 4.0, 0.0, 0.0, 0.0]
    rs = readings({0: canary, 1: control, 2: control}, 8, {0: 500.0, 1: 1000.0, 2: 1000.0},
                  {0: 700.0, 1: 700.0, 2: 700.0})  # fmt: skip
    beside = measured_beside(rs, ("canary", [0], (0, 8)), ("control", [1, 2], (0, 8)), 0.95)
    assert beside is not None
    c, k = beside.measured, beside.reference
    # The reference: the window's increase (the last reading's counts, from 0), summed.
    c_counts = [(b, x * 8 + (4.0 if i >= 2 else 0.0)) for i, (b, x) in
                enumerate(zip(BOUNDS, cumulative(canary), strict=True))]  # fmt: skip
    k_counts = [(b, 2 * (x * 8 + (4.0 if i >= 2 else 0.0))) for i, (b, x) in
                enumerate(zip(BOUNDS, cumulative(control), strict=True))]  # fmt: skip
    assert c.ttft_p90_s == reference_quantile(0.9, c_counts)
    assert k.ttft_p90_s == reference_quantile(0.9, k_counts)
    assert (c.ttft_requests, k.ttft_requests) == (14 * 8 + 4, 2 * (16 * 8 + 4))
    assert c.tokens_per_joule == 500.0 / 700.0 and k.tokens_per_joule == 2000.0 / 1400.0
    assert c.window == (1000.0, 1008.0)
    ttft = beside.ttft_p90
    assert ttft.relative == c.ttft_p90_s / k.ttft_p90_s - 1
    assert ttft.low is not None and ttft.high is not None
    assert 0 < ttft.low <= ttft.relative <= ttft.high
    tpj = beside.tokens_per_joule
    assert tpj.relative == -0.5 and tpj.low == tpj.high == -0.5  # the same every interval
    assert "ITL p90: none observed (no histogram read, or none in the window)" in beside.words()
    assert beside.words().startswith(f"TTFT p90 {ttft.relative:+.1%} (95% CI ")


def test_too_few_requests_say_so_and_no_number() -> None:
    few = [0.0, 0.0, 1.0, 0.0, 0.0, 0.0]  # 1 request a step on the canary (and one on odd)
    many = [4.0, 8.0, 4.0, 0.0, 0.0, 0.0]
    rs = readings({0: few, 1: many}, 4, {0: 10.0, 1: 10.0}, {0: 5.0, 1: 5.0})
    beside = measured_beside(rs, ("canary", [0], (0, 4)), ("control", [1], (0, 4)), 0.95)
    assert beside is not None and beside.measured.ttft_p90_s is None
    assert beside.measured.ttft_requests == 6 < MIN_OBSERVATIONS
    assert beside.ttft_p90.relative is None
    words = beside.words()
    assert "TTFT p90: too few requests (canary n=6, control n=66; a p90 needs 20)" in words
    # 4 intervals: a tokens/J figure, but no interval on it
    assert "tokens/J +0.0% (2.00 vs 2.00; no interval: fewer than 6 intervals)" in words


def test_an_unmetered_side_and_both_in_one_bucket() -> None:
    same = [0.0, 0.0, 0.0, 0.0, 30.0, 0.0]
    rs = readings({0: same, 1: same}, 8, {0: 10.0, 1: 10.0}, {0: 5.0, 1: None})
    beside = measured_beside(rs, ("canary", [0], (0, 8)), ("control", [1], (0, 8)), 0.95)
    assert beside is not None
    assert beside.reference.joules is None and beside.reference.tokens_per_joule is None
    words = beside.words()
    assert "tokens/J: not metered on the control" in words
    assert "TTFT p90: both p90s in the 0.8 .. 1.6 s bucket: no finer reading" in words


def test_a_restart_counts_the_new_process_from_zero_and_unobserved_readings_are_skipped() -> None:
    adds = [1.0, 1.0, 1.0, 1.0, 1.0, 0.0]
    rs = readings({0: adds}, 4, {0: 100.0}, {0: 1.0}, reset_at=3)
    window = steps(rs, [0], 0, 4)
    assert window is not None
    assert [s.tokens for s in window] == [100.0, 100.0, 100.0, 100.0]
    assert [s.ttft.count for s in window if s.ttft] == [6.0, 5.0, 6.0, 5.0]  # the reset too
    plain = [Reading(r.t, r.wall, r.values) for r in rs]  # a sampler that observes nothing
    assert steps(plain, [0], 0, 4) is None
    assert measured_beside(plain, ("a", [0], (0, 4)), ("b", [0], (0, 4)), 0.95) is None

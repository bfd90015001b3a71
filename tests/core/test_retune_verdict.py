"""Verdict statistics on synthetic per-interval samples."""

from __future__ import annotations

import random

import pytest

from tui.retune.throughput import interval_rates
from tui.retune.verdict import compare, t_quantile


def noisy(mean: float, n: int, sd: float, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [rng.gauss(mean, sd) for _ in range(n)]


def test_t_quantile_matches_tables() -> None:
    assert t_quantile(0.95, 10) == pytest.approx(2.228, abs=1e-3)
    assert t_quantile(0.99, 5) == pytest.approx(4.032, abs=1e-3)
    assert t_quantile(0.95, 1e6) == pytest.approx(1.960, abs=1e-3)


def test_clearly_better() -> None:
    result = compare(noisy(13500, 12, 300, 1), noisy(16000, 12, 300, 2))
    assert result.verdict == "better"
    assert result.ci_low is not None and result.ci_high is not None
    assert result.relative_change is not None
    assert 0.10 < result.ci_low < result.relative_change < result.ci_high
    assert result.sureness is not None and result.sureness > 0.999
    assert "better: +" in result.describe() and "95% CI" in result.describe()


def test_clearly_worse() -> None:
    result = compare(noisy(13500, 12, 300, 3), noisy(11000, 12, 300, 4))
    assert result.verdict == "worse"
    assert result.ci_high is not None and result.ci_high < 0


def test_identical_is_no_measurable_difference() -> None:
    samples = noisy(13500, 12, 400, 5)
    result = compare(samples, list(samples))
    assert result.verdict == "no measurable difference"
    assert result.relative_change == pytest.approx(0.0)
    assert result.ci_low is not None and result.ci_low < 0 < (result.ci_high or 0)


def test_same_distribution_is_no_measurable_difference() -> None:
    result = compare(noisy(13500, 12, 400, 6), noisy(13500, 12, 400, 7))
    assert result.verdict == "no measurable difference"


def test_small_effect_under_heavy_noise_is_not_claimed() -> None:
    result = compare(noisy(13500, 4, 3000, 8), noisy(14000, 4, 3000, 9))
    assert result.verdict == "no measurable difference"


def test_the_interval_of_a_collapse_stays_above_minus_100_percent() -> None:
    # A fleet whose job was ending while the 'after' window ran: loaded (more than half the
    # intervals made tokens), but the tail's spread is as large as its mean. An interval on
    # the change itself went below -100%; on the log ratio it cannot.
    before = noisy(13500, 10, 300, 15)
    after = [9000.0, 5000.0, 2500.0, 800.0, 300.0, 90.0, 0.0, 0.0, 0.0, 0.0]
    result = compare(before, after, 0.99)
    assert result.ci_low is not None and result.ci_high is not None
    assert result.relative_change is not None
    assert -1.0 < result.ci_low < result.relative_change < result.ci_high


def test_too_few_samples_is_not_measured() -> None:
    result = compare([1.0, 2.0], [3.0, 4.0, 5.0])
    assert result.verdict == "not measured" and "at least 3" in result.note


def test_bad_level_is_refused() -> None:
    with pytest.raises(ValueError, match="confidence level"):
        compare([1.0] * 3, [1.0] * 3, level=1.5)


def test_interval_rates_skip_restarted_counters() -> None:
    readings: list[tuple[float, dict[int, float | None]]] = [
        (0.0, {0: 100.0, 1: 50.0}),
        (1.0, {0: 200.0, 1: 60.0}),
        (2.0, {0: 5.0, 1: 80.0}),  # GPU 0 restarted: its counter went back
        (4.0, {0: 25.0, 1: None}),
    ]
    assert interval_rates(readings) == (110.0, 20.0, 10.0)


def test_parse_counter_sums_label_sets_and_ignores_lookalikes() -> None:
    from tui.retune.counters import parse_counter

    text = (
        "# HELP sglang:generation_tokens_total Generation tokens produced.\n"
        "# TYPE sglang:generation_tokens_total counter\n"
        'sglang:generation_tokens_total{model_name="q",tp_rank="0"} 1200.0\n'
        'sglang:generation_tokens_total{model_name="q",tp_rank="1"} 34.0\n'
        'sglang:generation_tokens_created{model_name="q"} 1.7e9\n'
        "sglang:generation_tokens_total_extra 99.0\n"
    )
    assert parse_counter(text) == 1234.0
    assert parse_counter("sglang:gen_throughput 5.0\n") is None


def test_output_tokens_prefer_the_per_iteration_decode_counter() -> None:
    """0.5.23 counts generation_tokens_total when a request finishes; realtime_tokens_total
    {mode="decode"} moves every decode step, so the throughput windows read it first."""
    from tui.retune.counters import output_tokens

    text = (
        'sglang:realtime_tokens_total{model_name="q",mode="prefill_compute"} 900.0\n'
        'sglang:realtime_tokens_total{model_name="q",mode="decode"} 5000.0\n'
        'sglang:generation_tokens_total{model_name="q"} 2000.0\n'
    )
    assert output_tokens(text) == 5000.0
    assert output_tokens('sglang:generation_tokens_total{model_name="q"} 2000.0\n') == 2000.0
    assert output_tokens("sglang:gen_throughput 5.0\n") is None


@pytest.mark.parametrize(
    ("before", "after", "note"),
    [
        ([0.0] * 10, [0.0] * 10, "no load before or after"),
        ([0.0] * 10, noisy(13500, 10, 300, 10), "no load before"),
        (noisy(13500, 10, 300, 11), [0.0] * 10, "no load after"),
        # the job's last stragglers before, nothing after: the window that gave +-297%
        ([0.0] * 7 + [40.0, 3.0, 1.0], [0.0] * 10, "no load before or after"),
        (noisy(13500, 10, 300, 12), [0.0] * 8 + [50.0, 20.0], "no load after"),
    ],
)
def test_no_verdict_without_load_on_both_sides(
    before: list[float], after: list[float], note: str
) -> None:
    result = compare(before, after)
    assert result.verdict == "not measured"
    assert result.note == note
    assert result.ci_low is None and result.ci_high is None
    assert result.describe() == f"not measured ({note})"


def test_a_side_idle_less_than_half_the_time_is_still_measured() -> None:
    before = noisy(13500, 10, 300, 13)
    after = [*noisy(13500, 7, 300, 14), 0.0, 0.0, 0.0]
    assert compare(before, after).verdict != "not measured"

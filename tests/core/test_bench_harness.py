"""The benchmarks' summaries: a median with its range, and runs paired with their peer's."""

from __future__ import annotations

import statistics

import pytest

from bench.harness import Stat


def test_a_stat_is_the_median_and_range_of_its_runs() -> None:
    stat = Stat.of([0.72, 0.62, 0.78, 0.70])
    assert (stat.median, stat.low, stat.high, stat.runs) == (pytest.approx(0.71), 0.62, 0.78, 4)
    assert stat.text("{:.2f}") == "0.71 (0.62–0.78, n=4)"


def test_paired_runs_divide_each_run_by_the_peer_run_beside_it() -> None:
    # The machine slowed on the third pair: both programs cost more there, and the pair's
    # ratio (0.93) is what is compared, not 0.80 against another run's 0.66.
    ours = [0.62, 0.66, 0.80, 0.70]
    peer = [0.66, 0.66, 0.86, 0.72]
    stat = Stat.paired(ours, peer)
    assert stat is not None
    ratios = [a / b for a, b in zip(ours, peer, strict=True)]
    assert (stat.low, stat.high, stat.runs) == (min(ratios), 1.0, 4)
    assert stat.median == pytest.approx(statistics.median(ratios))


@pytest.mark.parametrize(
    ("ours", "peer"),
    [([0.5, 0.6], [0.5]), ([0.5], [0.0]), ([], [])],
    ids=["unpaired", "zero", "none"],
)
def test_runs_that_do_not_pair_have_no_paired_ratio(ours: list[float], peer: list[float]) -> None:
    assert Stat.paired(ours, peer) is None

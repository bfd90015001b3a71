"""The autotune search's GPU-seconds (issue 30, point 4: '0.0 / 1800 GPU-s exploring' after
three canaries): a restart whose throughput dip could not be measured still cost the canary
GPU its time out of service, and putting it back on the incumbent is a restart too."""

from __future__ import annotations

from dataclasses import replace

from ui_helpers import verify_report

from tui.autotune.budget import exploration_cost, restart_gpu_seconds
from tui.retune.verdict import effect_words
from tui.rollout.canary_result import CanaryResult
from tui.rollout.cost import RetuneCost

UNMEASURED = RetuneCost(None, None, None, None, None, 7, 0.0, False, "no rate before it")


def idle_canary(stop_s: float | None, start_s: float | None) -> CanaryResult:
    report = replace(verify_report(0, "c"), stop_s=stop_s, time_to_ready_s=start_s)
    return CanaryResult(
        "c", 0, (1,), "b", "not measured", "no verdict", None, None, report=report,
        cost=UNMEASURED,
    )  # fmt: skip


def test_an_unmeasured_restart_counts_its_time_out_of_service() -> None:
    assert exploration_cost(idle_canary(20.0, 3.5)) == 23.5
    assert exploration_cost(idle_canary(None, 3.5)) == 3.5  # nothing stopped before it


def test_restarts_add_up_their_stops_and_starts() -> None:
    reports = [replace(verify_report(g, "c"), stop_s=10.0 + g, time_to_ready_s=2.0) for g in (0, 1)]
    assert restart_gpu_seconds(reports) == 25.0
    failed = replace(verify_report(2, "c", failed=True), stop_s=4.0)
    assert restart_gpu_seconds([failed]) == 4.0  # its start's length is not known
    assert restart_gpu_seconds([]) == 0.0


def test_an_interval_names_its_level_without_rounding_it_to_100() -> None:
    assert effect_words(0.147, 0.105, 0.19, 0.99375) == "+14.7% (99.38% CI +10.5% .. +19.0%)"
    assert effect_words(0.147, 0.105, 0.19, 0.95) == "+14.7% (95% CI +10.5% .. +19.0%)"
    assert effect_words(0.147, None, None) == "+14.7%"

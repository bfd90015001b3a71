"""The fleet verdict of a rollout or a rollback: the fleet's output tokens/s before the first
batch against after the last one, with Welch's interval (``tui.rollout.fleet_verdict``), and the
walk that takes it (``tui.rollout.rollout.Rollout``): one GPU at a time unless asked for all at
once. Counters from a scripted reader on the loop's clock (no servers)."""

from __future__ import annotations

import asyncio
import random
import re
from collections.abc import Sequence
from dataclasses import replace

import pytest
from ui_helpers import T0, shipped_profiles, verify_report

from tui.ops.demo import demo_profile
from tui.ops.entries import rollout_entry
from tui.profiles import Profile
from tui.retune.events import ApplyResult, MeasureProgress, ThroughputComparison
from tui.retune.options import ApplyOptions
from tui.rollout.fleet_verdict import VerdictWindows, fleet_line, fleet_rates, fleet_verdict
from tui.rollout.rollout import Rollout, RolloutOptions
from tui.rollout.sampling import Counts, IntervalRates, Load, Sampler

pytestmark = [pytest.mark.timeout(30)]


def _rates(
    per_second: Sequence[float], start: float = 0.0, loads: Sequence[float] | None = None
) -> list[IntervalRates]:
    """One 1 s interval per value, the fleet's rate split over GPUs 0 and 1 (each GPU holding
    ``loads[i]`` requests: 16 running, the rest queued; unknown without ``loads``)."""
    out = []
    for i, v in enumerate(per_second):
        held: dict[int, Load | None] = {}
        if loads is not None:
            held = dict.fromkeys((0, 1), _held(loads[i]))
        out.append(IntervalRates(start + i, start + i + 1, {0: v / 2, 1: v / 2}, {}, held))
    return out


def _held(requests: float) -> Load:
    return Load(min(requests, 16.0), max(requests - 16.0, 0.0))


def test_fleet_rates_pool_the_readings_into_intervals_and_clip_the_window() -> None:
    rates = _rates([100, 300, 200, 200, 50, 50, 400])
    # [0.5, 6.5]: half of the first and last readings count; pooled to >= 2 s, a tail of at
    # least half an interval kept
    pooled = fleet_rates(rates, (0, 1), 0.5, 6.5, 2.0)
    assert pooled == pytest.approx(((50 + 300 + 200) / 2.5, (200 + 50) / 2, (50 + 200) / 1.5))
    assert fleet_rates(rates, (0,), 0.0, 2.0, 1.0) == (50.0, 150.0)  # only GPU 0's share


def test_the_verdict_compares_the_fleet_before_and_after_with_its_interval() -> None:
    noise = random.Random(3)
    before = _rates([1000 + noise.uniform(-30, 30) for _ in range(30)])
    after = _rates([1250 + noise.uniform(-30, 30) for _ in range(30)], start=100.0)
    windows = VerdictWindows(window_s=30.0, warmup_s=0.0, interval_s=3.0)
    verdict = fleet_verdict(before + after, (0, 1), (0.0, 30.0), (100.0, 130.0), windows)
    assert verdict.verdict == "better" and len(verdict.before) == len(verdict.after) == 10
    assert verdict.ci_low is not None and verdict.ci_high is not None
    assert 0.2 < verdict.ci_low < 0.25 < verdict.ci_high < 0.3
    line = fleet_line(verdict)
    assert line.startswith("fleet throughput 1,00") and " -> 1,2" in line
    assert ": better: +25" in line and "(95% CI +2" in line


def test_a_window_without_traffic_is_not_measured_and_says_why() -> None:
    busy = _rates([1000.0] * 10)
    idle = _rates([0.0] * 10, start=100.0)
    windows = VerdictWindows(window_s=10.0, warmup_s=0.0, interval_s=1.0)
    verdict = fleet_verdict(busy + idle, (0, 1), (0.0, 10.0), (100.0, 110.0), windows)
    assert verdict.verdict == "not measured" and verdict.note == "no load after"
    assert fleet_line(verdict) == "fleet throughput: not measured (no load after)"
    assert fleet_line(None) == "fleet throughput: not measured (no verdict was asked for)"


def test_a_job_that_ends_during_the_window_after_is_not_measured() -> None:
    # The job's tail: the fleet still made tokens in most intervals after (loaded, as the
    # throughput alone judges it), but each GPU held 48 requests before and a few after.
    noise = random.Random(4)
    before = _rates([1000 + noise.uniform(-30, 30) for _ in range(10)], loads=[48.0] * 10)
    tail = [900.0, 800.0, 600.0, 500.0, 400.0, 300.0, 200.0, 100.0, 0.0, 0.0]
    loads = [48.0, 40.0, 30.0, 20.0, 12.0, 8.0, 4.0, 2.0, 0.0, 0.0]
    after = _rates(tail, start=100.0, loads=loads)
    windows = VerdictWindows(window_s=10.0, warmup_s=0.0, interval_s=1.0)
    verdict = fleet_verdict(before + after, (0, 1), (0.0, 10.0), (100.0, 110.0), windows)
    assert verdict.verdict == "not measured", verdict.describe()
    assert verdict.ci_low is None and verdict.relative_change is None  # nothing beyond -100%
    assert verdict.note == (
        "the load changed (the fleet's offered load fell from 48 to 10 requests per GPU, 2 s "
        "into the window after)"
    )
    assert fleet_line(verdict) == f"fleet throughput: not measured: {verdict.note}"
    assert (verdict.load_before, verdict.load_after) == (48.0, 16.4)
    # the same tail without the gauges: judged on the throughput alone, as before
    blind = fleet_verdict(
        _rates([1000.0 + i for i in range(10)]) + _rates(tail, start=100.0),
        (0, 1),
        (0.0, 10.0),
        (100.0, 110.0),
        windows,
    )
    assert blind.verdict == "worse" and blind.ci_low is not None and blind.ci_low > -1.0


def test_a_faster_fleet_under_the_same_load_is_measured() -> None:
    # Requests move from the queues to the batches: 48 held either way.
    before = _rates([1000.0 + (i % 3) for i in range(10)], loads=[48.0] * 10)
    after = _rates([1300.0 + (i % 3) for i in range(10)], start=100.0, loads=[47.0, 48.0] * 5)
    windows = VerdictWindows(window_s=10.0, warmup_s=0.0, interval_s=1.0)
    verdict = fleet_verdict(before + after, (0, 1), (0.0, 10.0), (100.0, 110.0), windows)
    assert verdict.verdict == "better", verdict.describe()


def test_bad_windows_are_refused_naming_the_field() -> None:
    bad = RolloutOptions(verdict=VerdictWindows(window_s=-1.0, interval_s=0.0, level=1.0))
    assert bad.errors() == [
        "verdict.window_s=-1.0: must be >= 0",
        "verdict.interval_s=0.0: must be > 0",
        "verdict.level=1.0: must be in (0, 1)",
    ]


class Fleet:
    """Three GPUs whose counters grow at 1000 tok/s each, 1300 once a GPU runs the new profile
    (each reading off by a few tokens); a GPU being applied reads nothing (its restart)."""

    def __init__(self, job_ends_at: float | None = None) -> None:
        self.job_ends_at = job_ends_at
        """Seconds after the last GPU moved when the job's requests drain away (over 0.3 s)."""
        self.last_moved: float | None = None
        self.moved: set[int] = set()
        self.restarting: set[int] = set()
        self.together = 0
        """Most GPUs restarting at the same moment."""
        self.tokens = dict.fromkeys((0, 1, 2), 0.0)
        self._last = asyncio.get_running_loop().time()
        self._noise = random.Random(5)

    def _left(self, now: float) -> float:
        """The share of the job's requests still coming (1 until it ends, then down to 0)."""
        if self.job_ends_at is None or self.last_moved is None or len(self.moved) < 3:
            return 1.0
        return min(1.0, max(0.0, 1.0 - (now - self.last_moved - self.job_ends_at) / 0.3))

    def _advance(self) -> None:
        now = asyncio.get_running_loop().time()
        for gpu in self.tokens:
            if gpu not in self.restarting:
                rate = 1300.0 if gpu in self.moved else 1000.0
                self.tokens[gpu] += rate * self._left(now) * (now - self._last)
        self._last = now

    async def read(self, gpus: Sequence[int]) -> dict[int, Counts | None]:
        self._advance()
        held = 48.0 * self._left(asyncio.get_running_loop().time())
        out: dict[int, Counts | None] = {}
        for gpu in gpus:
            value = self.tokens[gpu] + self._noise.uniform(0.0, 2.0)
            load = (min(held, 16.0), max(held - 16.0, 0.0))
            out[gpu] = None if gpu in self.restarting else (value, 0.0, *load)
        return out

    async def apply(self, profile: Profile, gpus: Sequence[int]) -> ApplyResult:
        self._advance()
        self.restarting |= set(gpus)
        self.together = max(self.together, len(self.restarting))
        await asyncio.sleep(0.05)
        self._advance()
        self.restarting -= set(gpus)
        self.moved |= set(gpus)
        self.last_moved = asyncio.get_running_loop().time()
        reports = tuple(verify_report(g, profile.name) for g in gpus)
        comparison = ThroughputComparison((), (), "not measured")
        return ApplyResult(profile.name, {}, tuple(gpus), reports, comparison, T0, T0)


OPTIONS = RolloutOptions(
    apply=ApplyOptions(measure=False),
    interval_s=0.05,
    baseline_s=0.0,
    settle_s=0.0,
    verdict=VerdictWindows(window_s=0.6, warmup_s=0.1, interval_s=0.1),
)


async def _walk(
    batch: int, rollback: bool, job_ends_at: float | None = None
) -> tuple[Fleet, Rollout, list[MeasureProgress]]:
    fleet = Fleet(job_ends_at)
    profile = demo_profile(shipped_profiles()["sim-aggressive"], 3)  # GPUs 0-2
    seen: list[MeasureProgress] = []
    walk = Rollout(
        [(g, profile) for g in (2, 1, 0)],
        profile,
        fleet.apply,
        lambda gpus, interval_s: Sampler(fleet, gpus, interval_s),
        replace(OPTIONS, batch=batch),
        rollback=rollback,
        on_measure=seen.append,
    )
    return fleet, walk, seen


async def test_a_rollback_walks_one_gpu_at_a_time_and_ends_with_the_fleet_verdict() -> None:
    fleet, walk, seen = await _walk(batch=1, rollback=True)
    result = await walk.run()
    assert result.ok and [s.gpus for s in result.steps] == [(2,), (1,), (0,)]
    assert fleet.together == 1  # never two GPUs down together
    for a, b in zip(result.steps, result.steps[1:], strict=False):
        assert b.started_at >= a.finished_at
    assert [m.stage for m in seen if m.samples == 0] == ["before", "warm-up", "after"]
    assert result.verdict is not None and result.verdict.verdict == "better", result.describe()
    assert result.verdict.relative_change == pytest.approx(0.3, abs=0.05)
    said = r"fleet throughput [23],\d{3} -> 3,\d{3} tok/s: better: \+\d\d\.\d% \(95% CI "
    assert re.search(said, result.describe()), result.describe()
    entry = rollout_entry(result, "test")
    assert entry.type == "rollback" and entry.verdict == "better"
    # the profile its batches went back to (a rollback has no one profile: the journal's
    # "profiles" column and the entry's title read '-' without it)
    assert entry.target == "sim-aggressive"
    assert re.search("; " + said, entry.summary), entry.summary
    assert entry.detail["verdict_summary"] == fleet_line(result.verdict)


async def test_a_job_that_ends_during_a_rollout_leaves_its_verdict_unmeasured() -> None:
    # The last GPU is ready, the warm-up passes, and the job's requests drain away while the
    # window after runs: the fleet still makes tokens in most of it (its tail), loaded as the
    # throughput alone judges it.
    _, walk, _ = await _walk(batch=1, rollback=False, job_ends_at=0.2)
    result = await walk.run()
    assert result.ok, result.describe()
    verdict = result.verdict
    assert verdict is not None and verdict.verdict == "not measured", result.describe()
    assert verdict.note.startswith("the load changed (the fleet's offered load fell from 48 to ")
    assert verdict.ci_low is None
    assert "fleet throughput: not measured: the load changed (" in result.describe()


async def test_all_at_once_is_one_batch_of_every_gpu() -> None:
    fleet, walk, _ = await _walk(batch=3, rollback=True)
    result = await walk.run()
    assert result.ok and [s.gpus for s in result.steps] == [(2, 1, 0)]
    assert fleet.together == 3
    assert result.verdict is not None and result.verdict.verdict == "better"

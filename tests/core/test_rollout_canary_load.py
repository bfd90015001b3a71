"""A canary reads the load each server held beside its throughput: a window in which the load
changed is 'not measured: the load changed (...)', never better or worse, and its interval never
passes -100%. Counters and gauges from a scripted reader on the loop's clock (no servers): the
job ending during the window, a canary whose client gave up on its restart (with and without
the gauges), a load that settles at a new level (re-measured once), and a faster canary whose
queue empties beside controls that queue (compared, as it must be)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Sequence

import pytest
from ui_helpers import T0, shipped_profiles, verify_report

from tui.profiles import Profile
from tui.retune.events import ApplyResult, ThroughputComparison
from tui.retune.options import ApplyOptions
from tui.rollout.canary import Canary, CanaryOptions
from tui.rollout.canary_result import CanaryResult
from tui.rollout.load import follow
from tui.rollout.sampling import Counts, Sampler

pytestmark = [pytest.mark.timeout(30)]

OPTIONS = CanaryOptions(
    window_s=0.6,
    warmup_s=0.0,
    max_window_s=1.2,
    interval_s=0.05,
    min_intervals=5,
    margin=0.02,
    level=0.95,
    baseline_s=0.2,
    settle_s=0.0,
    apply=ApplyOptions(measure=False),
)

Shape = Callable[[float], tuple[float, float, float]]
"""Seconds since the canary was applied (negative: before) -> (tok/s, running, queued)."""


def steady(rate: float, running: float = 16.0, queued: float = 32.0) -> Shape:
    return lambda t: (rate, running, queued)


def ends_at(at_s: float, rate: float, running: float = 16.0, queued: float = 32.0) -> Shape:
    """The job's last requests finish ``at_s`` after the apply: the rate and the load drain
    to nothing (a tail of stragglers, then idle)."""

    def shape(t: float) -> tuple[float, float, float]:
        if t < at_s:
            return rate, running, queued
        left = max(0.0, 1.0 - (t - at_s) / 0.1)
        return rate * left * 0.3, running * left * 0.2, 0.0

    return shape


class Scripted:
    """Cumulative counters integrating each GPU's shape on the loop's clock, each interval's
    tokens off by up to 5% (seeded; a GPU making nothing makes exactly nothing); the gauges as
    the shape says (none with ``gauges=False``)."""

    def __init__(self, shapes: dict[int, Shape], *, gauges: bool = True) -> None:
        self.shapes = shapes
        self.gauges = gauges
        self.applied_at: float | None = None
        self._last = asyncio.get_running_loop().time()
        self._tokens = dict.fromkeys(shapes, 0.0)
        self._noise = random.Random(11)

    def since_apply(self, now: float) -> float:
        return -1.0 if self.applied_at is None else now - self.applied_at

    async def read(self, gpus: Sequence[int]) -> dict[int, Counts | None]:
        now = asyncio.get_running_loop().time()
        dt, self._last = now - self._last, now
        out: dict[int, Counts | None] = {}
        for gpu in gpus:
            rate, running, queued = self.shapes[gpu](self.since_apply(now))
            self._tokens[gpu] += rate * dt * (1.0 + self._noise.uniform(-0.05, 0.05))
            tokens = self._tokens[gpu]
            out[gpu] = (tokens, tokens / 100.0, running, queued) if self.gauges else (tokens, 0.0)
        return out


async def run_canary(reader: Scripted, profile: Profile | None = None) -> CanaryResult:
    async def apply(p: Profile, gpus: Sequence[int]) -> ApplyResult:
        reader.applied_at = asyncio.get_running_loop().time()
        report = verify_report(gpus[0], p.name)
        comparison = ThroughputComparison((), (), "not measured")
        return ApplyResult(p.name, {0: "before"}, tuple(gpus), (report,), comparison, T0, T0)

    canary = Canary(
        profile or shipped_profiles()["sim-aggressive"],
        0,
        apply,
        lambda gpus, interval_s: Sampler(reader, gpus, interval_s),
        OPTIONS,
        controls=[1, 2],
        state=dict,
    )
    return await canary.run()


def assert_not_measured(result: CanaryResult) -> None:
    assert result.verdict == "not measured", result.describe()
    assert result.tokens is None  # no estimate, so no interval to read beyond -100%
    assert result.load_change is not None
    assert result.reason.startswith("the load changed (")
    assert result.describe().startswith("not measured: the load changed (")
    assert result.report is not None and result.report.ok  # the candidate runs: caller decides


async def test_a_job_that_ends_during_the_window_is_not_measured() -> None:
    # The demo's candidate #16: the canary was slower (its tail against the controls' tail read
    # 'worse: -54.4% (99.84% CI -108.1% .. -0.6%)'); the job ends 0.1 s into the window, before
    # the first look.
    reader = Scripted({0: ends_at(0.1, 1400.0), 1: ends_at(0.1, 2000.0), 2: ends_at(0.1, 2000.0)})
    result = await run_canary(reader)
    assert_not_measured(result)
    change = result.load_change
    assert change is not None and change.idle
    assert "the controls' offered load fell from 48 to " in change.what
    assert change.what.endswith("the job's requests stopped")
    assert not result.remeasured  # nothing left to measure again
    assert result.load is not None and result.load.reference == 48.0


async def test_a_canary_whose_client_gave_up_is_not_measured() -> None:
    # Each GPU fed by its own client; the canary's gave up when its server went away. Its
    # profile is the one already running: 'worse: canary GPU 0 0 tok/s vs control mean
    # 36,750 tok/s per GPU: -100.0%' before.
    def gave_up(t: float) -> tuple[float, float, float]:
        return (1800.0, 16.0, 32.0) if t < 0 else (0.0, 0.0, 0.0)

    reader = Scripted({0: gave_up, 1: steady(1800.0), 2: steady(1800.0)})
    result = await run_canary(reader)
    assert_not_measured(result)
    assert result.load_change is not None and not result.load_change.idle
    assert result.load_change.what == (
        "the canary GPU was offered 0 requests against 48 per control GPU, its queue empty "
        "while theirs held 32: did its client give up on the restart?"
    )
    assert result.load is not None and result.load.canary_offered == 0.0


async def test_without_the_gauges_a_canary_that_made_nothing_is_not_measured() -> None:
    def gave_up(t: float) -> tuple[float, float, float]:
        return (1800.0, 0.0, 0.0) if t < 0 else (0.0, 0.0, 0.0)

    reader = Scripted({0: gave_up, 1: steady(1800.0), 2: steady(1800.0)}, gauges=False)
    result = await run_canary(reader)
    assert_not_measured(result)
    assert result.load_change is not None
    assert result.load_change.what.startswith("the canary GPU made no tokens while its controls")
    assert result.load is not None and result.load.canary_offered is None


async def test_a_load_that_settles_at_a_new_level_is_measured_again_from_the_change() -> None:
    # A server joined the job 0.2 s into the window: every GPU's share fell from 48 to 24
    # requests and its rate with it. Measured again from there, the canary is 30% better.
    def halved(rate: float) -> Shape:
        return lambda t: (rate, 16.0, 32.0) if t < 0.2 else (rate * 0.6, 16.0, 8.0)

    reader = Scripted({0: halved(2600.0), 1: halved(2000.0), 2: halved(2000.0)})
    result = await run_canary(reader)
    assert result.verdict == "better", result.describe()
    assert result.remeasured.startswith(
        "re-measured from there: the load changed (the controls' offered load fell from 48 to 24"
    )
    assert result.tokens is not None and result.tokens.relative == pytest.approx(0.3, abs=0.05)
    assert result.load is not None and result.load.reference == 24.0
    assert result.remeasured in result.describe()


async def test_a_canary_that_runs_its_whole_queue_is_compared_with_controls_that_queue() -> None:
    # Max running 64 against 16, each GPU kept at 48 requests: the canary runs all 48 (its
    # queue empty), the controls run 16 and queue 32. The same load offered: better.
    reader = Scripted(
        {0: steady(3200.0, 48.0, 0.0), 1: steady(1900.0), 2: steady(1900.0)},
    )
    result = await run_canary(reader)
    assert result.verdict == "better", result.describe()
    assert result.load_change is None and not result.remeasured
    assert result.load is not None
    assert (result.load.canary_offered, result.load.canary_queued) == (48.0, 0.0)
    assert (result.load.control_offered, result.load.control_queued) == (48.0, 32.0)
    assert "load: canary 48 requests (0 queued), controls 48 requests (32 queued) per GPU" in (
        result.describe()
    )


def test_one_noisy_reading_waits_and_a_level_that_settles_restarts() -> None:
    ref = [48.0, 47.0, 48.5]
    assert follow(ref, [48.0, 46.0, 49.0], 5.0, may_restart=True).action == "look"
    # one reading far off: not a change yet, but no look on it either
    assert follow(ref, [48.0, 20.0], 5.0, may_restart=True).action == "wait"
    assert follow(ref, [48.0, 20.0, 48.0], 5.0, may_restart=True).action == "look"
    # two in a row: a change, still moving (34 -> 24): wait; then settled at 24: restart there
    moving = follow(ref, [48.0, 34.0, 24.0], 5.0, may_restart=True)
    assert moving.action == "wait" and moving.change is not None
    settled = follow(ref, [48.0, 34.0, 24.0, 24.5, 23.5], 5.0, may_restart=True)
    assert (settled.action, settled.restart_at, settled.reference) == (
        "restart",
        2,
        (24.0, 24.5, 23.5),
    )
    assert settled.change is not None and settled.change.what == (
        "the controls' offered load fell from 48 to 24 requests per GPU, 5 s into the window"
    )
    # not again: a second change stops the window; a fall to nothing stops it at once
    assert follow(ref, [48.0, 34.0, 24.0], 5.0, may_restart=False).action == "stop"
    ended = follow(ref, [48.0, 12.0, 2.0, 0.0, 0.0], 5.0, may_restart=True)
    assert ended.action == "stop" and ended.change is not None and ended.change.idle

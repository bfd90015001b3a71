"""A canary whose controls stop answering (a many-node canary's node lost): the lost controls
leave the verdict (every interval paired again without them) and the canary goes on with the
others; with no control left, or the canary GPU's own readings gone, the window ends with no
verdict and says why. Counters from a scripted reader, on the loop's clock (no servers)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence

import pytest
from ui_helpers import T0, shipped_profiles, verify_report

from tui.profiles import Profile
from tui.retune.events import ApplyResult, ThroughputComparison
from tui.retune.options import ApplyOptions
from tui.rollout.canary import Canary, CanaryOptions
from tui.rollout.sampling import Counts, Sampler

pytestmark = [pytest.mark.timeout(30)]

OPTIONS = CanaryOptions(
    window_s=0.4,
    warmup_s=0.0,
    max_window_s=0.8,
    interval_s=0.05,
    min_intervals=4,
    margin=0.1,
    level=0.99,
    baseline_s=0.1,
    settle_s=0.0,
    apply=ApplyOptions(measure=False),
)


class Scripted:
    """Counters growing at fixed rates on the loop's clock, each reading off by a few tokens
    (seeded: an interval is never exactly the rate, as on a real server); a GPU listed in
    ``lose`` stops answering once the canary is applied (``lost()`` then names it)."""

    def __init__(self, rates: dict[int, float], lose: Sequence[int]) -> None:
        self.rates = rates
        self.lose = set(lose)
        self.applied = False
        self._start = asyncio.get_running_loop().time()
        self._noise = random.Random(7)

    async def read(self, gpus: Sequence[int]) -> dict[int, Counts | None]:
        t = asyncio.get_running_loop().time() - self._start
        out: dict[int, Counts | None] = {}
        for gpu in gpus:
            if self.applied and gpu in self.lose:
                out[gpu] = None
                continue
            tokens = max(0.0, self.rates[gpu] * t + self._noise.uniform(-3.0, 3.0))
            out[gpu] = (tokens, tokens / 100.0)
        return out

    def lost(self) -> frozenset[int]:
        return frozenset(self.lose) if self.applied else frozenset()


def canary(reader: Scripted, profile: Profile) -> Canary:
    async def apply(p: Profile, gpus: Sequence[int]) -> ApplyResult:
        reader.applied = True
        report = verify_report(gpus[0], p.name)
        comparison = ThroughputComparison((), (), "not measured")
        return ApplyResult(p.name, {0: "before"}, tuple(gpus), (report,), comparison, T0, T0)

    return Canary(
        profile,
        0,
        apply,
        lambda gpus, interval_s: Sampler(reader, gpus, interval_s),
        OPTIONS,
        controls=[1, 2],
        state=dict,
        lost=reader.lost,
    )


async def test_a_lost_control_leaves_the_verdict_and_the_canary_goes_on() -> None:
    # Control 2 ran ten times faster: counted as 0 once lost (or kept), it would decide.
    reader = Scripted({0: 2000.0, 1: 2000.0, 2: 20000.0}, lose=[2])
    result = await canary(reader, shipped_profiles()["sim-aggressive"]).run()
    assert result.controls == (1,) and result.dropped_controls == (2,)
    assert result.verdict == "no measurable difference", result.describe()
    assert result.tokens is not None and abs(result.tokens.relative) < 0.1
    assert set(result.per_gpu_tokens) == {0, 1}


async def test_every_control_lost_ends_the_window_with_no_verdict() -> None:
    reader = Scripted({0: 2000.0, 1: 2000.0, 2: 2000.0}, lose=[1, 2])
    result = await canary(reader, shipped_profiles()["sim-aggressive"]).run()
    assert result.verdict == "not measured" and result.tokens is None
    assert result.reason == "no verdict: every control GPU stopped answering"
    assert result.controls == () and result.dropped_controls == (1, 2)
    assert result.report is not None and result.report.ok  # the candidate runs: caller decides
    assert not result.controls_idle  # readings lost is not an idle fleet


async def test_the_canary_gpu_lost_ends_the_window_with_no_verdict() -> None:
    reader = Scripted({0: 2000.0, 1: 2000.0, 2: 2000.0}, lose=[0])
    result = await canary(reader, shipped_profiles()["sim-aggressive"]).run()
    assert result.verdict == "not measured"
    assert result.reason == "no verdict: the canary GPU 0 stopped answering"
    assert result.controls == (1, 2) and result.dropped_controls == ()


async def test_controls_without_tokens_end_the_window_with_no_verdict() -> None:
    # No job sending requests: the controls make no tokens, so there is nothing to pair the
    # canary against (an AssertionError at the window's end, before).
    class Idle(Scripted):
        async def read(self, gpus: Sequence[int]) -> dict[int, Counts | None]:
            return dict.fromkeys(gpus, (1000.0, 10.0))  # counters that do not move

    reader = Idle({0: 0.0, 1: 0.0, 2: 0.0}, lose=[])
    result = await canary(reader, shipped_profiles()["sim-aggressive"]).run()
    assert result.verdict == "not measured" and result.tokens is None
    assert result.reason.startswith("no verdict: the control GPUs made no tokens in the ")
    assert result.reason.endswith("(is the job sending requests?)")
    assert result.controls == (1, 2) and result.report is not None and result.report.ok
    # the zeros on record, and said: an autotune search ends on it (nothing to measure)
    assert result.control_tokens and not any(result.control_tokens) and result.controls_idle


async def test_the_canary_records_when_its_baseline_and_window_ran() -> None:
    reader = Scripted({0: 2000.0, 1: 2000.0, 2: 2000.0}, lose=[])
    result = await canary(reader, shipped_profiles()["sim-aggressive"]).run()
    assert result.baseline_window is not None and result.measure_window is not None
    (b0, b1), (m0, m1) = result.baseline_window, result.measure_window
    assert result.started_at <= b0 < b1 <= m0 < m1 == result.finished_at
    assert b1 - b0 >= OPTIONS.baseline_s - 0.01
    assert m1 - m0 == pytest.approx(result.window_s, abs=2 * OPTIONS.interval_s)

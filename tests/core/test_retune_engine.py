"""The retune engine against fakes: independence, failures, timeouts, refusals, stagger."""

from __future__ import annotations

import itertools

from retune_helpers import FakeProbe, FakeTarget, Script, ready_script

from tui.retune.engine import ApplyOptions, RetuneEngine
from tui.retune.events import (
    ApplyFinished,
    ApplyRefused,
    EffectiveValues,
    GpuFailed,
    GpuPhase,
    GpuReady,
    RetuneEvent,
)
from tui.retune.ports import ServerSignal

FAST = ApplyOptions(timeout_s=2.0, release_timeout_s=1.0, poll_s=0.01, measure=False)
OOM_LINE = "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."


async def collect(engine: RetuneEngine) -> list[RetuneEvent]:
    return [event async for event in engine.events()]


async def test_every_gpu_ready_with_phases_and_report() -> None:
    eff = EffectiveValues(max_running_requests=40, mamba_slots=200)
    target = FakeTarget({g: ready_script(effective=eff) for g in (0, 1, 2)}, running=(0, 1, 2))
    events = await collect(RetuneEngine(target, [0, 1, 2], FAST))
    result = events[-1]
    assert isinstance(result, ApplyFinished)
    assert result.result.ok
    ready = [e for e in events if isinstance(e, GpuReady)]
    assert sorted(e.gpu for e in ready) == [0, 1, 2]
    report = ready[0].report
    assert report.effective.kv_tokens == 798080  # from the log signal
    assert report.effective.max_running_requests == 40  # from /server_info
    assert report.requested.max_running_requests == 64
    assert report.capped
    assert report.time_to_ready_s is not None and report.time_to_ready_s >= 0.05
    phases = [e.phase for e in events if isinstance(e, GpuPhase) and e.gpu == 1]
    assert phases[:3] == ["stopping", "waiting for GPU memory release", "launching"]
    assert "loading weights" in phases and "capturing CUDA graphs" in phases
    assert phases[-1] == "ready"
    # Every GPU was stopped before its relaunch.
    for g in (0, 1, 2):
        assert target.first("stop", g) <= target.first("launch", g)


async def test_gpus_are_independent_slow_release_does_not_delay_others() -> None:
    target = FakeTarget({g: ready_script() for g in (0, 1)}, release_s={0: 0.5})
    result = await RetuneEngine(target, [0, 1], FAST).run()
    assert result.ok
    # GPU 1 launched long before GPU 0's memory was released.
    assert target.first("launch", 1) + 0.3 < target.first("launch", 0)


async def test_log_error_fails_one_gpu_and_stops_it_others_come_up() -> None:
    oom = Script(
        signals=[
            (0.0, ServerSignal("phase", "loading weights")),
            (0.03, ServerSignal("error", OOM_LINE, reason="oom")),
        ],
        ready_at=None,
    )
    target = FakeTarget({0: ready_script(ready_at=0.2), 1: oom, 2: ready_script(ready_at=0.2)})
    events = await collect(RetuneEngine(target, [0, 1, 2], FAST))
    failed = [e for e in events if isinstance(e, GpuFailed)]
    assert [e.gpu for e in failed] == [1]
    report = failed[0].report
    assert report.error_line == OOM_LINE
    assert report.error_reason == "oom"
    assert report.failure is not None and report.failure.startswith("OOM")
    assert target.servers[1].stopped  # nothing left running on the failed GPU
    assert not target.servers[0].stopped and not target.servers[2].stopped
    # The failure was reported before the healthy GPUs became ready (it did not wait on them).
    kinds = [(type(e).__name__, getattr(e, "gpu", None)) for e in events]
    assert kinds.index(("GpuFailed", 1)) < kinds.index(("GpuReady", 0))
    finished = events[-1]
    assert isinstance(finished, ApplyFinished) and not finished.result.ok


async def test_log_error_detection_beats_the_timeout() -> None:
    oom = Script(signals=[(0.02, ServerSignal("error", OOM_LINE, reason="oom"))])
    target = FakeTarget({0: oom})
    opts = ApplyOptions(timeout_s=30.0, poll_s=0.01, measure=False)
    result = await RetuneEngine(target, [0], opts).run()
    assert not result.ok
    assert result.finished_at - result.started_at < 5.0
    assert result.reports[0].error_reason == "oom"


async def test_process_exit_is_detected() -> None:
    target = FakeTarget({0: Script(exit_at=0.03, exit_code=3), 1: ready_script()})
    result = await RetuneEngine(target, [0, 1], FAST).run()
    by_gpu = {r.gpu: r for r in result.reports}
    assert by_gpu[0].error_reason == "exit"
    assert by_gpu[0].failure == "process exited with code 3"
    assert by_gpu[1].ok


async def test_each_gpu_has_its_own_timeout() -> None:
    never = Script(signals=[(0.0, ServerSignal("phase", "loading weights"))], ready_at=None)
    target = FakeTarget({0: never, 1: ready_script(ready_at=0.05)})
    opts = ApplyOptions(timeout_s=0.3, poll_s=0.01, measure=False)
    events = await collect(RetuneEngine(target, [0, 1], opts))
    order = [(type(e).__name__, getattr(e, "gpu", None)) for e in events]
    # GPU 1 is reported ready well before GPU 0 times out.
    assert order.index(("GpuReady", 1)) < order.index(("GpuFailed", 0))
    failed = next(e for e in events if isinstance(e, GpuFailed))
    assert failed.report.error_reason == "timeout"
    assert target.servers[0].stopped


async def test_invalid_profile_refuses_before_stopping_anything() -> None:
    error = "max_running_requests=-1: must be >= 1"
    target = FakeTarget({0: ready_script()}, errors=[error], running=(0,))
    events = await collect(RetuneEngine(target, [0], FAST))
    assert isinstance(events[0], ApplyRefused) and events[0].errors == (error,)
    assert target.calls == []  # nothing stopped, nothing launched
    assert target.running == {0: 1000}
    last = events[-1]
    assert isinstance(last, ApplyFinished) and not last.result.ok


async def test_launch_error_and_release_timeout_fail_that_gpu_only() -> None:
    target = FakeTarget(
        {0: Script(launch_error="port 30000 held by pid 77"), 1: ready_script(), 2: ready_script()},
        release_s={2: 5.0},
        release_timeout_s=0.1,
    )
    opts = ApplyOptions(timeout_s=2.0, poll_s=0.01, measure=False)
    result = await RetuneEngine(target, [0, 1, 2], opts).run()
    by_gpu = {r.gpu: r for r in result.reports}
    assert by_gpu[0].error_reason == "launch" and "port 30000" in (by_gpu[0].failure or "")
    assert by_gpu[1].ok
    assert by_gpu[2].error_reason == "release"
    assert not any(w == "launch" and g == 2 for w, g, _ in target.calls)


async def test_staggered_start_spaces_launches() -> None:
    target = FakeTarget({g: ready_script() for g in (0, 1, 2)})
    opts = ApplyOptions(timeout_s=2.0, poll_s=0.01, measure=False, stagger_s=0.15)
    result = await RetuneEngine(target, [0, 1, 2], opts).run()
    assert result.ok
    launches = sorted(t for w, _, t in target.calls if w == "launch")
    gaps = [b - a for a, b in itertools.pairwise(launches)]
    assert all(gap >= 0.14 for gap in gaps), gaps


async def test_measurement_before_and_after_gives_a_verdict() -> None:
    target = FakeTarget({g: ready_script() for g in (0, 1)})
    # 5 intervals before at ~1000 tok/s, then warm-up and 5 after at ~1500.
    rates = [1000, 1010, 990, 1005, 995, 1500, 1510, 1490, 1505, 1495, 1500]
    opts = ApplyOptions(timeout_s=2.0, poll_s=0.01, window_s=0.25, interval_s=0.05, warmup_s=0.05)
    result = await RetuneEngine(target, [0, 1], opts, probe=FakeProbe(rates)).run()
    assert result.ok
    tp = result.throughput
    assert len(tp.before) == 5 and len(tp.after) == 5
    assert tp.verdict == "better", tp.describe()
    assert tp.ci_low is not None and tp.ci_low > 0.3
    # when each window ran, on record for the chart's shading: before, then after, in the apply
    assert tp.before_window is not None and tp.after_window is not None
    assert result.started_at <= tp.before_window[0] < tp.before_window[1]
    assert tp.before_window[1] < tp.after_window[0] < tp.after_window[1] <= result.finished_at
    assert tp.after_window[1] - tp.after_window[0] >= 0.25 - 0.01  # the whole window


async def test_bad_options_are_refused() -> None:
    target = FakeTarget({0: ready_script()}, running=(0,))
    result = await RetuneEngine(target, [0], ApplyOptions(timeout_s=0)).run()
    assert result.refused and "timeout_s=0" in result.refused[0]
    assert target.calls == []

"""Words that contradicted each other (issue 30, point 4), each fixed where it is made: a verdict
with its estimate and interval in one wording, a canary's looks counted once, a rollback's
the time a GPU was out of service with its stop, what a waiting GPU waits
for, and ``A`` finding the allocation lines the live view no longer keeps."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from retune_helpers import FakeTarget, ready_script
from ui_helpers import (
    settle,
    verify_report,
    wait_for,
)

from tui.autotune.record import candidate_line
from tui.autotune.status import describe_status
from tui.ops.local import LocalFleet
from tui.ops.service import FleetOps
from tui.retune.engine import ApplyOptions, RetuneEngine
from tui.retune.events import GpuPhase, GpuReady, MeasureProgress
from tui.rollout.canary_result import CanaryLook
from tui.ui.autotune.autotune_screen import candidates_text
from tui.ui.background import PhaseClock, rows_phrase
from tui.ui.detail.detail_screen import DetailScreen
from tui.ui.detail.log_view import LogView
from tui.ui.retune.progress import ApplyProgress, advance
from tui.ui.retune.report_view import ready_in

from .test_log_viewer_core import DECODE, KV
from .test_ui_log_viewer import open_viewer, viewer_app

DROPPED = {
    "index": 3,
    "key": "max_running_requests=120",
    "decision": "dropped",
    "why": "rolled back to sim-baseline",
    "verdict": "no measurable difference",
    "relative": 0.275,
    "rel_low": -0.301,
    "rel_high": 0.851,
    "level": 0.95,
}


def test_a_verdict_is_said_with_its_estimate_and_interval_in_one_wording() -> None:
    """The console showed '+27.5%: no measurable difference' and dropped the interval the
    CLI printed ([-30.1%, +85.1%]); now both (and the journal) print the same line."""
    line = candidate_line(DROPPED)
    assert line == (
        "#3 max_running_requests=120: dropped; no measurable difference: +27.5% "
        "(95% CI -30.1% .. +85.1%); rolled back to sim-baseline"
    )
    unmeasured = {
        "index": 1,
        "key": "max_mamba_cache_size=110",
        "decision": "failed",
        "verdict": "not measured",
        "why": "not measured (no verdict: the control GPUs made no tokens)",
    }
    assert candidate_line(unmeasured) == (  # said once, not 'not measured; not measured (...'
        "#1 max_mamba_cache_size=110: failed; not measured (no verdict: the control GPUs "
        "made no tokens)"
    )
    doc: dict[str, Any] = {"phase": "done", "candidates": [DROPPED]}
    assert candidates_text(doc) == line  # the console's autotune screen
    assert f"  {line}" in describe_status(doc).splitlines()  # gpufleet autotune status


def test_a_canary_look_reaches_the_screen_once() -> None:
    """One sink takes every event of a command, its looks among them: each look arrived twice
    when the screen passed one callback for two ('looks (2)', one line listed twice)."""
    seen: list[object] = []
    sink = LocalFleet(FleetOps()).sink(seen.append)
    look = CanaryLook(0, 6, 5.0, "better", True, "interval above 0")
    sink(look)
    sink(GpuPhase(0, "loading weights", 1.0))
    assert seen == [look, GpuPhase(0, "loading weights", 1.0)]


async def test_the_report_counts_the_stop_in_the_time_out_of_service() -> None:
    """'ready in 2s' left out the 20 s drain before it: the report now has the stop."""
    target = FakeTarget({0: ready_script(0.05)}, running=(0,), release_s={0: 0.3})
    opts = ApplyOptions(timeout_s=5.0, release_timeout_s=2.0, poll_s=0.01, measure=False)
    events = [e async for e in RetuneEngine(target, [0], opts).events()]
    (ready,) = [e for e in events if isinstance(e, GpuReady)]
    report = ready.report
    assert report.stop_s is not None and report.stop_s >= 0.3
    assert report.time_to_ready_s is not None and report.time_to_ready_s < report.stop_s
    seen = verify_report(0, "x")
    drained = replace(seen, stop_s=20.0, time_to_ready_s=2.0)
    assert ready_in(drained) == "22s (stop 20s)"
    assert ready_in(replace(seen, stop_s=None, time_to_ready_s=2.0)) == "2s"


def test_a_waiting_gpu_says_what_it_waits_for() -> None:
    """'GPU 0 waiting 7s' never said for what: an apply measures the throughput first."""
    progress = ApplyProgress.start("sim-aggressive", (0, 1))
    clock = PhaseClock(lambda: 100.0)
    assert rows_phrase(progress, clock).startswith("GPU 0 waiting for its turn to stop")
    progress = advance(progress, MeasureProgress("before", 0, 30.0))
    assert progress.phase_text(progress.rows[0]) == (
        "waiting for the throughput before (30 s window)"
    )
    assert "GPU 0 waiting for the throughput before (30 s window) 0s" in rows_phrase(
        progress, clock
    )
    progress = advance(progress, GpuPhase(0, "stopping", 31.0))
    assert progress.phase_text(progress.rows[0]) == "stopping"
    canary = ApplyProgress.start("sim-aggressive", (3,), "the baseline")
    assert canary.phase_text(canary.rows[0]) == "waiting for the baseline"


async def test_previous_allocation_searches_the_whole_log(tmp_path: Path) -> None:
    """The allocation lines were in the file, before the lines the view keeps: 'A' said 'no
    allocation line above'. Now it lists them from the whole log and its rotations."""
    log = tmp_path / "sglang_gpu0.log"
    body = "".join(f"{DECODE} n={i}\n" for i in range(12_000))  # ~1.8 MB: the view keeps less
    log.write_text(KV + "\n" + body)
    app = viewer_app(log)
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(pilot, app)
        await pilot.press("0", "enter")
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "DetailScreen", "detail")
        detail = app.screen
        assert isinstance(detail, DetailScreen)
        panel = detail.log_panel
        await wait_for(pilot, lambda: bool(panel.live.buffer.lines), "the live log")
        assert KV not in panel.live.buffer.lines  # outside the kept window
        await pilot.press("A")
        results = panel.query_one("#search-results", LogView)
        await wait_for(pilot, lambda: panel.results is not None, "the whole-log search")
        await pilot.pause()
        assert results.display and results.shown_lines == [f"sglang_gpu0.log:1: {KV}"]
        assert str(results.border_title).startswith("Allocation lines of the whole log: 1 hits")
        said = [str(n.message) for n in app._notifications]
        assert not any("no allocation line above" in m for m in said)


async def test_previous_allocation_says_none_when_the_view_holds_the_whole_log(
    tmp_path: Path,
) -> None:
    log = tmp_path / "sglang_gpu0.log"
    log.write_text("".join(f"{DECODE} n={i}\n" for i in range(20)))
    app = viewer_app(log)
    async with app.run_test(size=(140, 40)) as pilot:
        panel = await open_viewer(pilot, app, 20)
        await pilot.press("A")
        await wait_for(pilot, lambda: bool(app._notifications), "the answer")
        assert any("no allocation line above" in str(n.message) for n in app._notifications)
        assert not panel.query_one("#search-results", LogView).display

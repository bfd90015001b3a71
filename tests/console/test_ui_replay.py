"""``gpufleet replay``: a simulated fleet's history recorded by the console's recorder, then the
console itself (``ReplayApp``, the real App, on the replay's port) opened at a past moment shows
in its panels the values that were live then, and its cursor keys move to the next bucket's.

Exact: the GPUs shown, each server's state (READY: ready for most of the bucket). Bucket means
(5 s buckets, over the live snapshots taken in it): GPU utilisation, power, memory, generation
tok/s, running (rounded), KV use. The 20-minute demo's replay is this, longer."""

from __future__ import annotations

import sqlite3
import statistics
from collections.abc import Callable
from pathlib import Path

import pytest
from history_helpers import record
from textual.pilot import Pilot
from ui_helpers import settle

from tui.fleet.snapshot import FleetSnapshot, GpuPanel, ServerState
from tui.history import HistoryStore
from tui.ops.commands import Kind
from tui.ops.replay import ReplayFleet, stamp
from tui.ui.format import num, pct
from tui.ui.gate import READ_ONLY_REASON
from tui.ui.grid.gpu_panel import GpuPanelView
from tui.ui.replay.app import ReplayApp

BUCKET_S = 5
GPUS = 2

Read = Callable[[GpuPanel], float | None]


def bucket_mean(live: list[FleetSnapshot], start: float, gpu: int, read: Read) -> float:
    """The mean of ``read`` over the live snapshots of the bucket from ``start`` (what the
    history keeps of it)."""
    values = [
        read(panel)
        for snap in live
        if start <= snap.taken_at < start + BUCKET_S
        for panel in snap.panels
        if panel.gpu_index == gpu
    ]
    return statistics.fmean(v for v in values if v is not None)


READS: dict[str, Read] = {
    "util": lambda p: None if p.gpu is None else p.gpu.utilization_gpu,
    "power": lambda p: None if p.gpu is None else p.gpu.power_w,
    "mem": lambda p: None if p.gpu is None else p.gpu.memory_used,
    "tok_s": lambda p: None if p.server is None else p.server.gen_throughput,
    "running": lambda p: None if p.server is None else p.server.running,
    "kv": lambda p: None if p.server is None else p.server.token_usage,
}


def assert_shows_then(app: ReplayApp, live: list[FleetSnapshot], start: float) -> None:
    """Every panel of the console holds the bucket's means of what was live then, and draws
    them."""
    shown = app.main_screen.fleet
    assert [p.gpu_index for p in shown.panels] == list(range(GPUS))
    for panel in shown.panels:
        gpu, server = panel.gpu, panel.server
        assert gpu is not None and server is not None
        assert server.state is ServerState.READY  # ready all along the recorded run
        mean = {
            name: bucket_mean(live, start, panel.gpu_index, read) for name, read in READS.items()
        }
        assert gpu.utilization_gpu == pytest.approx(mean["util"])
        assert gpu.power_w == pytest.approx(mean["power"])
        assert gpu.memory_used == pytest.approx(mean["mem"], abs=1)
        assert server.gen_throughput == pytest.approx(mean["tok_s"])
        assert server.running == round(mean["running"])
        assert server.token_usage == pytest.approx(mean["kv"])
        view = app.screen.query_one(f"#gpu-{panel.gpu_index}", GpuPanelView)
        assert view.panel == panel  # what the panel draws
        text = "\n".join(line.plain for line in view.lines())
        assert f"util {pct(mean['util'])}" in text, text
        assert ":0 " not in text, text  # no port is recorded: none is shown, never ':0'
        assert f"running {num(round(mean['running']))}" in text, text


async def test_the_replay_shows_at_a_past_moment_what_the_panels_showed_live(
    tmp_path: Path,
) -> None:
    path = tmp_path / "history.sqlite3"
    live = await record(tmp_path, path, gpus=GPUS, seconds=22)
    first_bucket = (int(live[0].taken_at // BUCKET_S) + 1) * BUCKET_S
    start = first_bucket + BUCKET_S  # a bucket in the middle, with one before it
    assert sum(start - BUCKET_S <= s.taken_at < start + BUCKET_S for s in live) >= 20
    at = start + 2.5
    written = sqlite3.connect(path).execute("SELECT SUM(count) FROM points").fetchone()[0]
    store = HistoryStore(path)
    try:
        port = ReplayFleet(store, at)
        app = ReplayApp(port, poll_interval_s=0.5)
        async with app.run_test(size=(160, 50)) as pilot:
            await settle(pilot, app)
            assert_shows_then(app, live, start)
            assert app.main_screen.sub_title == f"replay {stamp(at)} · 5 s means"
            # Every key that changes the fleet is off, and says why; the port refuses it anyway.
            assert app.main_screen.check_action("kill_selected", ()) is None
            assert app.main_screen.why_disabled("kill_selected", ()) == READ_ONLY_REASON
            assert app.title == "gpufleet replay (read-only)"
            assert port.capabilities().reason(Kind.KILL) == "replay"
            # ',' steps back one bucket: the bucket before's means.
            await pilot.press("comma")
            await until_cursor(pilot, app, at - BUCKET_S)
            assert_shows_then(app, live, start - BUCKET_S)
            assert app.main_screen.sub_title.startswith(f"replay {stamp(at - BUCKET_S)}")
            await pilot.press("full_stop")
            await until_cursor(pilot, app, at)
            assert_shows_then(app, live, start)
            await pilot.press("home")
            await until_cursor(pilot, app, port.first)
            await pilot.press("end")
            await until_cursor(pilot, app, port.last)
            await pilot.press("less_than_sign")  # a minute back: past the start, so the start
            await until_cursor(pilot, app, port.first)
            await pilot.press("q")  # a replay changes nothing: nothing to ask
        assert app.return_code == 0
    finally:
        store.close()
    # The replay read the history and wrote nothing to it.
    assert sqlite3.connect(path).execute("SELECT SUM(count) FROM points").fetchone()[0] == written


async def until_cursor(pilot: Pilot[None], app: ReplayApp, at: float) -> None:
    """Wait (bounded) until the console shows the snapshot at ``at``."""
    import asyncio

    from textual.pilot import Pilot

    assert isinstance(pilot, Pilot)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10
    while app.main_screen.fleet.taken_at != at:
        assert loop.time() < deadline, f"the console never showed {stamp(at)}"
        await pilot.pause(0.01)
    await pilot.pause()

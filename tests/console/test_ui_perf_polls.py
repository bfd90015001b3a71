"""The console's polls: one worker for the console's life, the status document read inside it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from textual.worker import Worker
from ui_helpers import FixedPoller, RecordingFleet, pipeline_status, seven_gpu_fleet, wait_for

from tui.fleet.snapshot import FleetSnapshot
from tui.pipeline.status import PipelineStatus
from tui.ui import app as app_module
from tui.ui.app import FLEET_POLL, HISTORY, FleetApp


class CountingApp(FleetApp):
    """Records the group of every worker that started, but the history's: its batched write
    is a worker every few seconds (``HISTORY``), which a test on a loaded machine lasts long
    enough to see."""

    CSS_PATH = str(Path(app_module.__file__).with_name("app.tcss"))
    started: list[str]

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state.name == "RUNNING" and event.worker.group != HISTORY:
            self.started = [*getattr(self, "started", []), event.worker.group]
        super().on_worker_state_changed(event)


def _app(poller: FixedPoller, reads: list[int], interval: float, fail: bool = False) -> CountingApp:
    def reader() -> PipelineStatus | None:
        reads.append(1)
        if fail:
            raise OSError("the status document is unreadable")
        return pipeline_status()

    return CountingApp(_port(poller, reader), poll_interval_s=interval)


def _port(poller: FixedPoller, reader: Callable[[], PipelineStatus | None]) -> RecordingFleet:
    port = RecordingFleet(poller=poller)
    port.pipeline_status = reader  # type: ignore[method-assign]  # the test's stand-in
    return port


async def test_the_status_document_is_read_in_the_fleet_poll_once_an_interval() -> None:
    poller = FixedPoller(seven_gpu_fleet())
    reads: list[int] = []
    app = _app(poller, reads, interval=0.05)
    async with app.run_test(size=(200, 50)) as pilot:
        await wait_for(pilot, lambda: poller.polls >= 6, "six polls")
        await wait_for(pilot, lambda: app.main_screen.pipeline_status is not None, "the status")
        # Both counts at one moment, with no await between them: polls go on until the app has
        # closed, and reads counted after it (seen under load: 7 reads against 6 polls) are
        # those of polls that came after the count.
        polls, count, started = poller.polls, len(reads), list(app.started)
    assert started == [FLEET_POLL]  # one worker for every poll, none for the status document
    assert polls >= 6
    assert polls - 1 <= count <= polls  # once a poll (the newest may be in flight)


async def test_sooner_polls_read_the_status_document_at_the_normal_interval() -> None:
    """While a server warms up the fleet is polled every 0.2 s; the status document is still
    read once per poll interval (every third poll at 0.5 s)."""
    poller = FixedPoller(replace(seven_gpu_fleet(), refresh_soon=True))
    reads: list[int] = []
    app = _app(poller, reads, interval=0.5)
    async with app.run_test(size=(200, 50)) as pilot:
        await wait_for(pilot, lambda: poller.polls >= 7, "seven polls")
        polls, count = poller.polls, len(reads)
    # Polls 1, 4, 7, ... read it (0.2 + 0.2 + 0.2 >= 0.5); the newest may be in flight.
    assert (polls - 1) // 3 <= count <= (polls - 1) // 3 + 2
    assert count < polls - 2  # not at every sooner poll


async def test_a_failing_status_read_does_not_stop_the_fleet_polls() -> None:
    poller = FixedPoller(seven_gpu_fleet())
    reads: list[int] = []
    app = _app(poller, reads, interval=0.05, fail=True)
    async with app.run_test(size=(200, 50)) as pilot:
        await wait_for(pilot, lambda: poller.polls >= 4 and len(reads) >= 3, "polls, reads")
        assert app.main_screen.fleet.panels  # the snapshots still arrive
        assert app.main_screen.pipeline_status is None


async def test_a_failing_poll_is_logged_and_the_next_one_taken() -> None:
    """The loop outlives a poll that raises (a half-written fleet state file): the next
    snapshot still arrives, from the same worker."""
    fleet = seven_gpu_fleet()

    class FlakyPoller(FixedPoller):
        async def poll(self) -> FleetSnapshot:
            if self.polls == 1:
                self.polls += 1
                raise RuntimeError("the fleet state file was half-written")
            return await super().poll()

    poller = FlakyPoller(fleet)
    reads: list[int] = []
    app = _app(poller, reads, interval=0.02)
    async with app.run_test(size=(200, 50)) as pilot:
        await wait_for(pilot, lambda: poller.polls >= 5, "polls after the failed one")
        assert app.main_screen.fleet == fleet
        assert app.started == [FLEET_POLL]


async def test_an_unchanged_status_reading_is_handed_down_once() -> None:
    """The same document (and marks) read at every poll is posted once: no message a second
    for a pipeline that is not running or between its writes; a changed one is posted."""
    poller = FixedPoller(seven_gpu_fleet())
    reads: list[int] = []
    first = pipeline_status()
    later = replace(first, updated_at=first.updated_at + 10.0)

    def reader() -> PipelineStatus | None:
        reads.append(1)
        return first if len(reads) < 6 else later

    app = CountingApp(_port(poller, reader), poll_interval_s=0.05)
    handed: list[PipelineStatus | None] = []
    app.main_screen.record_pipeline = (  # type: ignore[method-assign]  # the test's stand-in
        lambda status, marks: handed.append(status)
    )
    async with app.run_test(size=(200, 50)) as pilot:
        await wait_for(pilot, lambda: len(reads) >= 8 and len(handed) >= 2, "two readings")
        count = len(reads)
    assert count >= 8
    assert handed == [first, later]

"""The console's probe cost: one request per ready server per poll while /metrics answers."""

from __future__ import annotations

from servers_helpers import (
    OK,
    REMOTE,
    UNAVAILABLE,
    FakeClock,
    canned_server,
    idle_metrics_reply,
    json_reply,
    polled_state,
)

from tui.fleet.monitor import FleetMonitor
from tui.fleet.snapshot import ServerState
from tui.fleet.spec import FleetSpec, ServerSpec
from tui.gpu.source import NoGpuSource


async def test_metrics_stand_for_readiness_between_ready_probes() -> None:
    routes: dict[str, object] = {
        "/health_generate": OK,
        "/ready": OK,
        "/metrics": idle_metrics_reply(),
        "/server_info": json_reply('{"max_running_requests": 64}'),
    }
    clock = FakeClock()
    with canned_server(routes, host=REMOTE) as server:  # type: ignore[arg-type]
        spec = FleetSpec((ServerSpec(0, server.port, host=REMOTE),))
        monitor = FleetMonitor(
            spec, NoGpuSource("none"), probe_timeout=2.0, ready_interval=10.0, clock=clock
        )
        try:
            assert await polled_state(monitor) is ServerState.READY
            for _ in range(9):  # within ready_interval: /metrics only
                clock.now += 1.0
                assert await polled_state(monitor) is ServerState.READY
            assert server.hits["/ready"] == 1  # the first poll's readiness
            assert server.hits["/metrics"] == 10
            assert server.hits.get("/health_generate", 0) <= 1  # in the background, if at all
            clock.now += 1.0  # ready_interval reached: readiness is asked again
            assert await polled_state(monitor) is ServerState.READY
            assert server.hits["/ready"] == 2
            routes["/metrics"] = UNAVAILABLE  # load stops answering: readiness the same poll
            routes["/ready"] = UNAVAILABLE
            routes["/health_generate"] = UNAVAILABLE
            clock.now += 1.0
            assert await polled_state(monitor) is not ServerState.READY
            assert server.hits["/ready"] == 3
        finally:
            await monitor.aclose()


async def test_the_console_polls_in_one_long_lived_worker_and_survives_a_failed_poll() -> None:
    """Every reading comes from the same worker (no worker, timer and state messages per
    poll), the status document is read in the same way, and a poll that raises is logged and
    followed by the next one."""
    import asyncio

    from textual.worker import Worker, get_current_worker
    from ui_helpers import seven_gpu_fleet

    from tui.fleet.snapshot import FleetSnapshot
    from tui.ui.app import FleetApp

    fleet = seven_gpu_fleet()
    workers: list[Worker[None]] = []
    reads: list[int] = []

    class FlakyPoller:
        polls = 0

        async def poll(self) -> FleetSnapshot:
            self.polls += 1
            workers.append(get_current_worker())
            if self.polls == 2:
                raise RuntimeError("the fleet state file was half-written")
            return fleet

    def status(path: object) -> None:
        reads.append(1)

    poller = FlakyPoller()
    app = FleetApp(poller, status_reader=status, retune_marks=list, poll_interval_s=0.02)
    async with app.run_test(size=(120, 40)) as pilot:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 20
        while poller.polls < 6 or len(reads) < 4:
            assert loop.time() < deadline, f"{poller.polls} polls, {len(reads)} reads"
            await pilot.pause(0.02)
        assert app.main_screen.fleet == fleet
    assert len(set(map(id, workers))) == 1  # one worker for every poll

"""The console on a small simulated fleet whose /health takes a second, as SGLang 0.5.23's does:
every panel shows ready from the first or second poll after the ready line, and a stuck scheduler
shows stuck on its panel (a Pilot test; real processes, real loopback HTTP, real logs). How soon
in seconds is ``bench.bench_readiness``'s, against a peer: a test's wall-clock bound failed under
three burners on two cores (3.5 s, both panels at once: the polls themselves came late)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
from sim_helpers import Clients, SimProcess, in_flight, running_sim, wait_until

from tui import paths
from tui.fleet.monitor import FleetMonitor
from tui.fleet.snapshot import FleetSnapshot, ServerState
from tui.fleet.spec import FleetSpec, ServerSpec
from tui.gpu.simulated import SimulatedSource
from tui.ops.local import LocalFleet
from tui.ops.service import FleetOps
from tui.sim.logfmt import READY_LINE
from tui.ui.app import FleetApp
from tui.ui.grid.gpu_panel import GpuPanelView

SIM = ["--sim-speed", "20", "--sim-startup-seconds", "3", "--enable-metrics"]


class ReadyLines:
    """Notes when each log first holds the ready line (5 ms polls: the measuring instrument)."""

    def __init__(self, logs: dict[int, Path]) -> None:
        self.logs = logs
        self.seen: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.005) and len(self.seen) < len(self.logs):
            for gpu, path in self.logs.items():
                if gpu not in self.seen and path.exists() and READY_LINE in path.read_text():
                    self.seen[gpu] = time.time()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)


@contextlib.contextmanager
def two_sims(tmp_path: Path) -> Iterator[list[SimProcess]]:
    with contextlib.ExitStack() as stack:
        sims = [
            stack.enter_context(
                running_sim(
                    [*SIM, "--sim-gpu-index", str(gpu), *extra], tmp_path, wait_healthy=False
                )
            )
            for gpu, extra in ((0, []), (1, ["--sim-fault", "stuck:200"]))
        ]
        yield sims


def _shown(app: FleetApp) -> dict[int, str]:
    """Each panel's first line; a panel not laid out yet (no rows: no lines) shows nothing."""
    shown = {}
    for view in app.main_screen.query(GpuPanelView):
        lines = view.lines() if view.panel is not None else []
        if lines:
            shown[view.gpu_index] = lines[0].plain
    return shown


async def test_console_shows_ready_at_once_and_stuck_on_its_panel(
    tmp_path: Path, isolated_state: Path
) -> None:
    with two_sims(isolated_state) as sims:
        logs = {gpu: sim.log_path for gpu, sim in enumerate(sims)}
        watch = ReadyLines(logs)
        spec = FleetSpec(
            tuple(
                ServerSpec(gpu, sim.port, log_path=str(sim.log_path))
                for gpu, sim in enumerate(sims)
            )
        )
        monitor = FleetMonitor(spec, SimulatedSource(paths.sim_gpu_dir()), stuck_after_s=2.0)
        polls = _recorded(monitor)
        app = FleetApp(LocalFleet(FleetOps(), monitor, watching=True), poll_interval_s=1.0)
        shown_ready: dict[int, float] = {}
        try:
            async with app.run_test(size=(160, 50)) as pilot:
                deadline = time.monotonic() + 40
                while len(shown_ready) < 2:
                    assert time.monotonic() < deadline, _shown(app)
                    for gpu, text in _shown(app).items():
                        if text.startswith("ready") and gpu not in shown_ready:
                            shown_ready[gpu] = time.time()
                    await pilot.pause(0.01)
                # Both ready; /health really takes a second on these servers.
                started = time.monotonic()
                assert httpx.get(sims[0].url + "/health", timeout=25).status_code == 200
                assert time.monotonic() - started >= 1.0
                # GPU 1's scheduler gets stuck 10 s after its readiness, with work queued.
                Clients(sims[1].url, 6, max_tokens=100_000)
                assert wait_until(lambda: in_flight(sims[1].url) >= 6, 10)
                deadline = time.monotonic() + 30
                while not _shown(app).get(1, "").startswith("stuck"):
                    assert time.monotonic() < deadline, _shown(app)
                    await pilot.pause(0.05)
                assert _shown(app)[0].startswith("ready")
        finally:
            watch.close()
            await monitor.aclose()
    delays = {gpu: shown_ready[gpu] - watch.seen[gpu] for gpu in shown_ready}
    print(f"ready line -> panel shows ready: {delays}")
    for gpu, seen in watch.seen.items():
        # The first two polls begun after the line (one may have read /ready just before it).
        after = [states for began, states in polls if began >= seen][:2]
        assert len(after) == 2 and ServerState.READY in {one.get(gpu) for one in after}, (
            gpu,
            after,
        )
        assert shown_ready[gpu] >= seen - 0.05, "shown ready before its ready line"


def _recorded(monitor: FleetMonitor) -> list[tuple[float, dict[int, ServerState | None]]]:
    """Each poll's start (wall clock, as ``ReadyLines``) and each GPU's state in its snapshot."""
    polls: list[tuple[float, dict[int, ServerState | None]]] = []
    poll = monitor.poll

    async def recorded() -> FleetSnapshot:
        began = time.time()
        snapshot = await poll()
        states = {p.gpu_index: p.server.state if p.server else None for p in snapshot.panels}
        polls.append((began, states))
        return snapshot

    monitor.poll = recorded  # type: ignore[method-assign]
    return polls

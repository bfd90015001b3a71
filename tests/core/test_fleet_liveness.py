"""Liveness that does not lie: stuck is shown for a scheduler that answers but makes no progress,
never for an idle server or a long chunked prefill (real simulated servers, real loopback HTTP)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx
from fleet_helpers import served
from sim_helpers import Clients, in_flight, running_sim, wait_until

from tui.fleet.liveness import ProgressWatch
from tui.fleet.monitor import FleetMonitor
from tui.fleet.snapshot import FleetSnapshot, ServerState
from tui.fleet.spec import FleetSpec, ServerSpec
from tui.gpu.source import NoGpuSource


def test_idle_is_never_stuck_and_frozen_work_is() -> None:
    watch = ProgressWatch(floor_s=10.0)
    for t in range(60):
        watch.observe(float(t), busy=False, fingerprint=(1.0,))
        assert watch.stuck_for(float(t), busy=False) is None
    for t in range(60, 80):  # busy and moving every second
        watch.observe(float(t), busy=True, fingerprint=(float(t),))
        assert watch.stuck_for(float(t), busy=True) is None
    assert watch.bound_s() == 10.0  # 5 x 1 s gaps is under the floor
    for t in range(80, 90):  # frozen: up to the bound, not stuck yet
        watch.observe(float(t), busy=True, fingerprint=(79.0,))
        assert watch.stuck_for(float(t), busy=True) is None
    watch.observe(90.5, busy=True, fingerprint=(79.0,))
    assert watch.stuck_for(90.5, busy=True) == 11.5


def test_the_bound_follows_the_servers_own_rhythm() -> None:
    watch = ProgressWatch(floor_s=2.0)
    for k in range(10):  # progress every 4 s (e.g. only the decode log shows it)
        watch.observe(4.0 * k, busy=True, fingerprint=(float(k),))
    assert watch.bound_s() == 20.0
    watch.observe(55.0, busy=True, fingerprint=(9.0,))
    assert watch.stuck_for(55.0, busy=True) is None  # 19 s < 5 x 4 s
    assert watch.stuck_for(61.0, busy=True) == 25.0


FAST = ["--sim-speed", "20", "--sim-startup-seconds", "1", "--enable-metrics"]


async def _watch(
    monitor: FleetMonitor, seconds: float, every: float = 0.25
) -> list[tuple[float, FleetSnapshot]]:
    seen = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        seen.append((time.monotonic(), await monitor.poll()))
        await asyncio.sleep(every)
    return seen


def _monitor(url_port: int, log: Path) -> FleetMonitor:
    spec = FleetSpec((ServerSpec(0, url_port, host="127.0.0.2", log_path=str(log)),))
    return FleetMonitor(
        spec, NoGpuSource("none"), probe_timeout=2.0, ready_interval=0.0, stuck_after_s=1.5
    )


async def test_stuck_scheduler_is_stuck_in_the_snapshot(tmp_path: Path) -> None:
    # Served on 127.0.0.2 too (a wildcard bind): the monitor reads it as remote, no discovery.
    with running_sim([*FAST, "--host", "0.0.0.0", "--sim-fault", "stuck:60"], tmp_path) as sim:
        monitor = _monitor(sim.port, sim.log_path)
        try:
            Clients(sim.url, 6, max_tokens=50_000)
            assert wait_until(lambda: in_flight(sim.url) >= 6, 10)
            seen = await _watch(monitor, 7.0)
        finally:
            await monitor.aclose()
        assert httpx.get(sim.url + "/ready").status_code == 200  # it still answers
    states = [served(s).state for _, s in seen]
    assert ServerState.READY in states and states[-1] is ServerState.STUCK, states
    first_stuck = states.index(ServerState.STUCK)
    assert all(s is ServerState.STUCK for s in states[first_stuck:])
    server = served(seen[-1][1])
    assert server.stuck_for_s is not None and server.stuck_for_s > 1.5
    assert server.running == 6  # it has the work: stuck, not idle


async def test_a_long_prefill_is_progress_not_stuck(tmp_path: Path) -> None:
    """Four requests decode, then a 196k-token prompt is prefilled in 12 chunks for ~2.5 s at
    speed 2: no decode step runs meanwhile (longer than the bound), but Prefill lines and the
    prefill counter move, so the server is never shown stuck."""
    with running_sim(
        ["--sim-speed", "2", "--sim-startup-seconds", "1", "--enable-metrics", "--host", "0.0.0.0"],
        tmp_path,
    ) as sim:
        monitor = _monitor(sim.port, sim.log_path)
        try:
            Clients(sim.url, 4, max_tokens=50_000)
            assert wait_until(lambda: in_flight(sim.url) >= 4, 10)
            await _watch(monitor, 2.0)  # learn the rhythm while it decodes
            prompt = "x" * (4 * 196_000)
            big = asyncio.to_thread(
                httpx.post,
                sim.url + "/v1/completions",
                json={"prompt": prompt, "max_tokens": 8},
                timeout=30,
            )
            task = asyncio.ensure_future(big)
            seen = await _watch(monitor, 5.0)
            reply = await task
        finally:
            await monitor.aclose()
        log = sim.log()
    assert reply.status_code == 200
    assert all(served(s).state is ServerState.READY for _, s in seen)
    lines = log.splitlines()
    chunks = [i for i, ln in enumerate(lines) if "#new-token: 16384" in ln]
    assert len(chunks) >= 11  # the prefill really was long and chunked
    assert not any("Decode batch" in ln for ln in lines[chunks[0] : chunks[-1]])
    # 11 chunks of 16,384 tokens at 40k tok/s and speed 2: decoding paused ~2.3 s, longer than
    # the 1.5 s bound the monitor used; a decode-only watch would have called it stuck.
    assert len(chunks) * 16384 / 40_000 / 2 > 1.5


async def test_a_retraction_is_pressure_on_a_ready_server(tmp_path: Path) -> None:
    with running_sim([*FAST, "--host", "0.0.0.0", "--sim-fault", "retract:20:3"], tmp_path) as sim:
        monitor = _monitor(sim.port, sim.log_path)
        try:
            Clients(sim.url, 6, max_tokens=50_000)
            assert wait_until(lambda: "Retract requests" in sim.log(), 10)
            server = served(await monitor.poll())
        finally:
            await monitor.aclose()
    assert server is not None and server.state is ServerState.READY
    assert server.pressure == "retracted 3" and server.last_error is None
    assert server.pressure_age_s is not None and 0 <= server.pressure_age_s < 5

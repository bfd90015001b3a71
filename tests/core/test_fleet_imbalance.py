"""Imbalance: a GPU whose queue, running, KV use or tok/s stands out from the fleet beyond its
noise is named, with by how much; seven servers alike are not; and on simulated servers, the one
slowed by a fault is singled out through the monitor while the others are left alone."""

from __future__ import annotations

import asyncio
import random
import statistics
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path
from typing import Any

import httpx
import pytest
from sim_helpers import SimProcess, running_sim

from tui import paths
from tui.fleet.imbalance import MAD_TO_SIGMA, READINGS, Z_LIMIT, Outlier, outliers
from tui.fleet.insight import fleet_imbalance
from tui.fleet.monitor import FleetMonitor
from tui.fleet.snapshot import GpuPanel, ServerSnapshot, ServerState
from tui.fleet.spec import FleetSpec, ServerSpec
from tui.gpu.simulated import SimulatedSource

TOK_S = next(r for r in READINGS if r.name == "tok_s")
QUEUE = next(r for r in READINGS if r.name == "queue")


def panel(gpu: int, **load: Any) -> GpuPanel:
    return GpuPanel(gpu, None, ServerSnapshot(30000 + gpu, ServerState.READY, **load))


def seven_alike(rng: random.Random) -> list[GpuPanel]:
    return [
        panel(
            gpu,
            queued=rng.choice((0, 0, 1)),
            running=rng.randint(29, 31),
            token_usage=0.40 + rng.uniform(-0.02, 0.02),
            gen_throughput=1000 * (1 + rng.uniform(-0.03, 0.03)),
        )
        for gpu in range(7)
    ]


@pytest.mark.parametrize("seed", range(20))
def test_seven_alike_are_not_flagged(seed: int) -> None:
    assert fleet_imbalance(seven_alike(random.Random(seed))) == ()


def test_one_slow_gpu_is_named_with_how_much() -> None:
    panels = seven_alike(random.Random(1))
    panels[3] = panel(3, queued=0, running=30, token_usage=0.4, gen_throughput=250.0)
    found = fleet_imbalance(panels)
    assert [(o.gpu, o.reading) for o in found] == [(3, "tok_s")]
    values = [p.server.gen_throughput for p in panels if p.server and p.server.gen_throughput]
    median = statistics.median(values)
    assert found[0].median == median and found[0].value == 250.0
    assert found[0].words == f"GPU 3 tok/s 250: {250 / median:.2f}x the fleet median {median:,.0f}"
    # The score by hand: the floor (10 % of the median) is wider than the others' scatter.
    mad = statistics.median(abs(v - median) for v in values)
    spread = max(MAD_TO_SIGMA * mad, 20.0, 0.1 * median)
    assert found[0].score == pytest.approx((250 - median) / spread) and found[0].score < -Z_LIMIT


def test_a_drowning_queue_is_named() -> None:
    values = {0: 0.0, 1: 1.0, 2: 0.0, 3: 0.0, 4: 41.0, 5: 1.0, 6: 0.0}
    (found,) = outliers(values, QUEUE)
    assert (found.gpu, found.value, found.median) == (4, 41.0, 0.0)
    assert found.words == "GPU 4 queued 41: against the fleet median 0"


def test_noise_and_small_fleets_are_left_alone() -> None:
    # Six read the same (MAD 0): one 3 % off is within the floor, not infinitely far.
    assert outliers({**{g: 1000.0 for g in range(6)}, 6: 1030.0}, TOK_S) == ()
    assert outliers({0: 0.0, 1: 9.0}, QUEUE) == ()  # two: neither is the odd one
    # A server that is not ready is not imbalance (its state says what it is).
    panels = seven_alike(random.Random(2))
    panels[5] = GpuPanel(5, None, ServerSnapshot(30005, ServerState.STARTING, gen_throughput=0.0))
    assert fleet_imbalance(panels) == ()


class Load:
    """``per_server`` requests always in flight on each server (each thread sends the next as
    soon as its last came back), until stopped."""

    def __init__(self, urls: list[str], per_server: int) -> None:
        self.stop = threading.Event()
        self.threads = [
            threading.Thread(target=self._run, args=(url,), daemon=True)
            for url in urls
            for _ in range(per_server)
        ]
        for thread in self.threads:
            thread.start()

    def _run(self, url: str) -> None:
        with httpx.Client(timeout=60) as client:
            while not self.stop.is_set():
                body = {"prompt": "p", "max_tokens": 400, "ignore_eos": False}
                with suppress(httpx.HTTPError):  # a request lost is load lost, not a failure
                    client.post(url + "/v1/completions", json=body)

    def close(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(60)


@contextmanager
def sims(tmp_path: Path, count: int, slowed: int, slow_at: float) -> Iterator[list[SimProcess]]:
    fast = ["--sim-speed", "20", "--sim-startup-seconds", "1", "--enable-metrics"]
    with ExitStack() as stack:
        started = []
        for gpu in range(count):
            fault = ["--sim-fault", f"slow:{slow_at}:4"] if gpu == slowed else []
            args = [*fast, "--sim-gpu-index", str(gpu), *fault]
            started.append(stack.enter_context(running_sim(args, tmp_path, timeout=60)))
        yield started


async def test_the_slowed_simulated_server_is_singled_out(tmp_path: Path) -> None:
    """Four servers under the same load; GPU 3's scheduler (the last started) runs 4x slower
    from 400 simulated seconds (20 s) after it was ready. Before: nothing flagged; after: GPU
    3's tok/s, alone."""
    with sims(tmp_path, 4, slowed=3, slow_at=400.0) as servers:
        spec = FleetSpec(tuple(ServerSpec(gpu_index=i, port=s.port) for i, s in enumerate(servers)))
        monitor = FleetMonitor(spec, SimulatedSource(paths.sim_gpu_dir()), probe_timeout=2.0)
        load = Load([s.url for s in servers], per_server=6)
        try:
            began = time.monotonic()
            flagged_early: list[Outlier] = []
            snap = await monitor.poll()
            while time.monotonic() - began < 10.0:  # the equal phase (the fault comes at 20 s)
                await asyncio.sleep(0.5)  # the console's cadence, not a synchronisation
                snap = await monitor.poll()
                if all(p.server and p.server.gen_throughput for p in snap.panels):
                    flagged_early += snap.imbalance
            assert flagged_early == []
            deadline = time.monotonic() + 60.0
            while not any(o.gpu == 3 and o.reading == "tok_s" for o in snap.imbalance):
                assert time.monotonic() < deadline, snap.imbalance
                await asyncio.sleep(0.5)
                snap = await monitor.poll()
        finally:
            load.close()
            await monitor.aclose()
    slow = next(o for o in snap.imbalance if o.reading == "tok_s")
    assert slow.gpu == 3 and slow.value < 0.5 * slow.median
    assert {o.gpu for o in snap.imbalance} == {3}

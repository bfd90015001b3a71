"""The detail screen shows each latency's p50/p90/p99 with its count and window, the pools,
the draft and the energy (issue 38 point 1, 2, 4, 5); the percentiles checked against the
Prometheus docs' ``histogram_quantile`` (``bench.prom_reference``) on the same buckets."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import replace

from textual.widgets import Static
from ui_helpers import settled_app, seven_gpu_fleet, wait_for

from bench.prom_reference import reference_quantile
from tui.fleet.energy import GpuEnergy
from tui.fleet.latency import summarise
from tui.fleet.snapshot import FleetSnapshot
from tui.fleet.speculative import SpecDecode
from tui.servers.histogram import E2E, ITL, QUEUE, TTFT, Histogram
from tui.ui.detail.detail_screen import DetailScreen
from tui.ui.detail.observed_text import seconds

BOUNDS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, float("inf"))
TTFT_COUNTS = (10.0, 80.0, 400.0, 900.0, 1150.0, 1195.0, 1204.0, 1204.0)
"""A 5-minute increase of the TTFT histogram: 1,204 requests."""
ITL_COUNTS = (52_000.0, 60_000.0, 60_310.0, 60_400.0, 60_400.0, 60_400.0, 60_400.0, 60_400.0)


def detailed_fleet() -> FleetSnapshot:
    ttft, itl = Histogram(BOUNDS, TTFT_COUNTS), Histogram(BOUNDS, ITL_COUNTS)
    e2e = ttft.plus(itl)
    assert e2e is not None
    summary = summarise({TTFT: ttft, ITL: itl, E2E: e2e, QUEUE: ttft}, 300.0)
    fleet = seven_gpu_fleet()
    panel = fleet.panels[0]
    assert panel.server is not None
    server = replace(
        panel.server,
        latency=summary,
        swa_usage=0.12,
        cache_hit_rate=0.63,
        spec=SpecDecode("EAGLE", 3.1, 0.7, 3, 4),
    )
    energy = GpuEnergy(123_456.0, True, 300.0, 640.0, 2.5)
    panel = replace(panel, server=server, energy=energy)
    return replace(fleet, panels=(panel, *fleet.panels[1:]))


@contextlib.asynccontextmanager
async def _detail(fleet: FleetSnapshot, gpu: str) -> AsyncIterator[tuple[str, str]]:
    """The detail of ``gpu`` opened on ``fleet``: its right box's text and its numbers'."""
    async with settled_app(fleet, size=(160, 50)) as (app, pilot):
        await pilot.press(gpu, "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, DetailScreen), "the detail")
        await pilot.pause()
        right = str(app.screen.query_one("#detail-allocation", Static).render())
        yield right, str(app.screen.query_one("#detail-numbers", Static).render())


def _ref(q: float, counts: tuple[float, ...]) -> str:
    return seconds(reference_quantile(q, list(zip(BOUNDS, counts, strict=True))))


async def test_the_detail_shows_each_latencys_percentiles_count_and_window() -> None:
    async with _detail(detailed_fleet(), "0") as (right, numbers):
        assert "latency over the last 5m 00s" in right
        ttft = next(line for line in right.splitlines() if line.startswith("TTFT"))
        expected = [_ref(q, TTFT_COUNTS) for q in (0.5, 0.9, 0.99)]
        assert ttft.split() == ["TTFT", *" ".join(expected).split(), "1,204", "requests"]
        itl = next(line for line in right.splitlines() if line.startswith("ITL"))
        assert _ref(0.9, ITL_COUNTS) in itl and "60,400 tokens" in itl
        assert any(line.startswith("E2E") for line in right.splitlines())
        assert any(line.startswith("queue") for line in right.splitlines())
        assert "use KV 54%  SWA 12%  mamba 20%  hit 63%" in numbers
        assert "spec EAGLE accept 3.10 · 70%  steps 3  draft tokens 4" in numbers
        assert "energy 2.50 tok/J  avg 640 W  (123.5 kJ metered)" in numbers


async def test_a_server_without_histograms_says_so() -> None:
    async with _detail(seven_gpu_fleet(), "1") as (right, _):
        assert "latency: no /metrics histograms read yet" in right

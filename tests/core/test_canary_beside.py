"""A canary reports TTFT p90 and tokens per joule beside throughput (real processes, real HTTP).

Three simulated GPUs on the seed's baseline (16 running requests) under the real pipeline;
the canary GPU gets the baseline starved to 4 running requests: its requests queue, so its time
to first token rises while its throughput falls. The test reads every server's ``/metrics``
and the simulated GPUs' energy counters itself, all through the canary, and holds the verdict's
figures to what it computes from them: the TTFT p90 from prometheus_client's parse of the
histograms (``bench.prom_reference``), the tokens per joule from the counter's joules and the
token counter's delta over the same window.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import httpx
import pytest
from rollout_helpers import PipelineRun, SimFleet, fleet_under_load

from bench.prom_reference import client_buckets, minus, plus, reference_quantile
from tui.gpu.simulated import SimulatedSource
from tui.ops.journal import read_journal
from tui.ops.service import FleetOps
from tui.profiles import load_profile
from tui.retune.counters import output_tokens
from tui.retune.options import ApplyOptions
from tui.rollout.canary import CanaryOptions
from tui.servers.histogram import TTFT

pytestmark = [pytest.mark.timeout(180)]

SPEED = 10.0
OPTIONS = CanaryOptions(
    window_s=6.0,
    warmup_s=3.5,
    max_window_s=8.0,
    interval_s=0.5,
    min_intervals=12,  # 6 s before the first look: the starved canary's TTFTs need the time
    margin=0.05,
    baseline_s=2.0,
    settle_s=0.0,
    apply=ApplyOptions(timeout_s=60, release_timeout_s=20, measure=False),
)


Row = tuple[float, dict[int, str], dict[int, int]]
"""One of the test's own readings: (time.time(), text per port, mJ per GPU)."""


@dataclass
class Scrapes:
    """What the test read itself, every ~0.15 s."""

    rows: list[Row] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def nearest(self, wall: float) -> Row:
        return min(self.rows, key=lambda row: abs(row[0] - wall))


def scrape(ports: list[int], scrapes: Scrapes) -> None:
    source = SimulatedSource()  # one reader all along: a process that left keeps its share
    with httpx.Client() as client:
        while not scrapes.stop.is_set():
            texts = {}
            for port in ports:
                with contextlib.suppress(httpx.HTTPError):
                    texts[port] = client.get(f"http://127.0.0.1:{port}/metrics", timeout=2).text
            energy = {s.index: s.energy_mj for s in source.sample_slow() if s.energy_mj}
            scrapes.rows.append((time.time(), texts, energy))
            scrapes.stop.wait(0.15)


@pytest.fixture()
def loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[SimFleet, PipelineRun]]:
    monkeypatch.setenv("GPUFLEET_STATE_DIR", str(tmp_path / "state"))
    with fleet_under_load(tmp_path, 3, SPEED, max_tokens=256) as both:  # short: many first tokens
        yield both


def ttft_p90(rows: tuple[Row, Row], ports: list[int]) -> float:
    """The reference p90 of ``ports``' TTFT increase between two of the test's scrapes."""
    (_, start, _), (_, end, _) = rows
    total = None
    for port in ports:
        grown = minus(client_buckets(end[port], TTFT), client_buckets(start[port], TTFT))
        total = grown if total is None else plus(total, grown)
    assert total is not None
    return reference_quantile(0.9, total)


def counted(text: str) -> float:
    """The output-token counter of one scrape (which must have it)."""
    tokens = output_tokens(text)
    assert tokens is not None, "a scrape without the output-token counter"
    return tokens


async def test_a_starved_canary_reports_ttft_up_and_tokens_per_joule_down(
    loaded: tuple[SimFleet, PipelineRun],
) -> None:
    fleet, _ = loaded
    scrapes = Scrapes()
    reader = threading.Thread(target=scrape, args=(fleet.ports, scrapes), daemon=True)
    reader.start()
    try:
        result = await FleetOps().canary(load_profile(fleet.files["worse"]), 0, options=OPTIONS)
    finally:
        scrapes.stop.set()
        reader.join(timeout=10)
    said = result.describe()
    print(said)
    assert result.verdict == "worse", said
    beside = result.beside
    assert beside is not None, said
    canary, control = beside.measured, beside.reference
    assert (canary.name, control.name, control.gpus) == ("canary", "control", (1, 2))
    # Against the test's own scrapes nearest the window's two ends (<= 0.1 s away, of 6 s).
    rows = (scrapes.nearest(canary.window[0]), scrapes.nearest(canary.window[1]))
    assert all(abs(row[0] - w) < 0.3 for row, w in zip(rows, canary.window, strict=True))
    ref_canary = ttft_p90(rows, fleet.ports[:1])
    ref_control = ttft_p90(rows, fleet.ports[1:])
    print(f"reference TTFT p90 {ref_canary:.3f} vs {ref_control:.3f} s")
    assert canary.ttft_p90_s == pytest.approx(ref_canary, rel=0.15)
    assert control.ttft_p90_s == pytest.approx(ref_control, rel=0.15)
    change = beside.ttft_p90
    assert change.relative is not None and change.relative > 0.5  # queued: TTFT up
    assert change.low is not None and change.high is not None and change.low > 0
    assert change.relative == pytest.approx(ref_canary / ref_control - 1, rel=0.25)
    # tokens per joule: the simulated GPU's counter and the token counter over the same window
    (_, t0, e0), (_, t1, e1) = rows
    for side, gpus in ((canary, [0]), (control, [1, 2])):
        ports = [fleet.ports[g] for g in gpus]
        tokens = sum(counted(t1[p]) - counted(t0[p]) for p in ports)
        joules = sum(e1[g] - e0[g] for g in gpus) / 1000.0
        assert side.tokens_per_joule == pytest.approx(tokens / joules, rel=0.1), side
    tpj = beside.tokens_per_joule
    assert tpj.relative is not None and tpj.relative < 0  # the starved GPU makes fewer per joule
    line = said.splitlines()[1]
    assert line.startswith("TTFT p90 +") and ", tokens/J -" in line and "CI" in line
    (entry,) = [e for e in read_journal().entries if e.type == "canary"]
    kept = entry.detail["beside"]
    assert kept["canary"]["ttft_p90_s"] == canary.ttft_p90_s
    assert kept["control"]["tokens_per_joule"] == control.tokens_per_joule
    assert kept["words"] == line
    assert replace(result, beside=None).beside_line().startswith("TTFT p90, ITL p90, tokens/J: not")

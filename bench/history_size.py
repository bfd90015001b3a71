"""The history's size on disk for the seed's job: 41 hours of a 7-GPU fleet, every series the
console records (``tui.history.samples``), written and pruned as the console's recorder does.

The series are exactly those ``fleet_samples`` makes of a fully populated 7-GPU snapshot (every
panel reading, the latency percentiles, the energy) plus the job's rates; their values wander
(a random walk: SQLite stores a changing REAL in the same bytes as a constant one, but no
value repeats). Each minute of the 41 hours is one write of its twelve 5-second readings per
series (the recorder writes every 5 s; the buckets are the same), with a prune every 10
minutes (the recorder's). Prints the series, the rows per tier, the pages in use (what the cap
bounds) and the file's size after a checkpoint.

    python -m bench.history_size [--hours 41] [--gpus 7]
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tui.fleet.energy import FleetEnergy, GpuEnergy
from tui.fleet.latency import LatencySummary, Percentiles
from tui.fleet.snapshot import FleetSnapshot, GpuPanel, ServerSnapshot, ServerState
from tui.fleet.speculative import SpecDecode
from tui.gpu.snapshot import GpuSnapshot
from tui.history.samples import fleet_samples
from tui.history.store import HistoryStore, Sample

START = 1_800_000_000.0
"""Where the generated job begins (a multiple of every bucket width)."""


def full_snapshot(gpus: int) -> FleetSnapshot:
    """A snapshot with every reading the history records set."""
    p = Percentiles(0.5, 0.9, 1.5, 100)
    latency = LatencySummary(300.0, p, p, p, p)
    panels = tuple(
        GpuPanel(
            i,
            GpuSnapshot(
                i,
                "B200",
                "u",
                180 << 30,
                150 << 30,
                30 << 30,
                90.0,
                50.0,
                70.0,
                900.0,
                1000.0,
                1900,
                2600,
            ),
            ServerSnapshot(
                30000 + i,
                ServerState.READY,
                running=60,
                queued=5,
                token_usage=0.4,
                mamba_usage=0.7,
                gen_throughput=1200.0,
                accept_len=2.4,
                spec=SpecDecode("EAGLE", 2.4, 0.6, 3, 4),
                latency=latency,
            ),
            energy=GpuEnergy(1e6, True, 300.0, 900.0, 1.3),
        )
        for i in range(gpus)
    )
    return FleetSnapshot(panels, latency=latency, energy=FleetEnergy(7e6, 300.0, 6300.0, 1.3))


@dataclass(frozen=True, slots=True)
class Size:
    """What one generated history measured."""

    series: int
    """Series written."""
    rows_by_tier: dict[int, int]
    """Buckets kept per tier (0: 5 s, 1: 1 min, 2: 15 min)."""
    pages_bytes: int
    """Bytes the store's pages hold (what the 64 MiB cap bounds)."""
    file_bytes: int
    """The file's size after a checkpoint."""
    seconds: float
    """Wall time to write it."""


def generate(path: Path, hours: float, gpus: int, seed: int = 1) -> Size:
    """Write ``hours`` of the fleet's history to ``path``; returns what it measured."""
    keys = [(s.gpu, s.metric) for s in fleet_samples(full_snapshot(gpus))]
    keys += [(None, "out_tok_s"), (None, "req_s")]
    rng = random.Random(seed)
    value = {key: 100.0 for key in keys}
    store = HistoryStore(path)
    began = time.perf_counter()
    end = START + hours * 3600
    t = START
    last_prune = START
    while t < end:
        batch = []
        for step in range(12):
            for key in keys:
                value[key] = max(value[key] + rng.gauss(0.0, 1.0), 0.0)
                batch.append(Sample(t + 5 * step, key[0], key[1], value[key]))
        store.write(batch)
        t += 60
        if t - last_prune >= 600:
            store.prune(t)
            last_prune = t
    store.prune(t)
    pages = store.size_bytes()
    store.close()
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        rows = dict(db.execute("SELECT tier, COUNT(*) FROM points GROUP BY tier").fetchall())
    return Size(len(keys), rows, pages, path.stat().st_size, time.perf_counter() - began)


def main() -> None:
    """Generate and print the measure."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hours", type=float, default=41.0)
    parser.add_argument("--gpus", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        found = generate(Path(tmp) / "history.sqlite3", args.hours, args.gpus)
    mib = 1 << 20
    print(
        f"{args.hours:g} h at {args.gpus} GPUs: {found.series} series, rows by tier "
        f"{found.rows_by_tier}, pages in use {found.pages_bytes / mib:.1f} MiB (cap 64 MiB), "
        f"file {found.file_bytes / mib:.1f} MiB, written in {found.seconds:.0f} s"
    )


if __name__ == "__main__":
    main()

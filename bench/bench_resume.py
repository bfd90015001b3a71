"""Resume: load a done record of 913,786 indices against the seed's newline-separated set.

The record is written through ``DoneRecord.append`` in shard-sized batches (1,000 records) in a
realistic completion order: prompts are dispatched in index order and finish out of order within
the in-flight window, so each index is displaced by up to a few thousand places. The peer file
holds the same indices, one per line, in the same order (what the seed's ``.done_indices`` was).
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import tracemalloc
from pathlib import Path

from bench.harness import Context, Row, Stat, repeat, timed
from tui.pipeline.done_record import DoneRecord

BENCH = "resume"
TOTAL = 913_786
SHARD = 1000
WINDOW = 4096
"""Completion-order displacement: about the fleet's in-flight requests (7 x 48) times ten."""

_CHILD = """
import json, os, sys
from pathlib import Path
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
kind, path = sys.argv[1], Path(sys.argv[2])
from tui.pipeline.done_record import DoneRecord
before = rss()
if kind == "ours":
    held = DoneRecord.load(path)
else:
    with open(path) as f:
        held = {int(line) for line in f}
print(json.dumps({"added": rss() - before, "count": len(held)}))
"""


def completion_order(total: int, window: int, seed: int = 7) -> list[int]:
    """0..total-1 shuffled within consecutive windows (out-of-order completion)."""
    rng = random.Random(seed)
    order = list(range(total))
    for start in range(0, total, window):
        part = order[start : start + window]
        rng.shuffle(part)
        order[start : start + window] = part
    return order


def _load_set(path: Path) -> set[int]:
    with open(path) as handle:
        return {int(line) for line in handle}


def _traced(fn: object) -> tuple[float, float]:
    """(MB still held with the result alive, peak MB during the load) by tracemalloc."""
    tracemalloc.start()
    try:
        held = fn()  # type: ignore[operator]
        current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    del held
    return current / 1e6, peak / 1e6


def _rss_added(kind: str, path: Path) -> float:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, kind, str(path)],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parent.parent,
    )
    result = json.loads(done.stdout)
    if result["count"] != TOTAL:
        raise RuntimeError(f"{kind} loaded {result['count']} indices, expected {TOTAL}")
    return float(result["added"]) / 1e6


def run(ctx: Context) -> list[Row]:
    """Write both files, then time and weigh loading each; return the rows."""
    order = completion_order(TOTAL, WINDOW)
    record_path, text_path = ctx.scratch / "done.record", ctx.scratch / "done_indices.txt"
    record = DoneRecord.load(record_path)
    for shard, start in enumerate(range(0, TOTAL, SHARD)):
        record.append(shard, order[start : start + SHARD])
    text_path.write_text("".join(f"{i}\n" for i in order))
    if len(DoneRecord.load(record_path)) != TOTAL or len(_load_set(text_path)) != TOTAL:
        raise RuntimeError("a resume file does not hold every index")
    runs = 3 if ctx.quick else 5
    ours_t = repeat(lambda: timed(lambda: DoneRecord.load(record_path)), runs)
    peer_t = repeat(lambda: timed(lambda: _load_set(text_path)), runs)
    ours_held, ours_peak = _traced(lambda: DoneRecord.load(record_path))
    peer_held, peer_peak = _traced(lambda: _load_set(text_path))
    rss_runs = 1 if ctx.quick else 3
    ours_rss = repeat(lambda: _rss_added("ours", record_path), rss_runs)
    peer_rss = repeat(lambda: _rss_added("peer", text_path), rss_runs)
    sizes = (
        f"done record {record_path.stat().st_size / 1e3:.0f} KB in {TOTAL // SHARD + 1} "
        f"shard batches; text file {text_path.stat().st_size / 1e6:.1f} MB"
    )
    peer_name = "newline ints into a set"
    return [
        Row(
            BENCH,
            f"load {TOTAL:,} done indices (s)",
            ours_t,
            peer_name,
            peer_t,
            "< 0.2 s",
            ours_t.median < 0.2,
            note=sizes,
            fmt="{:.4f}",
        ),
        Row(
            BENCH,
            "added memory held after the load, tracemalloc (MB)",
            Stat.of([ours_held]),
            peer_name,
            Stat.of([peer_held]),
            "< 1 MB",
            ours_held < 1.0,
            note=(
                f"transient peak during the load: {ours_peak:.2f} MB (the journal is read whole) "
                f"vs {peer_peak:.2f} MB"
            ),
            fmt="{:.2f}",
        ),
        Row(
            BENCH,
            "added memory, RSS delta in a fresh process (MB)",
            ours_rss,
            peer_name,
            peer_rss,
            "< 1 MB",
            ours_rss.median < 1.0,
            note="RSS counts whole pages and allocator arenas; tracemalloc counts Python objects",
            fmt="{:.2f}",
        ),
    ]

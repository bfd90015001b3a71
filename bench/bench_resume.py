"""Resume by id: load a done record of 913,786 prompts and match the prompts file to the job index.

The done record is written through ``DoneRecord.append`` in shard-sized batches (1,000 records) in
a realistic completion order: prompts are dispatched in file order and finish out of order
within the in-flight window, so each serial is displaced by up to a few thousand places. The job
index (``tui.pipeline.job_index``) holds the 913,786 prompt ids' 64-bit hashes.

Measured, as ``gpufleet generate`` resumes:

* the unchanged prompts file (the common case): ``DoneRecord.load`` plus ``job_index.resolve``,
  which compares the file's fingerprint with the index's first batch header (36 bytes read) -
  against the seed's peer, newline-separated indices read into a set;
* a file with one id inserted at the top (``--resume-by-id``): the file's ids matched to the
  index's serials in runs (``tui.pipeline.id_align``) - against the obvious id-keyed resume, the
  done ids (strings, one a line) read into a set.

The prompts file's own scan (which yields the id hashes) is not part of either: it is the same
work with or without a resume.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
import time
import tracemalloc
from array import array
from collections.abc import Callable
from pathlib import Path

from bench.harness import Context, Row, Stat, repeat, timed
from tui.pipeline import job_index
from tui.pipeline.batch_input import id_hash
from tui.pipeline.done_record import DoneRecord

BENCH = "resume"
TOTAL = 913_786
SHARD = 1000
WINDOW = 4096
"""Completion-order displacement: about the fleet's in-flight requests (7 x 48) times ten."""

_CHILD = """
import hashlib, json, os, sys
from array import array
from pathlib import Path
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
kind, path = sys.argv[1], Path(sys.argv[2])
from tui.pipeline import job_index
from tui.pipeline.done_record import DoneRecord
if kind == "ours":
    ids = array("Q")
    with open(path / "ids.bin", "rb") as f:
        ids.fromfile(f, os.path.getsize(path / "ids.bin") // 8)
    digest = hashlib.blake2b(ids.tobytes(), digest_size=16).digest()
before = rss()
if kind == "ours":
    held = DoneRecord.load(path / "done.record")
    index = job_index.resolve(path, ids, digest, held, by_id=False)
    assert index.mapping is None
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


def _ids(total: int) -> array[int]:
    return array("Q", (id_hash(f"req-{i:07d}") for i in range(total)))


def _digest(ids: array[int]) -> bytes:
    import hashlib

    return hashlib.blake2b(ids.tobytes(), digest_size=16).digest()


def _resume(
    out: Path, ids: array[int], digest: bytes, by_id: bool = False
) -> tuple[DoneRecord, job_index.JobIndex]:
    done = DoneRecord.load(out / "done.record")
    index = job_index.resolve(out, ids, digest, done, by_id=by_id)
    if not by_id and index.mapping is not None:
        raise RuntimeError("the unchanged file did not take the fast path")
    return done, index


def _load_set(path: Path) -> set[int]:
    with open(path) as handle:
        return {int(line) for line in handle}


def _load_id_set(path: Path) -> set[str]:
    with open(path) as handle:
        return {line.rstrip("\n") for line in handle}


def _traced(fn: Callable[[], object]) -> tuple[float, float]:
    """(MB still held with the result alive, peak MB during the load) by tracemalloc."""
    tracemalloc.start()
    try:
        held = fn()
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


def _remap_runs(out: Path, ids: array[int], runs: int) -> Stat:
    """Seconds to resume by id after an insert at the top; a fresh index copy for each run."""
    pristine = out / "pristine.bin"
    shutil.copyfile(out / job_index.REGISTRY_NAME, pristine)
    inserted = array("Q", [id_hash("inserted-at-the-top")])
    inserted.extend(ids)
    digest = _digest(inserted)
    times = []
    for _ in range(runs):
        shutil.copyfile(pristine, out / job_index.REGISTRY_NAME)
        t0 = time.perf_counter()
        _, index = _resume(out, inserted, digest, by_id=True)
        times.append(time.perf_counter() - t0)
        if index.change is None or index.change.added != 1:
            raise RuntimeError("the insert was not found")
    shutil.copyfile(pristine, out / job_index.REGISTRY_NAME)
    return Stat.of(times)


def run(ctx: Context) -> list[Row]:
    """Write the job index, the done record and the peers' files; time and weigh each resume."""
    order = completion_order(TOTAL, WINDOW)
    out = ctx.scratch / "resume"
    out.mkdir()
    ids = _ids(TOTAL)
    digest = _digest(ids)
    job_index.create(out, ids, digest)
    (out / "ids.bin").write_bytes(ids.tobytes())
    record = DoneRecord.load(out / "done.record")
    for shard, start in enumerate(range(0, TOTAL, SHARD)):
        record.append(shard, order[start : start + SHARD])
    text_path, id_path = ctx.scratch / "done_indices.txt", ctx.scratch / "done_ids.txt"
    text_path.write_text("".join(f"{i}\n" for i in order))
    id_path.write_text("".join(f"req-{i:07d}\n" for i in order))
    if len(DoneRecord.load(out / "done.record")) != TOTAL or len(_load_set(text_path)) != TOTAL:
        raise RuntimeError("a resume file does not hold every index")
    runs = 3 if ctx.quick else 5
    ours_t = repeat(lambda: timed(lambda: _resume(out, ids, digest)), runs)
    peer_t = repeat(lambda: timed(lambda: _load_set(text_path)), runs)
    ours_held, ours_peak = _traced(lambda: _resume(out, ids, digest))
    peer_held, peer_peak = _traced(lambda: _load_set(text_path))
    rss_runs = 1 if ctx.quick else 3
    ours_rss = repeat(lambda: _rss_added("ours", out), rss_runs)
    peer_rss = repeat(lambda: _rss_added("peer", text_path), rss_runs)
    remap_t = _remap_runs(out, ids, runs)
    id_set_t = repeat(lambda: timed(lambda: _load_id_set(id_path)), runs)
    inserted = array("Q", [1, *ids])
    remap_held, remap_peak = _traced(lambda: _resume(out, inserted, _digest(inserted), True))
    shutil.copyfile(out / "pristine.bin", out / job_index.REGISTRY_NAME)
    set_held, set_peak = _traced(lambda: _load_id_set(id_path))
    sizes = (
        f"done record {(out / 'done.record').stat().st_size / 1e3:.0f} KB in "
        f"{TOTAL // SHARD + 1} shard batches, job index "
        f"{(out / job_index.REGISTRY_NAME).stat().st_size / 1e6:.1f} MB (36 bytes of it read); "
        f"text file {text_path.stat().st_size / 1e6:.1f} MB"
    )
    peer_name, id_peer = "newline ints into a set", "done ids (strings) into a set"
    return [
        Row(BENCH, f"resume {TOTAL:,} done prompts by id, file unchanged (s)", ours_t,
            peer_name, peer_t, "< 0.2 s", ours_t.median < 0.2, note=sizes, fmt="{:.4f}"),
        Row(BENCH, "added memory held after the resume, tracemalloc (MB)", Stat.of([ours_held]),
            peer_name, Stat.of([peer_held]), "< 1 MB", ours_held < 1.0,
            note=f"transient peak during the resume: {ours_peak:.2f} MB (the done record is "
            f"read whole) vs {peer_peak:.2f} MB", fmt="{:.2f}"),
        Row(BENCH, "added memory, RSS delta in a fresh process (MB)", ours_rss, peer_name,
            peer_rss, "< 1 MB", ours_rss.median < 1.0,
            note="RSS counts whole pages and allocator arenas; tracemalloc counts Python "
            "objects", fmt="{:.2f}"),
        Row(BENCH, "resume by id after one id inserted at the top (s)", remap_t, id_peer,
            id_set_t, "< 0.2 s", remap_t.median < 0.2,
            note=f"--resume-by-id: the file matched to the index in runs (here 2); memory held "
            f"{remap_held:.2f} MB, transient peak {remap_peak:.1f} MB (the index read whole), vs "
            f"{set_held:.1f} MB held, peak {set_peak:.1f} MB for the set of ids", fmt="{:.3f}"),
    ]  # fmt: skip

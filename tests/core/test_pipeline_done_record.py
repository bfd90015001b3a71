"""The done record: bitmap journal, torn tails, and the cost of loading 913,786 indices."""

from __future__ import annotations

import random
import time
import tracemalloc
from pathlib import Path

import pytest

from tui.pipeline.done_record import HEADER, DoneRecord

SEED_SCALE = 913_786


def test_append_and_reload_match_exactly(tmp_path: Path) -> None:
    path = tmp_path / "done.bin"
    record = DoneRecord.load(path)
    rng = random.Random(7)
    expected: set[int] = set()
    for shard in range(1, 21):
        batch = rng.sample(range(50_000), 300)
        record.append(shard, batch)
        expected.update(batch)
    reloaded = DoneRecord.load(path)
    assert len(reloaded) == len(expected) == len(record)
    assert reloaded.shards == set(range(1, 21))
    assert all(i in reloaded for i in expected)
    assert sum(1 for i in range(50_010) if i in reloaded) == len(expected)


@pytest.mark.parametrize("cut", [1, 4, 15, 20, 24])
def test_torn_last_batch_is_ignored_then_overwritten(tmp_path: Path, cut: int) -> None:
    path = tmp_path / "done.bin"
    record = DoneRecord.load(path)
    record.append(1, range(0, 100))
    record.append(2, range(100, 200))
    data = path.read_bytes()
    path.write_bytes(data[:-cut])  # a kill in the middle of the second append
    torn = DoneRecord.load(path)
    assert torn.shards == {1}
    assert len(torn) == 100 and 150 not in torn
    torn.append(3, range(100, 150))
    again = DoneRecord.load(path)
    assert again.shards == {1, 3}
    assert len(again) == 150 and 149 in again and 150 not in again


def test_corrupted_crc_stops_at_the_bad_batch(tmp_path: Path) -> None:
    path = tmp_path / "done.bin"
    record = DoneRecord.load(path)
    record.append(1, [1, 2, 3])
    record.append(2, [10])
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    assert DoneRecord.load(path).shards == {1}


def test_torn_header_is_an_empty_record_and_foreign_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "done.bin"
    path.write_bytes(HEADER[:3])
    assert len(DoneRecord.load(path)) == 0
    path.write_bytes(b"1\n2\n3\n")
    with pytest.raises(ValueError, match="not a gpufleet done record"):
        DoneRecord.load(path)


def test_load_at_seed_scale_is_fast_and_small(tmp_path: Path) -> None:
    """913,786 indices in shards of 1000 with out-of-order completion inside each shard."""
    path = tmp_path / "done.bin"
    record = DoneRecord.load(path)
    rng = random.Random(1)
    order = list(range(SEED_SCALE))
    for start in range(0, SEED_SCALE, 5000):  # completions arrive out of order within a window
        window = order[start : start + 5000]
        rng.shuffle(window)
        order[start : start + 5000] = window
    for shard, start in enumerate(range(0, SEED_SCALE, 1000), start=1):
        record.append(shard, order[start : start + 1000])
    seed_path = tmp_path / "done_indices"
    seed_path.write_text("\n".join(map(str, order)) + "\n")

    t0 = time.perf_counter()
    loaded = DoneRecord.load(path)
    elapsed = time.perf_counter() - t0
    tracemalloc.start()
    DoneRecord.load(path)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    t0 = time.perf_counter()
    seed = {int(line) for line in seed_path.read_text().split()}
    seed_elapsed = time.perf_counter() - t0

    print(
        f"\ndone record: {SEED_SCALE} indices, file {path.stat().st_size} B,"
        f" load {elapsed * 1e3:.1f} ms, peak {peak / 1e6:.2f} MB;"
        f" newline ints into a set: {seed_elapsed * 1e3:.1f} ms"
    )
    assert len(loaded) == SEED_SCALE == len(seed)
    assert SEED_SCALE - 1 in loaded and SEED_SCALE not in loaded
    assert peak < 2_000_000  # a bitmap, not a set of ints (which would be ~50 MB)

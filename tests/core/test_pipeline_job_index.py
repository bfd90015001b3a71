"""The job index: ids numbered once, the unchanged file's fast path, edits matched by runs."""

from __future__ import annotations

import hashlib
import random
from array import array
from pathlib import Path

import pytest

from tui.pipeline import job_index
from tui.pipeline.batch_input import id_hash
from tui.pipeline.done_record import DoneRecord
from tui.pipeline.id_align import MAX_LOOKUPS, MAX_RUNS, align, table
from tui.pipeline.job import JobRefused, open_job
from tui.pipeline.job_index import REGISTRY_NAME, JobIndexError
from tui.pipeline.prompts import PromptFile


def _ids(names: list[str]) -> array[int]:
    return array("Q", (id_hash(name) for name in names))


def _digest(ids: array[int]) -> bytes:
    return hashlib.blake2b(ids.tobytes(), digest_size=16).digest()


def _resolve(out: Path, names: list[str], done: DoneRecord, by_id: bool) -> job_index.JobIndex:
    ids = _ids(names)
    return job_index.resolve(out, ids, _digest(ids), done, by_id=by_id)


def _truth(first: list[str], names: list[str]) -> list[int]:
    """The serials an id-keyed resume must give: known ids keep theirs, new ones follow."""
    serial = {name: i for i, name in enumerate(first)}
    out = []
    for name in names:
        if name not in serial:
            serial[name] = len(serial)
        out.append(serial[name])
    return out


def test_the_unchanged_file_reads_only_the_first_header(tmp_path: Path) -> None:
    names = [f"q{i}" for i in range(1000)]
    ids = _ids(names)
    job_index.create(tmp_path, ids, _digest(ids))
    path = tmp_path / REGISTRY_NAME
    data = bytearray(path.read_bytes())
    data[-100:] = bytes(100)  # damage the hashes: the fast path never reads them
    path.write_bytes(bytes(data))
    index = job_index.resolve(
        tmp_path, ids, _digest(ids), DoneRecord.load(tmp_path / "d"), by_id=False
    )
    assert index.mapping is None and index.change is None and index.serials == 1000


def test_an_insert_is_refused_then_numbered_and_accepted_again(tmp_path: Path) -> None:
    names = [f"q{i}" for i in range(5000)]
    ids = _ids(names)
    job_index.create(tmp_path, ids, _digest(ids))
    done = DoneRecord.load(tmp_path / "done")
    done.append(1, range(0, 5000, 2))
    edited = ["new", *names]
    with pytest.raises(JobIndexError, match=r"1 new id\(s\), 0 removed, order kept"):
        _resolve(tmp_path, edited, done, by_id=False)
    index = _resolve(tmp_path, edited, done, by_id=True)
    assert index.serials == 5001 and index.change is not None and index.change.added == 1
    assert [index.serial_of(p) for p in range(5001)] == _truth(names, edited)
    assert index.mapping is not None and index.mapping.runs is not None
    assert len(index.mapping.runs) == 2  # the new id, then the old file in one run
    again = _resolve(tmp_path, edited, done, by_id=False)  # the accepted file needs no flag
    assert [again.serial_of(p) for p in range(5001)] == _truth(names, edited)
    assert again.serials == 5001 and again.change is not None and again.change.added == 0


def test_random_block_edits_match_the_truth(tmp_path: Path) -> None:
    rng = random.Random(3)
    names = [f"q{i}" for i in range(3000)]
    ids = _ids(names)
    job_index.create(tmp_path, ids, _digest(ids))
    done = DoneRecord.load(tmp_path / "done")
    done.append(1, range(0, 3000, 3))
    edited = list(names)
    for n in range(12):  # move, remove and insert blocks
        start = rng.randrange(len(edited) - 50)
        block = edited[start : start + rng.randint(1, 50)]
        del edited[start : start + len(block)]
        if n % 3 == 0:
            edited[rng.randrange(len(edited)) : 0] = block
        elif n % 3 == 1:
            edited[rng.randrange(len(edited)) : 0] = [f"new{n}-{i}" for i in range(len(block))]
    index = _resolve(tmp_path, edited, done, by_id=True)
    assert [index.serial_of(p) for p in range(len(edited))] == _truth(names, edited)
    gone = set(names) - set(edited)
    assert index.change is not None and index.change.removed == len(gone)
    assert index.change.removed_done == sum(1 for n in gone if int(n[1:]) % 3 == 0)
    assert index.change.reordered


def test_a_shuffled_file_falls_back_to_a_table(tmp_path: Path) -> None:
    names = [f"q{i}" for i in range(6000)]  # more runs than MAX_RUNS once shuffled
    ids = _ids(names)
    job_index.create(tmp_path, ids, _digest(ids))
    shuffled = [*names[:5990], "late-a", "late-b"]
    random.Random(5).shuffle(shuffled)
    assert align(ids.tobytes(), _ids(shuffled)) is None  # more than MAX_LOOKUPS run starts
    assert len(shuffled) > MAX_RUNS > MAX_LOOKUPS
    index = _resolve(tmp_path, shuffled, DoneRecord.load(tmp_path / "done"), by_id=True)
    assert [index.serial_of(p) for p in range(len(shuffled))] == _truth(names, shuffled)
    assert index.mapping is not None and index.mapping.runs is None  # one serial a position
    assert index.change is not None and index.change.removed == 10 and index.change.reordered
    assert list(table(ids.tobytes(), _ids(names[:3]))) == [0, 1, 2]


def test_a_torn_append_is_cut_off(tmp_path: Path) -> None:
    names = [f"q{i}" for i in range(100)]
    ids = _ids(names)
    job_index.create(tmp_path, ids, _digest(ids))
    path = tmp_path / REGISTRY_NAME
    with open(path, "ab") as handle:
        handle.write(b"\x7c\xb4\x5e\x1d" + bytes(30))  # half of a batch: a kill mid-append
    done = DoneRecord.load(tmp_path / "done")
    index = _resolve(tmp_path, ["x", *names], done, by_id=True)
    assert index.serial_of(0) == 100
    assert _resolve(tmp_path, ["x", *names], done, by_id=False).serials == 101


def test_the_done_record_counts_a_prefix_and_knows_its_highest(tmp_path: Path) -> None:
    done = DoneRecord.load(tmp_path / "done")
    assert done.highest() == -1 and done.count_below(100) == 0
    done.append(1, [0, 3, 7, 8, 15, 64])
    assert done.highest() == 64
    assert [done.count_below(n) for n in (0, 1, 4, 8, 9, 16, 65, 10_000)] == [
        0,
        1,
        2,
        3,
        4,
        5,
        6,
        6,
    ]


def test_an_insert_into_913786_prompts_is_matched_in_two_runs(tmp_path: Path) -> None:
    names = [f"req-{i:07d}" for i in range(913_786)]
    ids = _ids(names)
    job_index.create(tmp_path, ids, _digest(ids))
    done = DoneRecord.load(tmp_path / "done")
    edited = array("Q", [id_hash("inserted")])
    edited.extend(ids)
    index = job_index.resolve(tmp_path, edited, _digest(edited), done, by_id=True)
    # Two runs, not a per-id dict (which took 0.6 s against ~20 ms): what keeps a resume after
    # an edit fast is the shape of the mapping, asserted here; its speed is not timed in a test.
    assert index.mapping is not None and index.mapping.runs is not None
    assert len(index.mapping.runs) == 2 and index.serial_of(913_786) == 913_785


def test_a_damaged_index_under_done_prompts_is_refused_by_name(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (tmp_path / "p.jsonl").write_text('{"prompt": "a"}\n{"prompt": "b"}\n')
    DoneRecord.load(out / "done_record.bin").append(1, [0])
    (out / REGISTRY_NAME).write_bytes(b"not an index")
    prompts = PromptFile.open(tmp_path / "p.jsonl")
    try:
        with pytest.raises(JobRefused, match=r"not a gpufleet job index .*cannot be matched"):
            open_job(out, prompts, by_id=True)
        (out / REGISTRY_NAME).unlink()  # no index, done prompts: an older gpufleet's directory
        job = open_job(out, prompts, by_id=False)
        assert job.done_in_file == 1 and "older gpufleet" in job.notes[0]
        job.lock.release()
    finally:
        prompts.close()

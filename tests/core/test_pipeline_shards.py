"""Shard durability and resume reconciliation after a crash at each step of a commit."""

from __future__ import annotations

import json
from pathlib import Path

from tui.pipeline.done_record import DoneRecord
from tui.pipeline.shards import ShardStore


def _lines(indices: range) -> list[bytes]:
    return [json.dumps({"index": i, "text": f"t{i}"}).encode() + b"\n" for i in indices]


def test_commit_writes_shard_then_record(tmp_path: Path) -> None:
    store = ShardStore(tmp_path / "out")
    done = DoneRecord.load(store.done_path)
    path = store.commit(done, 1, list(range(10)), _lines(range(10)))
    assert path.read_bytes() == b"".join(_lines(range(10)))
    assert DoneRecord.load(store.done_path).shards == {1}
    assert not list(store.out_dir.glob(".shard-*"))


def test_crash_while_writing_temporary_file(tmp_path: Path) -> None:
    store = ShardStore(tmp_path / "out")
    done = DoneRecord.load(store.done_path)
    store.commit(done, 1, list(range(10)), _lines(range(10)))
    (store.out_dir / ".shard-000002.jsonl.tmp").write_bytes(b'{"index": 10, "te')
    resumed = DoneRecord.load(store.done_path)
    found = store.reconcile(resumed)
    assert found.removed_temporary == (".shard-000002.jsonl.tmp",)
    assert sorted(store.local_shards()) == [1]
    assert 10 not in resumed and store.next_number(resumed) == 2


def test_crash_between_rename_and_record_append(tmp_path: Path) -> None:
    store = ShardStore(tmp_path / "out")
    done = DoneRecord.load(store.done_path)
    store.commit(done, 1, list(range(10)), _lines(range(10)))
    store.write(2, _lines(range(10, 20)))  # renamed, but the kill came before done.append
    resumed = DoneRecord.load(store.done_path)
    found = store.reconcile(resumed)
    assert found.removed_uncommitted == ("shard-000002.jsonl",)
    assert sorted(store.local_shards()) == [1]
    assert all(i not in resumed for i in range(10, 20))


def test_crash_during_record_append_torn_batch(tmp_path: Path) -> None:
    store = ShardStore(tmp_path / "out")
    done = DoneRecord.load(store.done_path)
    store.commit(done, 1, list(range(10)), _lines(range(10)))
    store.commit(done, 2, list(range(10, 20)), _lines(range(10, 20)))
    data = store.done_path.read_bytes()
    store.done_path.write_bytes(data[:-5])
    resumed = DoneRecord.load(store.done_path)
    found = store.reconcile(resumed)
    assert found.removed_uncommitted == ("shard-000002.jsonl",)
    assert len(resumed) == 10
    # The redo goes into a fresh shard and the record stays consistent.
    store.commit(resumed, store.next_number(resumed), list(range(10, 20)), _lines(range(10, 20)))
    final = DoneRecord.load(store.done_path)
    indices = [
        json.loads(line)["index"]
        for path in sorted(store.local_shards().values())
        for line in path.read_text().splitlines()
    ]
    assert sorted(indices) == list(range(20)) and len(final) == 20


def test_committed_shard_missing_locally_is_reported(tmp_path: Path) -> None:
    store = ShardStore(tmp_path / "out")
    done = DoneRecord.load(store.done_path)
    store.commit(done, 1, [0], _lines(range(1)))
    store.path(1).unlink()
    assert store.reconcile(DoneRecord.load(store.done_path)).missing_committed == (1,)

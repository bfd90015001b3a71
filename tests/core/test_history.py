"""The history store: tiers, the read API, retention, the size cap, re-attach, damage, batching."""

from __future__ import annotations

import itertools
import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest
from ui_helpers import T0, pipeline_status, seven_gpu_fleet

from tui import paths
from tui.history import HistoryError, HistoryRecorder, HistoryStore, Sample, Tier
from tui.history.samples import fleet_samples, pipeline_samples
from tui.pipeline.status import PipelineStatus

START = 1_000_800.0
"""A multiple of every bucket width (5 s, 1 min, 15 min)."""


def steps(points: list[tuple[float, float]]) -> set[float]:
    """The distinct gaps between consecutive buckets."""
    return {b[0] - a[0] for a, b in itertools.pairwise(points)}


def ramp(gpu: int | None, metric: str, start: float, seconds: int, step: float = 1.0) -> list:
    """One sample a second: value = seconds since ``start``."""
    return [Sample(start + i, gpu, metric, step * i) for i in range(seconds)]


def test_the_default_file_is_in_the_state_directory(tmp_path: Path) -> None:
    assert paths.history_file().parent == paths.state_dir()
    store = HistoryStore(paths.history_file())
    store.write([Sample(T0, 0, "util", 50.0)])
    store.close()
    assert paths.history_file().is_file()


def test_a_series_reads_back_as_five_second_means_from_the_finest_tier(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path / "h.sqlite3")
    start = START
    assert store.write(ramp(3, "tok_s", start, 1200)) == 1200
    points = store.series(3, "tok_s", since=start + 600)
    assert points[0] == (start + 600, pytest.approx(602.0))  # mean of 600..604
    assert len(points) == 120 and steps(points) == {5}
    assert store.series(3, "tok_s", since=start + 600, until=start + 620)[-1][0] == start + 620
    assert store.series(4, "tok_s", since=start) == []  # another GPU: nothing
    assert store.series(3, "queued", since=start) == []


def test_a_span_longer_than_the_finest_tier_keeps_reads_a_coarser_one(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path / "h.sqlite3")
    start = START
    store.write([Sample(start + 10 * i, None, "out_tok_s", 3000.0) for i in range(3 * 360)])
    end = start + 10 * (3 * 360 - 1)
    store.prune(end)
    six_hours = store.series(None, "out_tok_s", since=end - 6 * 3600)
    assert steps(six_hours) == {60}  # 1-minute buckets
    assert six_hours[0][0] <= start + 60  # back to the start: tier 0 lost its first hour
    ten_minutes = store.series(None, "out_tok_s", since=end - 600)
    assert steps(ten_minutes) == {10}  # 5 s buckets
    assert store.first_time(None, "out_tok_s") == start


def test_retention_drops_what_each_tier_no_longer_keeps(tmp_path: Path) -> None:
    tiers = (Tier(5, 600), Tier(60, 3600))
    store = HistoryStore(tmp_path / "h.sqlite3", tiers=tiers)
    start = START
    store.write(ramp(0, "util", start, 7200))
    newest = start + 7199
    store.prune(newest)
    fine = store.series(0, "util", since=newest - 600)
    assert fine[0][0] >= newest - 600 - 5 and len(fine) <= 121
    coarse = store.series(0, "util", since=start)
    assert coarse[0][0] >= newest - 3600 - 60  # the coarse tier kept its hour only


def test_the_file_stays_under_its_size_cap_and_keeps_the_newest(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite3"
    cap = 96 * 1024
    store = HistoryStore(path, max_bytes=cap)
    start = START
    deleted = 0
    for minute in range(0, 40, 2):  # 4 GPUs x 5 metrics, one sample a second, for 40 minutes
        t0 = start + 60 * minute
        batch = [
            Sample(t0 + s, gpu, metric, float(s))
            for s in range(120)
            for gpu in range(4)
            for metric in ("util", "mem", "tok_s", "running", "queued")
        ]
        store.write(batch)
        deleted += store.prune(t0 + 119)
        assert store.size_bytes() <= cap
    assert deleted > 0  # 40 minutes are within every tier's retention: the cap deleted them
    newest = start + 40 * 60 - 1
    assert store.series(3, "queued", since=newest - 60)[-1][0] >= newest - 5
    assert path.stat().st_size <= cap + 64 * 1024  # the freed pages went back to the disk


def test_the_history_survives_a_new_console(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite3"
    first = HistoryStore(path)
    first.write(ramp(None, "req_s", START, 60))
    first.close()
    again = HistoryStore(path)
    assert len(again.series(None, "req_s", since=START)) == 12


def test_the_same_samples_written_twice_keep_their_mean(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path / "h.sqlite3")
    samples = ramp(1, "running", START, 10, step=2.0)
    store.write(samples)
    store.write(samples)  # a second console on the same fleet
    assert [v for _, v in store.series(1, "running", since=START)] == [4.0, 14.0]


def test_a_damaged_file_is_named_and_left_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite3"
    path.write_bytes(b"this is not a database, but somebody's notes\n" * 100)
    before = path.read_bytes()
    with pytest.raises(HistoryError, match=r"h\.sqlite3: not a usable history database"):
        HistoryStore(path)
    assert path.read_bytes() == before


def test_another_schema_is_refused_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite3"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE other (x)")
    db.execute("PRAGMA user_version = 7")
    db.commit()
    db.close()
    with pytest.raises(HistoryError, match="history schema 7"):
        HistoryStore(path)


def test_a_snapshot_gives_what_is_known_and_leaves_out_what_is_not() -> None:
    fleet = seven_gpu_fleet()
    samples = fleet_samples(fleet)
    by = {(s.gpu, s.metric): s.value for s in samples}
    assert all(s.t == T0 for s in samples)
    assert by[(1, "util")] == 97.0
    assert by[(1, "mem")] == pytest.approx(100 * 120 * 1024**3 / 143_771_000_832)
    assert by[(1, "tok_s")] == pytest.approx(1401.3)
    assert (by[(1, "running")], by[(1, "queued")]) == (40.0, 11.0)
    assert (2, "tok_s") not in by and (2, "running") not in by  # the failed server
    assert (6, "util") not in by and (6, "tok_s") in by  # no GPU reading, a server


def test_the_pipeline_gives_its_rates_once_per_document_and_only_while_running() -> None:
    status = pipeline_status(tok_s=3456.0)
    samples = pipeline_samples(status)
    assert [(s.gpu, s.metric, s.value) for s in samples] == [
        (None, "out_tok_s", 3456.0),
        (None, "req_s", 6.1),
    ]
    assert pipeline_samples(status, after=status.updated_at) == []
    assert pipeline_samples(replace(status, state="finished")) == []


def test_the_recorder_writes_in_batches_and_prunes(tmp_path: Path) -> None:
    clock = [0.0]
    opened: list[HistoryStore] = []

    def open_store() -> HistoryStore:
        opened.append(HistoryStore(tmp_path / "h.sqlite3"))
        return opened[-1]

    recorder = HistoryRecorder(open_store, flush_s=5.0, clock=lambda: clock[0])
    fleet = seven_gpu_fleet()
    for second in range(4):
        recorder.add_fleet(replace(fleet, taken_at=T0 + second))
        recorder.add_pipeline(pipeline_status(updated_at=T0 + second))
        clock[0] = float(second)
        assert recorder.flush_if_due() == 0  # not due: nothing written, nothing opened
    assert opened == []
    clock[0] = 5.0
    written = recorder.flush_if_due()
    # The slow readings (a window's, the total memory) once a 5 s bucket: at its first snapshot.
    fast = len(fleet_samples(fleet, slow=False))
    assert written == len(fleet_samples(fleet)) + 3 * fast + 4 * 2
    store = recorder.store
    assert store is not None
    assert len(store.series(0, "tok_s", since=T0 - 5)) == 1
    assert len(store.series(None, "out_tok_s", since=T0 - 5)) == 1
    recorder.close()


def test_a_history_that_cannot_be_opened_is_given_up_once_with_why(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite3"
    path.write_text("garbage " * 1000)
    recorder = HistoryRecorder.at(path)
    recorder.add_fleet(seven_gpu_fleet())
    assert recorder.flush() == 0
    assert recorder.error is not None and "h.sqlite3" in recorder.error
    recorder.add_fleet(seven_gpu_fleet())  # ignored from now on, no exception
    assert recorder.flush() == 0
    assert path.read_text() == "garbage " * 1000


def test_idle_time_is_recorded_as_zero_and_only_an_unwatched_time_is_a_gap() -> None:
    """A job that makes no output (no document, stopped, or a document left unwritten) is 0 at
    every reading of a console; before the console has read the document, nothing."""
    recorder = HistoryRecorder(lambda: HistoryStore(":memory:"))
    fleet = seven_gpu_fleet()
    start = 1_000_000.0  # on a bucket's start: each 5 s bucket below holds one case

    def output_at(second: int, status: object = "unchanged") -> float | None:
        if status != "unchanged":
            assert status is None or isinstance(status, PipelineStatus)
            recorder.add_pipeline(status)
        recorder.add_fleet(replace(fleet, taken_at=start + second))
        recorder.flush()
        store = recorder.store
        assert store is not None
        bucket = store.series(None, "out_tok_s", since=start + second, until=start + second)
        return bucket[0][1] if bucket else None

    assert output_at(0) is None  # the job's state is not known yet: nothing, a gap
    running = pipeline_status(updated_at=start + 5, tok_s=3000.0)
    assert output_at(5, running) == 3000.0  # the document's own rate, no zero beside it
    assert output_at(20) is None  # its document 15 s old: still running, nothing from us
    assert output_at(25) == 0.0  # unwritten for 20 s: the job makes no output
    assert output_at(30, replace(running, state="stopped", updated_at=start + 30)) == 0.0
    assert output_at(35, None) == 0.0  # no document at all
    recorder.close()


def test_a_coarser_bucket_is_written_once_it_closes_and_read_while_open(tmp_path: Path) -> None:
    """A minute's bucket is summed in memory while it is open (the console's flush every 5 s
    wrote it again each time) and written when a reading past it arrives, or at close; the store
    that holds it open still shows it, as it is so far."""
    path = tmp_path / "h.sqlite3"
    store = HistoryStore(path, tiers=(Tier(5, 60), Tier(60, 3600)))

    def rows(tier: int) -> list[tuple[int, float, int]]:
        with sqlite3.connect(path) as db:  # the file, as another process reads it
            return db.execute(
                "SELECT t, total, count FROM points WHERE tier = ? ORDER BY t", (tier,)
            ).fetchall()

    store.write(ramp(0, "tok_s", START, 30))  # half a minute: 0..29
    assert rows(1) == [] and len(rows(0)) == 6
    store.write(ramp(0, "tok_s", START + 30, 60, step=1.0))  # to 89 s: the first minute closes
    assert rows(1) == [(int(START), sum(range(30)) + sum(range(30)), 60)]
    store.prune(START + 89)  # the 5 s tier keeps a minute: the minute tier answers
    points = store.series(0, "tok_s", since=START)
    assert points == [(START, pytest.approx(29 / 2 + 0.0)), (START + 60, pytest.approx(44.5))]
    store.close()
    assert [t for t, _, _ in rows(1)] == [int(START), int(START) + 60]  # the open one, at close

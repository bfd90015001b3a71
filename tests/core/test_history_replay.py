"""Record and replay: a simulated run recorded through the console's recorder, then the history
source at a past moment gives the values that were live then (each its bucket's mean, computed
here from the live snapshots); a moment older than the finest tier reads the next one; and
``gpufleet history export`` writes the buckets as CSV and NDJSON."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from history_helpers import record

from tui.fleet.snapshot import ServerState
from tui.history import HistoryStore, Sample
from tui.history.cli import main as history_main
from tui.history.replay import HistorySource

BUCKET_S = 5


async def test_the_source_at_a_past_moment_gives_what_was_live_then(tmp_path: Path) -> None:
    store_path = tmp_path / "history.sqlite3"
    live = await record(tmp_path, store_path)
    # A bucket in the middle of the run: every snapshot taken in it, live.
    start = (int(live[0].taken_at // BUCKET_S) + 1) * BUCKET_S
    then = [s for s in live if start <= s.taken_at < start + BUCKET_S]
    assert len(then) >= 10
    store = HistoryStore(store_path)
    try:
        found = HistorySource(store).snapshot_at(start + 2.5)
    finally:
        store.close()
    assert found is not None and found.bucket_start == start and found.bucket_s == BUCKET_S
    (panel,) = found.snapshot.panels
    assert panel.gpu is not None and panel.server is not None

    def mean(read: Callable[[Any], float | None]) -> float:
        values = [read(s.panels[0]) for s in then]
        return statistics.fmean(v for v in values if v is not None)

    gpu, server = panel.gpu, panel.server
    assert gpu.utilization_gpu == pytest.approx(mean(lambda p: p.gpu.utilization_gpu))
    assert gpu.power_w == pytest.approx(mean(lambda p: p.gpu.power_w))
    assert gpu.memory_used == pytest.approx(mean(lambda p: p.gpu.memory_used), abs=1)
    assert server.state is ServerState.READY
    assert server.gen_throughput == pytest.approx(mean(lambda p: p.server.gen_throughput))
    assert server.running == round(mean(lambda p: p.server.running))
    assert server.token_usage == pytest.approx(mean(lambda p: p.server.token_usage))
    # The slow readings (a window's) are recorded once a bucket: as live at its first snapshot.
    first = then[0].panels[0]
    assert server.latency is not None and server.latency.ttft is not None
    assert first.server is not None and first.server.latency is not None
    assert first.server.latency.ttft is not None
    assert server.latency.ttft.p90 == pytest.approx(first.server.latency.ttft.p90)
    assert server.latency.ttft.count is None  # not recorded: unknown, never invented
    assert first.energy is not None
    assert panel.energy is not None
    assert panel.energy.tokens_per_joule == pytest.approx(first.energy.tokens_per_joule)
    assert found.snapshot.latency is not None  # the fleet's too


def test_an_older_moment_reads_the_next_tier_and_nothing_is_none(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path / "h.sqlite3")
    start = 1_000_800.0
    store.write([Sample(start + i, 0, "tok_s", float(i)) for i in range(3 * 3600)])
    store.prune(start + 3 * 3600)  # the 5 s tier keeps the last 2 hours
    old = HistorySource(store).snapshot_at(start + 30)
    assert old is not None and old.bucket_s == 60 and old.bucket_start == start
    assert old.snapshot.panels[0].server is None  # 'ready' was not recorded: no server
    recent = store.values_at(start + 3 * 3600 - 3)
    assert recent is not None and recent[1] == 5
    assert HistorySource(store).snapshot_at(start - 1000) is None
    store.close()


def test_export_writes_the_buckets_as_csv_and_ndjson(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "h.sqlite3"
    store = HistoryStore(path)
    start = 1_000_800.0
    store.write(
        [Sample(start + i, 2, "tok_s", 100.0 + i) for i in range(10)]
        + [Sample(start + i, None, "out_tok_s", 7.0) for i in range(10)]
    )
    store.close()
    argv = ["export", "--since", str(start), "--until", str(start + 10), "--history", str(path)]
    assert history_main(argv) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [(r["gpu"], r["metric"], float(r["value"]), r["bucket_s"]) for r in rows] == [
        ("", "out_tok_s", 7.0, "5"),
        ("", "out_tok_s", 7.0, "5"),
        ("2", "tok_s", 102.0, "5"),  # the mean of 100..104
        ("2", "tok_s", 107.0, "5"),
    ]
    assert float(rows[0]["t"]) == start and rows[0]["time"].startswith("19")
    assert history_main([*argv, "--format", "ndjson", "--gpu", "2"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["gpu"], r["metric"], r["value"]) for r in lines] == [
        (2, "tok_s", 102.0),
        (2, "tok_s", 107.0),
    ]


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["export", "--since", "yesterday"], "'yesterday' is not an age"),
        (["export", "--since", "1h", "--until", "2h"], "--until is before --since"),
        (["export", "--since", "1h", "--gpu", "x"], "--gpu='x'"),
        (["export"], "the following arguments are required: --since"),
    ],
)
def test_bad_export_input_is_one_line(
    argv: list[str], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) if argv == ["export"] else contextlib.nullcontext():
        assert history_main(argv) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1

"""The replay's port and command line: ``--at``'s forms and range, one line for bad input or no
history, a port that runs nothing ("replay"), a cursor that steps a bucket, jumps to the ends and
follows a history that grows."""

from __future__ import annotations

import asyncio
from datetime import datetime
from pathlib import Path

import pytest

from tui.history import HistoryStore, Sample
from tui.ops.commands import Kill, Kind
from tui.ops.port import Refused
from tui.ops.replay import ReplayFleet, moment, stamp
from tui.ui.replay.cli import main as replay_main

FIRST = 1_000_800.0  # a multiple of every tier's bucket
LAST = FIRST + 1200.0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("-15m", LAST - 900),
        ("+5m", FIRST + 300),
        ("-30s", LAST - 30),
        ("+0.5h", FIRST + 1800),
        (str(FIRST + 60), FIRST + 60),
        (datetime.fromtimestamp(FIRST + 90).isoformat(sep=" "), FIRST + 90),
        (datetime.fromtimestamp(FIRST + 90).astimezone().isoformat(), FIRST + 90),
    ],
)
def test_at_reads_a_time_an_offset_or_epoch_seconds(text: str, expected: float) -> None:
    last = FIRST + 3600 if text == "+0.5h" else LAST
    assert moment(text, FIRST, last) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("yesterday", "give an ISO time"),
        ("15m", "give an ISO time"),  # no sign: before the end or after the start? asked
        ("-1h", "outside the history"),
        ("+21m", "outside the history"),
        (str(FIRST - 1), "outside the history"),
    ],
)
def test_a_bad_at_is_one_line_naming_it_the_forms_and_the_range(text: str, words: str) -> None:
    with pytest.raises(ValueError) as raised:
        moment(text, FIRST, LAST)
    message = str(raised.value)
    assert message.startswith(f"--at={text!r}") and words in message and "\n" not in message
    assert f"{stamp(FIRST)} .. {stamp(LAST)}" in message


def recorded(path: Path, seconds: int = 1200, start: float = FIRST) -> None:
    """GPU 0's utilisation, i % 100 at second i, and its server ready."""
    store = HistoryStore(path)
    store.write(
        [Sample(start + i, 0, "util", float(i % 100)) for i in range(seconds)]
        + [Sample(start + i, 0, "ready", 1.0) for i in range(seconds)]
    )
    store.close()


def test_the_command_says_no_history_bad_at_and_an_empty_history_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "h.sqlite3"
    assert replay_main(["--history", str(path)]) == 2
    err = capsys.readouterr().err
    assert err == f"gpufleet replay: no history at {path} (a console records it while it runs)\n"
    assert not path.exists()  # looking created nothing
    HistoryStore(path).close()
    assert replay_main(["--history", str(path)]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    recorded(path)
    assert replay_main(["--history", str(path), "--at", "-2h"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gpufleet replay: --at='-2h' is ") and err.count("\n") == 1
    assert "outside the history: the history runs" in err


def test_the_port_runs_nothing_and_its_cursor_moves_a_bucket_within_the_range(
    tmp_path: Path,
) -> None:
    path = tmp_path / "h.sqlite3"
    recorded(path)
    store = HistoryStore(path)
    try:
        port = ReplayFleet(store, FIRST + 602)
        assert (port.first, port.last) == (FIRST, FIRST + 1195)
        caps = port.capabilities()
        assert not caps.kinds and all(caps.reason(kind) == "replay" for kind in Kind)
        with pytest.raises(Refused, match="replay"):
            asyncio.run(port.run(Kill((0,))))
        shown = port.snapshot_now()
        assert shown.taken_at == FIRST + 602
        assert shown.gpu_source == f"replay {stamp(FIRST + 602)} · 5 s means"
        (panel,) = shown.panels
        assert panel.gpu is not None and panel.gpu.utilization_gpu == 2.0  # mean of 0..4
        port.step(-1)
        back = port.snapshot_now().panels[0]
        assert back.gpu is not None and back.gpu.utilization_gpu == 97.0
        port.step(seconds=-3600)
        assert port.cursor == FIRST
        port.jump(to_end=True)
        assert port.snapshot_now().taken_at == FIRST + 1195
        # Another console records more: following keeps the cursor on the newest moment.
        port.follow()
        more = HistoryStore(path)
        more.write([Sample(FIRST + 1200 + i, 0, "util", 50.0) for i in range(10)])
        more.close()
        followed = port.snapshot_now()
        assert followed.taken_at == FIRST + 1205 and "following" in followed.gpu_source
        assert followed.panels[0].server is None  # 'ready' not recorded then: no server
    finally:
        store.close()

"""The console's command line and the default log tail source."""

from __future__ import annotations

from pathlib import Path

import pytest

from tui.logs.long_lines import tail_lines as tail_file
from tui.ui.cli import main, parse_range


def test_parse_range_accepts_ranges_and_lists() -> None:
    assert parse_range("30000-30002", "--ports", 1, 65535) == (30000, 30001, 30002)
    assert parse_range("0,2,5", "--gpus", 0, 15) == (0, 2, 5)


@pytest.mark.parametrize("text", ["a-b", "7-3", "16", ""])
def test_parse_range_names_field_value_and_range(text: str) -> None:
    with pytest.raises(ValueError, match="--gpus") as error:
        parse_range(text, "--gpus", 0, 15)
    assert repr(text) in str(error.value)


def test_mismatched_ports_and_gpus_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--ports", "30000-30006", "--gpus", "0-3"]) == 2
    assert "7 ports but --gpus gives 4 GPUs" in capsys.readouterr().err


def test_tail_file_returns_the_last_lines(tmp_path: Path) -> None:
    log = tmp_path / "sglang_gpu0.log"
    log.write_text("".join(f"line {i}\n" for i in range(1000)))
    assert tail_file(log, 3) == ["line 997", "line 998", "line 999"]
    assert tail_file(tmp_path / "missing.log", 3) == []


def test_tail_file_reads_only_the_end_of_a_large_file(tmp_path: Path) -> None:
    log = tmp_path / "big.log"
    with log.open("wb") as handle:
        handle.truncate(64 << 20)  # sparse 64 MiB of zeros, then real lines
        handle.seek(0, 2)
        handle.write(b"partial\nlast one\n")
    assert tail_file(log, 1) == ["last one"]


@pytest.mark.parametrize("window", [1.0, 5.0, 30.0, 600.0, 3600.0])
def test_the_console_canary_follows_the_measure_window(window: float) -> None:
    from tui.ui.cli import MEASURE_WINDOW_RANGE_S, console_canary_options

    assert MEASURE_WINDOW_RANGE_S[0] <= window <= MEASURE_WINDOW_RANGE_S[1]
    options = console_canary_options(window)
    assert options.errors() == []  # valid across the whole --measure-window range
    assert options.window_s >= window and options.max_window_s == 3 * options.window_s
    assert options.window_s / options.interval_s >= 6  # enough paired samples for a look
    if window >= 6.0:  # long enough for 0.5 s samples: the window is exactly what was asked
        assert options.window_s == window and options.warmup_s == pytest.approx(window / 3)

"""The preflight's calibration cache: a full parse's sizes, reading only what was appended."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from repo_paths import FIXTURES

from tui.logs import parser
from tui.logs.parser import parse_line
from tui.retune import calibration as calibration_module
from tui.retune.calibration import CalibrationCache, LaunchSizes, scan_calibration

SEED = (FIXTURES / "retune" / "aggressive_gpu0.log").read_text()
DECODE = (
    "[2026-05-09 22:19:01] Decode batch, #running-req: 40, #full token: 431208, full token "
    "usage: 0.54, mamba num: 80, mamba usage: 0.40, accept len: 2.71, accept rate: 0.68, cuda "
    "graph: True, gen throughput (token/s): 1402.31, #queue-req: 12\n"
)
SECOND_LAUNCH = (
    "[2026-05-09 23:00:00] server_args=ServerArgs(model_path='Qwen/Qwen3.6-27B-FP8')\n"
    "[2026-05-09 23:00:20] Load weight end. type=Qwen3NextForCausalLM, dtype=torch.bfloat16, "
    "avail mem=123.41 GB, mem usage=30.00 GB.\n"
    "[2026-05-09 23:00:28] Mamba Cache is allocated. max_mamba_cache_size: 96, conv_state size: "
    "0.26GB, ssm_state size: 13.57GB\n"
)


def full_parse(text: str) -> LaunchSizes:
    """Every line through the parser: what the cache must agree with."""
    sizes = LaunchSizes()
    for raw in text.splitlines():
        event = parse_line(raw)
        if event is not None:
            sizes.feed(event)
    return sizes


@pytest.mark.parametrize(
    "text",
    [
        SEED,
        SEED + DECODE * 50,
        SEED + DECODE * 5 + SECOND_LAUNCH + DECODE * 5,
        (FIXTURES / "logs" / "sglang-log-samples.txt").read_text(),
        (FIXTURES / "retune" / "oom_chain.log").read_text(),
    ],
    ids=["seed", "seed-then-decode", "two-launches", "log-samples", "oom-chain"],
)
def test_the_anchored_scan_agrees_with_parsing_every_line(tmp_path: Path, text: str) -> None:
    log = tmp_path / "server.log"
    log.write_text(text)
    assert scan_calibration(log) == full_parse(text).calibration()


def test_a_small_chunk_size_changes_nothing(tmp_path: Path) -> None:
    text = SEED + DECODE * 20 + SECOND_LAUNCH
    log = tmp_path / "server.log"
    log.write_text(text)
    # 97 bytes: lines straddle every chunk boundary, and some lines are longer than a chunk
    assert CalibrationCache(chunk_bytes=97).get(log) == CalibrationCache().get(log)
    assert CalibrationCache().get(log) == full_parse(text).calibration()


def test_the_second_call_parses_only_the_appended_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "server.log"
    log.write_text(SEED + DECODE * 100)
    cache = CalibrationCache()
    first = cache.get(log)
    assert first is not None
    parsed: list[str] = []

    def counting(text: str, line: int = 0) -> object:
        parsed.append(text)
        return parser.parse_line(text, line)

    monkeypatch.setattr(calibration_module, "parse_line", counting)
    assert cache.get(log) == first
    assert parsed == []  # nothing new: nothing read, nothing parsed
    with log.open("a") as handle:
        handle.write(DECODE * 100 + SECOND_LAUNCH)
    second = cache.get(log)
    # only the appended launch's anchored lines were parsed, none of the old ones
    assert len(parsed) == 3
    assert second == full_parse(SECOND_LAUNCH).calibration()
    assert second is not None and second.weight_bytes == round(30.0 * 1024**3)


def test_a_rotated_log_is_read_from_its_start(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(SECOND_LAUNCH + DECODE * 10)
    cache = CalibrationCache()
    before = cache.get(log)
    assert before is not None and before.weight_bytes == round(30.0 * 1024**3)
    # what rotate_log does on a relaunch: the old file moves away, a new one takes the path
    os.rename(log, tmp_path / "server.log.1")
    log.write_text(SEED)
    after = cache.get(log)
    assert after == full_parse(SEED).calibration()
    assert after is not None and after.weight_bytes != before.weight_bytes


def test_a_truncated_log_is_read_again(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(SEED + DECODE * 10)
    cache = CalibrationCache()
    assert cache.get(log) == full_parse(SEED).calibration()
    with log.open("w") as handle:  # same inode, shorter
        handle.write(SECOND_LAUNCH)
    assert cache.get(log) == full_parse(SECOND_LAUNCH).calibration()


def test_a_line_being_written_counts_but_is_read_again_once_complete(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    head, _, last = SECOND_LAUNCH.rstrip("\n").rpartition("\n")
    log.write_text(head + "\n" + last[:60])  # the Mamba line cut before its numbers
    cache = CalibrationCache()
    cut = cache.get(log)
    assert cut is not None and cut.ssm_state_bytes is None
    with log.open("a") as handle:
        handle.write(last[60:] + "\n")
    whole = cache.get(log)
    assert whole == full_parse(SECOND_LAUNCH).calibration()
    assert whole is not None and whole.ssm_state_bytes == round(13.57 * 1024**3 / 97)


def test_a_missing_or_unreadable_log_has_no_calibration(tmp_path: Path) -> None:
    cache = CalibrationCache()
    assert cache.get(tmp_path / "missing.log") is None
    assert cache.get(tmp_path) is None  # a directory
    with pytest.raises(ValueError, match="chunk_bytes"):
        CalibrationCache(chunk_bytes=0)

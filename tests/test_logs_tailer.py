"""LogTailer: new lines only, partial lines, truncation, rotation, huge sparse files."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tui.logs.tailer import LogTailer


def _append(path: Path, text: str) -> None:
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(text)


def test_missing_file_is_empty_then_read_from_start(tmp_path: Path) -> None:
    path = tmp_path / "server.log"
    tailer = LogTailer(path)
    assert tailer.read_new() == []
    _append(path, "one\ntwo\n")
    assert tailer.read_new() == ["one", "two"]
    assert tailer.line_base == 2


def test_only_new_complete_lines(tmp_path: Path) -> None:
    path = tmp_path / "server.log"
    _append(path, "a\nb\n")
    with LogTailer(path) as tailer:
        assert tailer.read_new() == ["a", "b"]
        assert tailer.read_new() == []
        _append(path, "c\npart")
        assert tailer.read_new() == ["c"]
        _append(path, "ial\r\n")
        assert tailer.read_new() == ["partial"]
        _append(path, "d\n")
        first, data = tailer.read_new_numbered()
        assert (first, data) == (5, b"d\n")


def test_truncation_restarts_from_zero(tmp_path: Path) -> None:
    path = tmp_path / "server.log"
    _append(path, "old 1\nold 2\nold 3\n")
    tailer = LogTailer(path)
    assert len(tailer.read_new()) == 3
    path.write_text("new\n")
    assert tailer.read_new_numbered() == (1, b"new\n")
    assert tailer.truncations == 1


def test_rotation_drains_old_file_then_reads_new_from_start(tmp_path: Path) -> None:
    path = tmp_path / "server.log"
    _append(path, "first\n")
    tailer = LogTailer(path)
    assert tailer.read_new() == ["first"]
    _append(path, "late line of the old file\nunterminated")
    path.rename(tmp_path / "server.log.1")
    _append(path, "fresh 1\nfresh 2\n")
    assert tailer.read_new() == ["late line of the old file", "unterminated"]
    assert tailer.rotations == 1
    assert tailer.read_new_numbered() == (1, b"fresh 1\nfresh 2\n")


def test_deleted_file_drains_then_waits(tmp_path: Path) -> None:
    path = tmp_path / "server.log"
    _append(path, "x\n")
    tailer = LogTailer(path)
    tailer.read_new()
    _append(path, "y\n")
    path.unlink()
    assert tailer.read_new() == ["y"]
    assert tailer.read_new() == []
    _append(path, "z\n")
    assert tailer.read_new() == ["z"]


def test_attach_to_huge_sparse_file_reads_only_the_tail(tmp_path: Path) -> None:
    path = tmp_path / "huge.log"
    with open(path, "wb") as handle:
        handle.truncate(5 * 1024**3)  # 5 GB of holes: costs no disk
        handle.seek(0, os.SEEK_END)
        handle.write(b"cut line without its start\n")
        handle.write(b"[2026-05-09 22:18:34] tail line 1\n[2026-05-09 22:18:35] tail line 2\n")
    tailer = LogTailer(path, attach_bytes=64)
    started = time.perf_counter()
    lines = tailer.read_new()
    assert time.perf_counter() - started < 2.0
    assert lines == ["[2026-05-09 22:18:35] tail line 2"]  # the window's cut first line is dropped
    assert tailer.line_base is None  # attached mid-file: line numbers unknown
    assert tailer.read_new_numbered() == (0, b"")
    _append(path, "more\n")
    assert tailer.read_new_numbered() == (0, b"more\n")


def test_attach_window_starting_on_a_line_boundary_keeps_that_line(tmp_path: Path) -> None:
    path = tmp_path / "server.log"
    path.write_bytes(b"0123456\nabc\n")
    assert LogTailer(path, attach_bytes=4).read_new() == ["abc"]


def test_bad_arguments_name_the_field(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="attach_bytes must be >= 1, got 0"):
        LogTailer(tmp_path / "x", attach_bytes=0)
    with pytest.raises(ValueError, match="max_read_bytes"):
        LogTailer(tmp_path / "x", max_read_bytes=-1)


def test_max_read_bytes_bounds_each_call(tmp_path: Path) -> None:
    path = tmp_path / "server.log"
    path.write_text("".join(f"line {i}\n" for i in range(100)))
    tailer = LogTailer(path, max_read_bytes=64)
    seen: list[str] = []
    for _ in range(100):
        batch = tailer.read_new()
        assert len("\n".join(batch)) <= 128
        seen += batch
        if len(seen) == 100:
            break
    assert seen == [f"line {i}" for i in range(100)]

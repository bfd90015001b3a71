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


# --- long lines (issue 36: a 50 MB line, 500 MB without a newline) ------------------------------


def test_a_line_past_the_cap_is_its_first_bytes_and_a_mark(tmp_path: Path) -> None:
    from tui.logs.long_lines import LINE_CAP_BYTES, cap_lines, cut_mark

    path = tmp_path / "server.log"
    _append(path, "before\n" + "x" * 3_000_000 + "\nafter\n")
    tailer = LogTailer(path)
    lines = tailer.read_new()
    assert lines[0] == "before" and lines[2] == "after" and len(lines) == 3
    assert lines[1] == "x" * LINE_CAP_BYTES + cut_mark(3_000_000 - LINE_CAP_BYTES).decode()
    assert (tailer.lines_cut, tailer.bytes_skipped) == (1, 3_000_000 - LINE_CAP_BYTES)
    assert tailer.line_base == 3  # every line counted as before
    # Lines of exactly the cap and chunks of short lines are returned as they are.
    whole = b"a" * 10 + b"\n" + b"b" * 16 + b"\n" + b"c" * 3 + b"\n"
    assert cap_lines(whole, 16).data == whole
    assert cap_lines(b"a" * 17 + b"\nb\n", 16).data == b"a" * 16 + cut_mark(1) + b"\nb\n"


def test_a_line_without_end_is_never_held_past_the_cap(tmp_path: Path) -> None:
    """32 MiB without a newline, appended while the follower polls: it holds the cap, not the
    line (500 MB grew the console to 792 MB), and the line comes out cut when it ends."""
    import tracemalloc

    path = tmp_path / "server.log"
    _append(path, "start\n")
    tailer = LogTailer(path, max_read_bytes=1 << 20)
    assert tailer.read_new() == ["start"]
    tracemalloc.start()
    try:
        for _ in range(32):
            with open(path, "ab") as handle:
                handle.write(b"y" * (1 << 20))
            assert tailer.read_new() == []
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, peak  # a read's chunk and the cap, not the 32 MiB line
    _append(path, "z\nnext\n")
    lines = tailer.read_new()
    assert len(lines) == 2 and lines[1] == "next"
    assert lines[0].startswith("y" * 1000) and "more bytes of this line not kept]" in lines[0]
    assert tailer.bytes_skipped == (32 << 20) + 1 - tailer.line_cap


def test_attaching_inside_a_long_line_never_reads_it_whole(tmp_path: Path) -> None:
    path = tmp_path / "server.log"
    _append(path, "old\n" + "q" * 3_000_000)  # still being written
    tailer = LogTailer(path, attach_bytes=1000)
    assert tailer.read_new() == []
    _append(path, "q\nfresh\n")
    assert tailer.read_new() == ["fresh"]  # the cut line's rest is not a line


def test_the_newest_lines_are_found_past_a_long_last_line(tmp_path: Path) -> None:
    """The detail screen's first read: a 3 MB last line used to fill the 1 MiB read and leave
    the panel empty; the lines before it are shown, and it cut."""
    from tui.logs.long_lines import LINE_CAP_BYTES, tail_lines

    path = tmp_path / "server.log"
    _append(path, "".join(f"line {i}\n" for i in range(50)) + "w" * 3_000_000 + "\n")
    lines = tail_lines(path, 10)
    assert lines[:9] == [f"line {i}" for i in range(41, 50)]
    assert lines[9].startswith("w" * LINE_CAP_BYTES + " [... ")
    assert tail_lines(path, 1000)[0] == "line 0" and len(tail_lines(path, 1000)) == 51
    _append(path, "partial")
    assert tail_lines(path, 2)[-1] == "partial"
    assert tail_lines(tmp_path / "missing.log", 5) == []

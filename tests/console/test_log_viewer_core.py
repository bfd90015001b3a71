"""The log viewer's pure parts: filters, line kinds, the scrollback, the search, the pager argv."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tui.control.launch import rotate_log
from tui.ui.detail import log_search
from tui.ui.detail.log_buffer import LogBuffer
from tui.ui.detail.log_filter import FilterError, LineFilter, LineKind, compile_filter, line_kind
from tui.ui.detail.log_search import log_files, search_logs
from tui.ui.detail.pager import PagerError, pager_argv

OOM = (
    "[2026-05-09 22:19:30] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
    "2.50 GiB. GPU 5 has a total capacity of 178.35 GiB of which 1.02 GiB is free."
)
KV = (
    "[2026-05-09 22:18:28] KV Cache is allocated. #tokens: 798080, K size: 24.36 GB, "
    "V size: 24.36 GB"
)
DECODE = (
    "[2026-05-09 22:19:01] Decode batch, #running-req: 40, #full token: 431208, full token usage: "
    "0.54, mamba num: 80, mamba usage: 0.40, accept len: 2.71, accept rate: 0.68, cuda graph: "
    "True, gen throughput (token/s): 1402.31, #queue-req: 12"
)


def test_filters_are_smart_cased_and_a_bad_one_is_one_line_naming_the_field() -> None:
    lower = compile_filter("filter", "decode")
    assert lower is not None and lower.search("Decode batch")
    upper = compile_filter("filter", "Decode")
    assert upper is not None and upper.search("decode batch") is None
    assert compile_filter("filter", "") is None
    with pytest.raises(FilterError) as bad:
        compile_filter("exclude", "gen (token")
    assert (
        str(bad.value) == "exclude /gen (token/: missing ), unterminated subpattern at position 4"
    )
    keep = LineFilter(compile_filter("filter", "batch"), compile_filter("exclude", "prefill"))
    assert keep.keeps(DECODE) and not keep.keeps("Prefill batch, #new-seq: 1")
    assert not keep.keeps(OOM) and not LineFilter().active


def test_the_parser_says_which_lines_are_errors_and_allocations() -> None:
    assert line_kind(OOM) is LineKind.ERROR
    assert line_kind(KV) is LineKind.ALLOCATION
    assert line_kind(DECODE) is None
    assert line_kind("anything else") is None


def test_the_scrollback_drops_the_oldest_and_keeps_the_selection() -> None:
    buffer = LogBuffer(max_lines=100)
    buffer.set_filter(LineFilter(compile_filter("filter", "7$")))
    dropped = 0
    for block in range(12):
        dropped += buffer.append([f"line {block * 10 + i}" for i in range(10)])
    assert len(buffer.lines) <= 110 and buffer.first >= 10
    assert [buffer.line(n) for n in buffer.shown] == [
        f"line {n}" for n in range(buffer.first, 120) if n % 10 == 7
    ]
    assert dropped == 2  # "line 7" and "line 17" showed, then went
    buffer.set_filter(LineFilter())
    assert len(buffer.shown) == len(buffer.lines)
    buffer.clear()
    assert buffer.lines == [] and buffer.end == 120


def write_rotated(path: Path, launches: list[list[str]]) -> None:
    """Each launch writes its lines, then the next relaunch rotates it, as the launcher does."""
    for index, lines in enumerate(launches):
        if index:
            rotate_log(path)
        path.write_text("".join(line + "\n" for line in lines))


def test_search_reads_every_rotation_oldest_first_with_line_numbers(tmp_path: Path) -> None:
    log = tmp_path / "sglang_gpu5.log"
    write_rotated(
        log,
        [
            [DECODE] * 3 + [OOM],
            [KV] + [DECODE] * 5,
            [DECODE, "tail", OOM, DECODE],
        ],
    )
    files = log_files(log)
    assert [p.name for p in files] == ["sglang_gpu5.log.2", "sglang_gpu5.log.1", "sglang_gpu5.log"]
    pattern = compile_filter("search", "out of memory")
    assert pattern is not None
    result = search_logs(files, pattern)
    assert [(h.path.name, h.line) for h in result.hits] == [
        ("sglang_gpu5.log.2", 4),
        ("sglang_gpu5.log", 3),
    ]
    assert result.total == 2 and result.scanned_bytes == sum(p.stat().st_size for p in files)
    excluded = search_logs(files, re.compile("batch"), re.compile("#queue-req: 12"))
    assert excluded.total == 0


def test_search_streams_a_large_log_and_keeps_only_the_newest_hits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(log_search, "BLOCK_BYTES", 4096)  # many blocks, lines across their edges
    log = tmp_path / "big.log"
    with log.open("w") as handle:
        for i in range(20_000):
            handle.write(f"{DECODE} n={i}\n" if i % 1000 else f"{OOM} n={i}\n")
    reads: list[int] = []
    result = search_logs(
        [log], re.compile(r"CUDA out of memory"), max_hits=5, progress=lambda s, t: reads.append(s)
    )
    assert result.total == 20
    assert [h.line for h in result.hits] == [15001, 16001, 17001, 18001, 19001]
    assert all(h.text.endswith(f"n={h.line - 1}") for h in result.hits)
    assert len(reads) > 100 and reads[-1] == log.stat().st_size  # read in blocks, not whole
    anchored = search_logs([log], re.compile(r"^\[[^]]*\] torch\."))
    assert anchored.total == 20  # ^ still means a line's start inside a block
    stopped = search_logs([log], re.compile("x"), cancelled=lambda: True)
    assert stopped.cancelled and stopped.scanned_bytes == 0


def test_the_pager_argv_is_the_operators_words_then_the_file(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    assert pager_argv(log, env={}) == ["less", "+G", str(log)]
    assert pager_argv(log, 120, env={"PAGER": "less -R"}) == ["less", "-R", "+120", str(log)]
    assert pager_argv(log, 5, env={"PAGER": "/usr/bin/most -s"}) == [
        "/usr/bin/most",
        "-s",
        str(log),
    ]
    semicolon = pager_argv(log, env={"PAGER": "more; rm -rf /"})
    assert semicolon == ["more;", "rm", "-rf", "/", str(log)]  # words, never a shell
    with pytest.raises(PagerError, match="PAGER='less \"-R': cannot be split"):
        pager_argv(log, env={"PAGER": 'less "-R'})

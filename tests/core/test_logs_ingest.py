"""ingest_bytes/ingest_file equal per-line parsing; LogState folds events into panel state."""

from __future__ import annotations

from pathlib import Path

import pytest
from logs_helpers import FIXTURES, startup_block, steady_lines, write_synthetic_log

from tui.logs.events import RARE_KINDS, LogEvent
from tui.logs.ingest import ingest_bytes, ingest_file
from tui.logs.parser import parse_line
from tui.logs.state import LogState


def _reference(lines: list[str]) -> tuple[list[LogEvent], LogEvent | None, LogEvent | None]:
    events = [parse_line(text, i) for i, text in enumerate(lines, start=1)]
    found = [e for e in events if e is not None]
    decodes = [e for e in found if e.kind == "decode"]
    prefills = [e for e in found if e.kind == "prefill"]
    return (
        [e for e in found if e.kind in RARE_KINDS],
        decodes[-1] if decodes else None,
        prefills[-1] if prefills else None,
    )


def test_ingest_file_equals_parsing_every_line(tmp_path: Path) -> None:
    path = tmp_path / "gen.log"
    write_synthetic_log(path, 3_000_000, seed=7)
    lines = path.read_bytes().decode().split("\n")[:-1]
    rare, decode, prefill = _reference(lines)
    summary = ingest_file(path, chunk_bytes=64 * 1024)  # many chunks, lines cut across them
    assert summary.rare == tuple(rare)
    assert summary.latest_decode == decode and summary.latest_prefill == prefill
    assert summary.lines == len(lines)
    assert summary.decode_lines == sum("Decode batch" in t for t in lines)
    assert len(rare) > len(startup_block())  # the sprinkled OOMs and the final sigquit


def test_ingest_of_every_fixture_equals_parsing_every_line(tmp_path: Path) -> None:
    for name in (
        "sglang-log-samples.txt",
        "seed-lines.txt",
        "ops-examples.txt",
        "sglang-0523-lines.txt",
    ):
        data = (FIXTURES / name).read_bytes()
        lines = data.decode().split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        rare, decode, prefill = _reference(lines)
        summary = ingest_bytes(data, first_line=1)
        assert list(summary.rare) == rare, name
        assert (summary.latest_decode, summary.latest_prefill) == (decode, prefill), name


def test_rare_line_in_the_middle_of_traffic_is_found_with_its_line_number() -> None:
    traffic = steady_lines(5000, seed=3)
    oom = "[2026-05-09 23:00:00] RuntimeError: CUDA error: out of memory"
    lines = [*traffic[:2500], oom, *traffic[2500:]]
    summary = ingest_bytes(("\n".join(lines) + "\n").encode(), first_line=10)
    assert [(e.kind, e.line, e.fields["reason"]) for e in summary.rare] == [("error", 2510, "oom")]
    unknown = ingest_bytes(("\n".join(lines) + "\n").encode())
    assert unknown.rare[0].line == 0


def test_ingest_file_rejects_a_bad_chunk_size(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="chunk_bytes must be >= 1, got 0"):
        ingest_file(tmp_path / "x", chunk_bytes=0)


def test_log_state_follows_a_launch_to_ready_then_failure() -> None:
    state = LogState(history=3)
    phases = []
    for text in startup_block():
        event = parse_line(text)
        assert event is not None, text
        state.apply(event)
        phases.append(state.phase)
    assert phases[2] == "loading weights"
    assert "allocating KV cache" in phases and "capturing CUDA graphs" in phases
    assert phases[-2] == "warming up" and phases[-1] == "ready"
    view = state.view()
    assert (view.kv_tokens, view.mamba_slots) == (798080, 200)
    assert (view.max_running_requested, view.max_running_effective, view.capped) == (64, 40, True)
    assert view.available_gpu_mem_gb == 15.9
    assert len(view.allocation_lines) == 6
    state.apply_summary(ingest_bytes(("\n".join(steady_lines(50)) + "\n").encode()))
    view = state.view()
    assert view.running is not None and view.gen_throughput == view.throughput_history[-1]
    state.apply_summary(ingest_bytes(b"Killed\n"))
    view = state.view()
    assert (view.phase, view.failed, view.error_reason, view.last_error) == (
        "failed",
        True,
        "killed",
        "Killed",
    )
    relaunch = parse_line(startup_block()[0])
    assert relaunch is not None
    state.apply(relaunch)
    assert not state.view().failed and state.view().phase == "starting"


def test_log_state_rejects_bad_sizes() -> None:
    with pytest.raises(ValueError, match="history must be >= 1, got 0"):
        LogState(history=0)


def test_log_state_keeps_pressure_apart_from_the_fatal_error() -> None:
    state = LogState()
    block = startup_block()
    for text in block:
        event = parse_line(text)
        assert event is not None
        state.apply(event)
    retract = (
        "[2026-11-02 10:11:14] KV cache pool is full. Retract requests. #retracted_reqs: 3, "
        "#new_tokens_gained: 24576, #mamba_num_gained: 15, #new_token_ratio: 0.7000 -> 0.8400"
    )
    traffic = steady_lines(40)
    chunk = "\n".join([*traffic[:20], retract, *traffic[20:]]) + "\n"
    state.apply_summary(ingest_bytes(chunk.encode()))
    view = state.view()
    assert not view.failed and view.last_error is None and view.phase == "ready"
    assert (view.pressure_reason, view.pressure_retracted) == ("retract", 3)
    assert view.pressure_stamp == "2026-11-02 10:11:14" and view.pressure_events == 1
    assert view.prefill_lines == sum("Prefill batch" in t for t in traffic)
    crash = (FIXTURES / "sglang-0523-lines.txt").read_text().splitlines()
    state.apply_summary(ingest_bytes(("\n".join(crash[:4]) + "\n").encode()))
    view = state.view()
    assert (view.pressure_reason, view.pressure_events) == ("prefill_oom", 2)
    assert view.failed and view.error_fatal and view.error_reason == "scheduler_exception"
    state.apply_summary(ingest_bytes((crash[4] + "\n").encode()))  # the traceback's last line
    assert state.view().error_reason == "oom" and state.view().error_fatal


def test_a_non_fatal_error_leaves_the_server_serving() -> None:
    state = LogState()
    line = (FIXTURES / "sglang-0523-lines.txt").read_text().splitlines()[19]
    state.apply_summary(ingest_bytes((line + "\n").encode()))
    view = state.view()
    assert view.error_reason == "input_too_long" and not view.error_fatal and not view.failed


def test_counting_prefill_lines_without_parsing_the_last_gives_the_same_view() -> None:
    # The console's follower skips the last prefill line's parse (last_prefill=False): its view
    # must not change, the prefill count included (a progress signal for the liveness watch).
    block = "\n".join(startup_block()) + "\n"
    chunks = ["\n".join(steady_lines(n)) + "\n" for n in (40, 7, 1)]
    views = []
    for last_prefill in (True, False):
        state = LogState()
        for chunk in (block, *chunks):
            summary = ingest_bytes(chunk.encode(), last_prefill=last_prefill)
            assert (summary.latest_prefill is None) is (
                not last_prefill or not summary.prefill_lines
            )
            state.apply_summary(summary)
        views.append(state.view())
    assert views[0] == views[1]
    assert (
        views[1].prefill_lines
        == sum("Prefill batch" in t for n in (40, 7, 1) for t in steady_lines(n))
        > 0
    )

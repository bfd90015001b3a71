"""What the console reads from a real SGLang 0.5.17 server, read from what one answered
(``tests/fixtures/real_sglang/0.5.17``): ``/server_info``, ``/metrics``, ``/get_load``, and its log
after a clean drain (exit -9 by ``kill_process_tree``: a stop, not a failure)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from repo_paths import FIXTURES

from tui.logs import events as ev
from tui.logs.blocks import read_records
from tui.logs.state import LogState
from tui.servers.payloads import (
    METRIC_NAMES,
    parse_loads_json,
    parse_metrics,
    parse_server_info,
)

REAL = FIXTURES / "real_sglang" / "0.5.17"
INFOS = sorted(REAL.glob("*/server_info*.json"))


def _log_events(name: str) -> list[ev.LogEvent]:
    lines = (REAL / name / "server.log").read_text().split("\n")[:-1]
    return [r.event for r in read_records(lines) if r.event is not None]


def _flag(argv: list[str], flag: str) -> int | None:
    return int(argv[argv.index(flag) + 1]) if flag in argv else None


@pytest.mark.parametrize("path", INFOS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_server_info_gives_the_effective_values_the_log_printed(path: Path) -> None:
    """``max_running_requests`` at the top is the flag (48 once reset for speculative decoding,
    None when auto); the effective one is ``internal_states[0]``'s, the summary line's; the Mamba
    pool is the internal (resolved) one, the Mamba line's; the KV pool the top level's."""
    name = path.parent.name
    info = parse_server_info(json.loads(path.read_text()))
    events = _log_events(name)
    summary = next(e for e in events if e.kind == ev.POOL)
    mamba = next(e for e in events if e.kind == ev.MAMBA_CACHE)
    argv = json.loads((REAL / name / "stop.json").read_text())["argv"]
    requested = _flag(argv, "--max-running-requests")
    if requested is None and "--speculative-algorithm" in argv:
        requested = 48  # "Max running requests is reset to 48 for speculative decoding"
    assert info.max_running_requested == requested
    assert info.max_running_effective == summary.get("max_running_requests")
    assert info.max_mamba_cache_size == mamba.get("max_mamba_cache_size")
    assert info.max_total_num_tokens == summary.get("max_total_num_tokens")
    assert info.version == "0.5.17"
    # The draft as the server runs it (NEXTN is EAGLE's alias), its steps; None without one.
    speculative = "--speculative-algorithm" in argv
    assert info.spec_algorithm == ("EAGLE" if speculative else None)
    assert info.spec_num_steps == _flag(argv, "--speculative-num-steps")
    assert info.spec_draft_tokens == _flag(argv, "--speculative-num-draft-tokens")


@pytest.mark.parametrize("name", ["base", "cap", "spec"])
def test_metrics_of_a_real_0517_server(name: str) -> None:
    body = (REAL / name / "metrics.txt").read_bytes()
    families = {line.split(b"{")[0].split(b" ")[0].decode() for line in body.splitlines()}
    assert set(METRIC_NAMES) <= families  # every family the console reads, by its 0.5.17 name
    load = parse_metrics(body)
    stop = json.loads((REAL / name / "stop.json").read_text())
    assert load.running == stop["running_at_stop"]
    assert load.queued == (2 if name == "cap" else 0)
    assert load.token_usage is not None and load.token_usage < 0.01  # full_token_usage
    assert load.mamba_usage is not None and load.mamba_usage > 0.29
    # 0.5.17 exports spec_accept_length = 0.0 without speculative decoding: no accept length.
    assert load.accept_len == (1.0 if name == "spec" else None)
    assert len(load.progress) == 4


@pytest.mark.parametrize("name", ["base", "cap", "spec"])
def test_pools_and_speculative_state_of_a_real_0517_server(name: str) -> None:
    """Each pool apart (SGLang's token_usage is their maximum: Mamba pressure read as KV), the
    prefix cache hit rate, and the draft's steps: 0 without one, as 0.5.17 exports them."""
    text = (REAL / name / "metrics.txt").read_text()
    load = parse_metrics(text)
    gauges = {
        line.split("{")[0]: float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("sglang:") and "_bucket" not in line
    }
    assert load.token_usage == gauges["sglang:full_token_usage"]
    assert load.mamba_usage == gauges["sglang:mamba_usage"]
    assert load.swa_usage == gauges["sglang:swa_token_usage"] == 0.0
    assert load.cache_hit_rate == gauges["sglang:cache_hit_rate"]
    assert gauges["sglang:token_usage"] == pytest.approx(
        max(load.mamba_usage, load.token_usage), abs=0.01
    )
    assert load.spec_num_steps == (3 if name == "spec" else 0)
    assert load.spec_accept_rate == gauges["sglang:spec_accept_rate"]
    assert load.generation_tokens == gauges["sglang:generation_tokens_total"]


def test_get_load_of_a_real_0517_server() -> None:
    rows = json.loads((REAL / "base" / "get_load.json").read_text())
    load = parse_loads_json(rows, "/get_load")
    assert (load.source, load.running, load.queued) == ("/get_load", 0, 0)


@pytest.mark.parametrize("name", ["base", "spec", "graph", "auto", "noradix", "extra"])
def test_a_clean_0517_drain_is_a_stop_not_a_failure(name: str) -> None:
    """The drain ends in ``kill_process_tree ... include_parent=True`` (exit -9, stop.json), with
    every request answered: nothing in the log makes it a failure."""
    stop = json.loads((REAL / name / "stop.json").read_text())
    assert (stop["stop_mode"], stop["exit_code"], stop["lost"]) == ("drain", -9, 0)
    state = LogState()
    for event in _log_events(name):
        state.apply(event)
    view = state.view()
    assert view.stopping and view.ready
    assert not view.failed and view.last_error is None and view.phase == "shutting down"


def test_a_group_sigterm_is_a_stop_that_crashed() -> None:
    """The group SIGTERM: SIGTERM first (a stop), then the scheduler's -15 (a crash)."""
    state = LogState()
    for event in _log_events("cap"):
        state.apply(event)
    view = state.view()
    assert view.stopping and view.failed and view.error_reason == "sigquit"

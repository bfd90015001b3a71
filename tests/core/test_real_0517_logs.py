"""The log parser against every line a real SGLang 0.5.17 server wrote (13 recorded scenarios,
``tests/fixtures/real_sglang/0.5.17``): each line is of a kind, or one of a few benign lines named
here; the startup phase the console shows follows 0.5.17's order."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
from repo_paths import FIXTURES

from tui.logs import events as ev
from tui.logs.blocks import Record, read_records
from tui.logs.ingest import ingest_file
from tui.logs.state import LogState
from tui.retune.signals import SignalAdapter

REAL = FIXTURES / "real_sglang" / "0.5.17"
LOGS = sorted(REAL.glob("*/server.log"))

BENIGN = (
    # Environment and model notes that change nothing an operator decides.
    re.compile(r"Fail to set RLIMIT_NOFILE"),
    re.compile(r"Using default HuggingFace chat template"),
    re.compile(r"Ignore import error when loading sglang\.srt\.models\."),
    re.compile(r"using attn output gate!"),
    re.compile(r"Using fallback token IDs for yes/no"),
    re.compile(r"OpenAI Responses API \(/v1/responses\) disabled"),
    # The tokenizer's multimodal transport (a text model: nothing is reserved up front).
    re.compile(r"Multimodal feature transport auto-resolved"),
    re.compile(r"Using CUDA IPC for multimodal features"),
    re.compile(r"CUDA IPC pool-handle caching is enabled"),
    # PyTorch's note as the scheduler exits (every drain): no resource is held after exit.
    re.compile(r"ProcessGroupNCCL\.cpp:\d+\] Warning: WARNING: destroy_process_group\(\)"),
)
"""Lines that may stay of no kind."""


def _records(path: Path) -> list[Record]:
    return list(read_records(path.read_text().split("\n")[:-1]))


def _unknown(records: list[Record]) -> list[str]:
    return [
        f"{r.first}: {r.text}"
        for r in records
        if r.event is None and not r.blank and not any(p.search(r.text) for p in BENIGN)
    ]


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.parent.name)
def test_every_line_of_a_real_0517_log_is_known_or_benign(log: Path) -> None:
    records = _records(log)
    assert sum(r.lines for r in records) == len(log.read_text().split("\n")) - 1
    unknown = _unknown(records)
    assert not unknown, "lines of no kind:\n" + "\n".join(unknown)


def test_the_recorded_lines_by_kind() -> None:
    """946 lines: 819 recognised (492 before 0.5.17 was read), 124 benign, 3 blank."""
    kinds: Counter[str] = Counter()
    benign = blank = 0
    for log in LOGS:
        for record in _records(log):
            if record.blank:
                blank += 1
            elif record.event is None:
                benign += 1
            else:
                kinds[record.event.kind] += record.lines
    assert (sum(kinds.values()), benign, blank) == (819, 124, 3)
    assert kinds[ev.PROGRESS] == 85 and kinds[ev.DIST_INIT] == 15
    assert kinds[ev.KILL_TREE] == 11 and kinds[ev.CRASH_DIAGNOSTICS] == 2
    assert kinds[ev.STARTUP_TIMINGS] == 12 and kinds[ev.DEPRECATED] == 37
    assert kinds[ev.WARNING] == 63  # 25 warnings with their continuation lines
    assert kinds[ev.ERROR] == 29  # the 27-line traceback is one error, and two single lines


def _events(name: str) -> list[ev.LogEvent]:
    return [r.event for r in _records(REAL / name / "server.log") if r.event is not None]


def test_the_oom_traceback_is_one_error_with_its_last_line() -> None:
    errors = [e for e in _events("oom_mamba") if e.kind == ev.ERROR]
    assert [e.get("reason") for e in errors] == ["oom", "sigquit"]
    oom = errors[0]
    assert oom.text.startswith("ValueError: Loaded weights leave no GPU memory")
    assert oom.get("detail") == "weights_leave_no_memory" and oom.get("fatal") is True
    assert oom.get("context") == "scheduler_exception" and oom.get("frames") == 10
    assert oom.get("min_fraction") == 0.001 and oom.get("mem_fraction_static") == 0.2
    assert oom.get("where") == "kv_cache_configurator.py:1647 in _profile_available_bytes"
    assert (oom.get("first_line"), oom.line) == (17, 42)


def test_the_drain_and_its_exit_by_kill_process_tree() -> None:
    events = _events("base")
    shutdown = [e for e in events if e.kind in (ev.SHUTDOWN, ev.KILL_TREE)]
    assert [e.get("event") for e in shutdown] == ["sigterm", *["draining"] * 3, None]
    assert [e.get("remaining") for e in shutdown[1:4]] == [12, 12, 0]
    assert shutdown[-1].fields == {"parent_pid": 538, "include_parent": True, "pid": 538}


def test_the_group_sigterm_crash_chain() -> None:
    kinds = [
        (e.kind, e.get("reason") or e.get("stage") or e.get("event"))
        for e in _events("cap")
        if e.kind in (ev.SHUTDOWN, ev.ERROR, ev.CRASH_DIAGNOSTICS, ev.KILL_TREE)
    ]
    assert kinds == [
        (ev.SHUTDOWN, "sigterm"),
        (ev.ERROR, "subprocess_crashed"),
        (ev.ERROR, "sigquit"),
        (ev.CRASH_DIAGNOSTICS, "sleeping"),
        (ev.CRASH_DIAGNOSTICS, "skipped"),
        (ev.KILL_TREE, None),
    ]


def test_0517_startup_lines_carry_their_fields() -> None:
    events = _events("spec")
    weights = [e for e in events if e.kind == ev.WEIGHTS]
    assert [w.get("type") for w in weights] == ["Qwen3_5ForCausalLM", "Qwen3_5ForCausalLMMTP"]
    assert [w.get("draft") for w in weights] == [None, True]
    assert "dtype" not in weights[0].fields  # 0.5.17 prints none for a bf16 model
    timings = next(e for e in events if e.kind == ev.STARTUP_TIMINGS)
    assert timings.get("load_weight_s") == 0.08 and timings.get("tokenizer_e2e_s") == 23.04
    assert timings.get("cuda_graph_s") == 0.0
    flag = next(e for e in events if e.kind == ev.DEPRECATED)
    assert flag.fields == {
        "flag": "--disable-cuda-graph",
        "replacement": "--cuda-graph-backend-{decode,prefill}=disabled",
    }
    graph = _events("graph")
    captures = [e for e in graph if e.kind == ev.GRAPH_CAPTURE]
    assert [(c.get("graph"), c.get("stage")) for c in captures] == [
        ("target prefill", "begin"),
        ("target prefill", "end"),
        ("target decode", "begin"),
        ("target decode", "end"),
    ]
    assert captures[0].get("backend") == "breakable" and captures[0].get("max_tokens") == 8192
    assert captures[2].get("max_bs") == 16 and captures[3].get("elapsed_s") == 2.02
    bars = [e for e in graph if e.kind == ev.PROGRESS and e.get("graph") == "decode"]
    assert (bars[-1].get("done"), bars[-1].get("total"), bars[-1].get("bs")) == (6, 6, 1)
    tree = next(e for e in _events("noradix") if e.kind == ev.TREE_CACHE)
    assert tree.get("impl") == "ChunkCache" and tree.get("hybrid_ssm") is True


def _phases(path: Path) -> list[str]:
    state = LogState()
    seen: list[str] = []
    for record in read_records(path.read_text().split("\n")[:-1]):
        if record.event is not None:
            state.apply(record.event)
            if state.phase and (not seen or seen[-1] != state.phase):
                seen.append(state.phase)
    return seen


def test_the_console_phase_follows_0517_with_a_draft() -> None:
    assert _phases(REAL / "spec" / "server.log") == [
        "starting",
        "initialising",
        "loading weights",
        "allocating memory pools",
        "loading draft weights",
        "allocating memory pools",
        "allocating KV cache",  # both pools; then 0.5.17 says the graphs are disabled
        "starting HTTP server",
        "warming up",
        "ready",
        "shutting down",
    ]


def test_the_console_phase_counts_the_graph_capture() -> None:
    phases = _phases(REAL / "graph" / "server.log")
    captures = [p for p in phases if p.startswith("capturing CUDA graphs ")]
    assert (
        captures[0] == "capturing CUDA graphs 0/58" and captures[-1] == "capturing CUDA graphs 6/6"
    )
    assert phases[phases.index(captures[-1]) + 1] == "starting HTTP server"


def test_the_retune_phases_do_not_start_over_for_the_draft() -> None:
    events = _events("spec")
    phases = [s.text for s in SignalAdapter().translate(events) if s.kind == "phase"]
    assert phases[:5] == [
        "resolving arguments",
        "initialising",
        "loading weights",
        "loading draft weights",
        "allocating pools",
    ]


@pytest.mark.parametrize("name", ["base", "spec", "graph", "cap", "oom_mamba"])
def test_the_console_fast_path_sees_the_same_rare_lines(name: str) -> None:
    """``ingest`` (what the console runs) finds every rare event the per-line parse finds."""
    summary = ingest_file(REAL / name / "server.log")
    lines = (REAL / name / "server.log").read_text().split("\n")[:-1]
    from tui.logs.parser import parse_line

    expected = [
        e.kind
        for e in (parse_line(t, i) for i, t in enumerate(lines, 1))
        if e is not None and e.kind in ev.RARE_KINDS
    ]
    assert [e.kind for e in summary.rare] == expected

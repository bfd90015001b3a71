"""``gpufleet logs`` via a real interpreter; the simulator's own lines through the parser."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from logs_helpers import FIXTURES, write_synthetic_log
from repo_paths import ROOT

from tui.logs.blocks import read_records
from tui.logs.parser import parse_line


def _run(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "tui", "logs", *args],
        cwd=ROOT,
        input=stdin,
        capture_output=True,
        timeout=60,
        check=False,
    )


def test_parse_prints_one_json_object_per_recognised_line() -> None:
    path = FIXTURES / "sglang-log-samples.txt"
    done = _run("parse", str(path))
    assert done.returncode == 0, done.stderr
    objects = [json.loads(line) for line in done.stdout.decode().splitlines()]
    records = read_records(path.read_text().splitlines())
    expected = [r.event.line for r in records if r.event is not None]
    assert [o["line"] for o in objects] == expected
    by_line = {o["line"]: o for o in objects}
    assert by_line[50]["kind"] == "pool" and by_line[50]["max_running_requests"] == 32
    assert by_line[45]["mamba_usage"] == 0.9


def test_parse_reads_stdin() -> None:
    done = _run("parse", "-", stdin=b"noise\nKilled\n")
    assert done.returncode == 0
    assert json.loads(done.stdout) == {
        "line": 2,
        "kind": "error",
        "reason": "killed",
        "fatal": True,
        "text": "Killed",
    }


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.log"
    done = _run("parse", str(missing))
    assert done.returncode == 2
    assert f"no such file: {missing}" in done.stderr.decode()
    assert _run("summary", str(missing)).returncode == 2


def test_summary(tmp_path: Path) -> None:
    path = tmp_path / "gen.log"
    write_synthetic_log(path, 200_000)
    done = _run("summary", str(path))
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert (doc["kv_tokens"], doc["mamba_slots"], doc["capped"]) == (798080, 200, True)
    assert doc["error_reason"] == "sigquit" and doc["latest_decode"]["kind"] == "decode"


def test_log_layer_imports_no_textual() -> None:
    code = (
        "import sys, tui.logs.cli, tui.logs.state, tui.logs.tailer; "
        "print(any(m == 'textual' or m.startswith('textual.') for m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, check=True)
    assert done.stdout.strip() == b"False"


def test_simulator_startup_and_batch_lines_parse() -> None:
    from bench.simfleet import seed_aggressive_plan
    from tui.sim import logfmt

    plan = seed_aggressive_plan()
    lines = {
        "mamba_cache": logfmt.mamba_line(plan),
        "kv_cache": logfmt.kv_line(798080, 10**9, 10**9),
        "pool": logfmt.summary_line(plan),
        "memory_pool_end": logfmt.memory_pool_end_line(10**10),
        "graph_capture": logfmt.capture_end_line("target verify", 64, 3.5, 10**9, 10**10),
        "weights_begin": logfmt.load_weight_begin_line(10**11),
        "memory_baseline": logfmt.memory_baseline_line(10**9),
        "ready": logfmt.READY_LINE,
        "access": logfmt.access_line("127.0.0.1:5000", "POST", "/generate", 200),
        "decode": logfmt.decode_line(
            plan,
            running=12,
            tokens=4000,
            token_usage=0.1,
            mamba_num=60,
            mamba_usage=0.3,
            accept_len=3.1,
            gen_throughput=900.5,
            queued=2,
        ),
        "prefill": logfmt.prefill_line(
            plan,
            new_seq=1,
            new_token=512,
            cached_token=0,
            token_usage=0.1,
            mamba_usage=0.3,
            running=12,
            queued=2,
            input_throughput=5000.0,
        ),
    }
    for kind, message in lines.items():
        event = parse_line(logfmt.stamp(message, 0.0))
        assert event is not None and event.kind == kind, message
    pool = parse_line(logfmt.summary_line(plan))
    assert pool is not None
    assert pool.fields["max_running_requests"] == plan.max_running_requests
    assert pool.fields["max_total_num_tokens"] == plan.max_total_num_tokens
    mamba = parse_line(logfmt.mamba_line(plan))
    assert mamba is not None and mamba.fields["max_mamba_cache_size"] == plan.max_mamba_cache_size
    decode = parse_line(lines["decode"])
    assert decode is not None
    assert (decode.fields["running_req"], decode.fields["queue_req"]) == (12, 2)
    assert (decode.fields["mamba_usage"], decode.fields["accept_len"]) == (0.3, 3.1)

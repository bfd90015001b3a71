"""The real-server harness of issue 35 (``bench/real_sglang/adopt_real.py``) and its client,
held to a simulated 0.5.17 server here (the whole run, ~4 minutes, is proved by hand with
``--simulate``; see docs/real-sglang.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from sim_helpers import running_sim, wait_until

from bench.operator_fleet import answers
from bench.real_sglang.adopt_real import AFTER, BEFORE, knob_flags, table


def test_the_client_counts_what_it_sent_and_never_reads_health(tmp_path: Path) -> None:
    flags = ["--sim-build", "0.5.17", "--sim-speed", "50", "--enable-metrics"]
    with running_sim(flags, tmp_path, wait_healthy=False) as sim:
        assert wait_until(lambda: answers(sim.url, ("/health",)), 30)  # 0.5.17: no /ready
        before = len(sim.log())
        out = tmp_path / "client.json"
        argv = [sys.executable, "-m", "bench.real_sglang.load_client", str(sim.port), str(out)]
        argv += [str(tmp_path / "STOP"), "4", "16", "2"]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stderr
        counts = json.loads(out.read_text())
        assert counts["ok"] > 0 and counts["lost"] == 0 and counts["refused"] == 0
        assert counts["tokens"] == 16 * counts["ok"] and counts["n"] == 4
        assert "POST /generate" in sim.log()[before:]
        assert "GET /health" not in sim.log()[before:]


def test_the_knobs_and_the_table() -> None:
    assert knob_flags(BEFORE) == [
        "--mem-fraction-static", "0.3", "--max-mamba-cache-size", "80",
        "--mamba-full-memory-ratio", "0.4",
    ]  # fmt: skip
    assert AFTER["max_running_requests"] == 64
    records = {
        "commands": [
            {"argv": ["gpufleet", "adopt", "--ports"], "rc": 0, "stdout": "a\nb|c\n", "stderr": ""}
        ],
        "clients": {"client-30000": {"ok": 10, "lost": 16, "s503": 0, "refused": 1, "tok_s": 5.0}},
    }
    text = table(records)
    assert "| `gpufleet adopt --ports` | 0 | a / b\\|c |" in text
    assert "| client-30000 | 10 | 16 | 0 | 1 | 5.0 |" in text

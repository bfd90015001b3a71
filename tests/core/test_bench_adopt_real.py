"""The real-server harness of issue 35 on one GPU (``bench/real_sglang/adopt_real.py``) and its
client, held to simulated 0.5.17 servers here: the whole run with ``--simulate`` (two servers on
one simulated H100, adopted, walked under the client, one SIGKILLed), about a minute."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from repo_paths import ROOT
from sim_helpers import running_sim, wait_until

from bench.operator_fleet import answers
from bench.ports import free_ports
from bench.real_sglang.adopt_real import AFTER, BEFORE, knob_flags, predictions, table
from bench.simfleet import kill_strays

MODEL = ROOT / "tests" / "fixtures" / "real_sglang" / "0.5.17" / "model"


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
        "card": {"name": "NVIDIA H100 80GB HBM3", "total_gib": 79.6, "fractions": [0.3, 0.6]},
        "commands": [
            {"argv": ["gpufleet", "adopt", "--ports"], "rc": 0, "stdout": "a\nb|c\n", "stderr": ""}
        ],
        "clients": {"client-30000": {"ok": 10, "lost": 16, "s503": 0, "refused": 1, "tok_s": 5.0}},
        "predicted_before": {0: (26, True)},
        "before": {"30000": {"effective_max_running": 26, "max_running_requests": None}},
    }
    text = table(records)
    assert text.startswith("card: NVIDIA H100 80GB HBM3 (79.6 GiB), fractions [0.3, 0.6]")
    assert "| `gpufleet adopt --ports` | 0 | a / b\\|c |" in text
    assert "| client-30000 | 10 | 16 | 0 | 1 | 5.0 |" in text
    assert "| before | {0: (26, True)} | (26, True) | {'30000': (26, None)} |" in text
    line = "preflight GPU 1: mamba slots 80, KV tokens 9, max_running auto -> 26 (capped), free"
    assert predictions(f"x\n{line}\npreflight GPU 0: max_running 64 -> 64, free") == {
        1: (26, True),
        0: (64, False),
    }


def test_the_one_gpu_harness_runs_end_to_end_on_simulated_servers(tmp_path: Path) -> None:
    """``adopt_real --simulate``: both servers on card 0, adopted (GPU 1 numbered for it), the
    preflight's 26 (capped) then 64 beside what they ran, the walk under the client said
    (exit 3, what was lost), then GPU 1 SIGKILLed: crashed on its panel and in status."""
    ports = free_ports(2)
    out = tmp_path / "aout"
    argv = [sys.executable, "-m", "bench.real_sglang.adopt_real", str(out), str(MODEL)]
    argv += ["--simulate", "--ports", ",".join(map(str, ports)), "--drain-s", "3"]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    finally:
        kill_strays(ports)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    records = json.loads((out / "results.json").read_text())
    rcs = {" ".join(c["argv"][1:3]): c["rc"] for c in records["commands"]}
    assert rcs["adopt --ports"] == 0 and rcs["status"] == 0, rcs
    adopt = next(c for c in records["commands"] if c["argv"][1] == "adopt")
    assert (
        f"GPU 1: port {ports[1]} shares device 0 with GPU 0: numbered automatically"
        in (adopt["stdout"])
    )
    assert records["predicted_before"] == {"0": [26, True], "1": [26, True]}
    after = {int(p): s["effective_max_running"] for p, s in records["after"].items()}
    assert after == dict.fromkeys(ports, 64)
    retune = records["retune"]
    assert retune["rc"] == 3 and retune["predicted"] == {"0": [64, False], "1": [64, False]}
    lines = "\n".join(retune["said"])
    assert "on device 0 beside GPU 1 (" in lines and "its new server, predicted" in lines
    assert lines.count("  old server: drain timed out after 3 s:") >= 2
    assert "2/2 GPUs ready; profile retuned; drain timed out on GPUs 0, 1: " in lines
    lost = [c["lost"] for c in records["clients"].values()]
    assert len(lost) == 2 and all(n >= 16 for n in lost), lost
    assert records["still_answering"] == []
    crash = records["crash"]
    if "skipped" not in crash:  # the console in a pty needs pyte (bench-only)
        assert crash["titles"] == ["GPU 1 · on device 0 · NVIDIA H100 80GB HBM3"]
        assert crash["panel_crashed_after_s"] is not None, crash
        assert crash["status"]["state"] == "crashed" and crash["status"]["device"] == 0
    assert (
        "| after | {0: (64, False), 1: (64, False)} | (64, False) |"
        in (out / "results.md").read_text()
    )

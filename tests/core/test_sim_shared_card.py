"""Simulated servers on one simulated card share its memory as SGLang's do: each measures the
free memory when it starts (``tests/core/test_adopt_shared.py``: the second finds the first's taken,
the simulated driver records both), and one whose card a neighbour filled after it measured
dies of PyTorch's out-of-memory error at its allocation, as a real one would."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psutil
from repo_paths import ROOT
from sim_helpers import sim_process

from bench.ports import free_port
from tui.gpu.sim_records import GIB, SimProcessRecord, publish_process

MODEL = ROOT / "tests" / "fixtures" / "real_sglang" / "0.5.17" / "model"
FLAGS = ["--sim-build", "0.5.17", "--sim-gpu", "h100", "--sim-model", str(MODEL)]
FLAGS += ["--max-mamba-cache-size", "80", "--mamba-full-memory-ratio", "0.4"]


def test_a_card_filled_after_the_server_measured_it_fails_its_allocation(tmp_path: Path) -> None:
    port = free_port()
    args = ["--host", "127.0.0.1", "--port", str(port), *FLAGS, "--mem-fraction-static", "0.60"]
    args += ["--sim-startup-seconds", "30"]
    neighbour = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    try:
        log = tmp_path / "late.log"
        with sim_process(args, tmp_path, port, log, {"CUDA_VISIBLE_DEVICES": "1"}) as late:
            assert late.wait_log("Load weight begin. avail mem=79.05 GB", 30), late.log()
            # A server started beside it takes 70 GiB before its pools are allocated.
            made = psutil.Process(neighbour.pid).create_time()
            record = SimProcessRecord(neighbour.pid, made, 70 * GIB, name="python3")
            publish_process(tmp_path / "simgpu", 1, record)
            assert late.wait_exit(60) != 0
            text = late.log()
        assert "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate " in text, text
        assert "GPU 0 has a total capacity of 79.65 GiB of which " in text
        assert f"Process {neighbour.pid} has 70.00 GiB memory in use." in text
    finally:
        neighbour.kill()
        neighbour.wait(10)

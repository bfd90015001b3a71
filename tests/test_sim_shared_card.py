"""Two simulated servers on one simulated card share its memory as SGLang's do: each measures
the free memory when it starts (the second finds the first's taken), the simulated driver
records both, and a server whose card a neighbour filled after it measured dies of PyTorch's
out-of-memory error at its allocation, as a real one would."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psutil
from sim_helpers import running_sim, sim_process, wait_until

from bench.operator_fleet import answers
from bench.ports import free_port
from tui.gpu.sim_records import GIB, SimProcessRecord, live_processes, publish_process

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "tests" / "fixtures" / "real_sglang" / "0.5.17" / "model"
FLAGS = ["--sim-build", "0.5.17", "--sim-gpu", "h100", "--sim-model", str(MODEL)]
FLAGS += ["--max-mamba-cache-size", "80", "--mamba-full-memory-ratio", "0.4"]


def _up(url: str) -> None:
    assert wait_until(lambda: answers(url, ("/health",)), 30), f"{url} never answered"


def test_the_second_server_finds_the_first_s_memory_taken(tmp_path: Path) -> None:
    env = {"CUDA_VISIBLE_DEVICES": "0"}
    fast = [*FLAGS, "--sim-speed", "20"]
    ask = {"wait_healthy": False, "env": env}  # 0.5.17 has no /ready: /health says it is up
    with running_sim([*fast, "--mem-fraction-static", "0.30"], tmp_path, **ask) as first:
        _up(first.url)
        with running_sim([*fast, "--mem-fraction-static", "0.60"], tmp_path, **ask) as second:
            _up(second.url)
            assert "Load weight begin. avail mem=79.05 GB" in first.log()
            assert "Load weight begin. avail mem=54.13 GB" in second.log()
            held = {r.pid: r.used_bytes for r in live_processes(tmp_path / "simgpu", 0)}
            assert len(held) == 2, held  # each server's scheduler, on the one card
            assert sum(held.values()) < 79.65 * GIB


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

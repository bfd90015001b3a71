"""Console overhead against nvitop on a real GPU (run on a GPU machine; writes Markdown rows).

Both programs watch the same GPU, which runs one GPU-backed simulated SGLang server, at a 1 s
interval, in a pty of the same size, for the same time; runs alternate so drift hits both. We
report CPU seconds per minute (= CPU per refresh x 60, both refresh once a second), peak RSS and
bytes per second written to the terminal, each as a ratio against nvitop.

    python -m bench.gpu_overhead --seconds 30 --runs 3 --out results-gpu.md
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from bench.harness import Stat
from bench.ptyrun import PtyCost, measure


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _gpu_name() -> str:
    out = subprocess.run(
        ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    ).stdout.strip()
    return out.splitlines()[0] if out else "unknown GPU"


def start_server(port: int, log: Path) -> subprocess.Popen[bytes]:
    """A GPU-backed simulated server on GPU 0, ready before we return."""
    argv = [
        sys.executable, "-m", "tui", "sim", "--gpu-backing", "cuda", "--sim-gpu", "h200",
        "--port", str(port), "--mem-fraction-static", "0.85", "--max-mamba-cache-size", "80",
        "--mamba-full-memory-ratio", "0.4", "--speculative-algorithm", "EAGLE",
        "--enable-metrics", "--sim-speed", "10",
    ]  # fmt: skip
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "0"}
    handle = log.open("wb")
    proc = subprocess.Popen(
        argv, stdout=handle, stderr=subprocess.STDOUT, env=env, start_new_session=True
    )
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited {proc.returncode}: {log.read_text()[-2000:]}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                return proc
        time.sleep(0.5)
    raise RuntimeError("server not ready in 240 s")


def stop(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("results-gpu.md"))
    args = parser.parse_args(argv)
    port = _free_port()
    server = start_server(port, Path("/tmp/gpu-overhead-server.log"))
    programs = {
        "gpufleet": [sys.executable, "-m", "tui", "console", "--ports", str(port), "--gpus", "0"],
        "nvitop": [sys.executable, "-m", "nvitop", "--interval", "1"],
    }
    costs: dict[str, list[PtyCost]] = {name: [] for name in programs}
    try:
        for run in range(args.runs):
            for name, prog in programs.items():
                cost = measure(prog, seconds=args.seconds, warmup=args.warmup, rows=50, cols=200)
                costs[name].append(cost)
                print(f"run {run} {name}: {cost}", flush=True)
    finally:
        stop(server)
    ours, peer = costs["gpufleet"], costs["nvitop"]
    rows = []
    for metric, fn, fmt in (
        ("CPU s per minute (1 refresh/s)", lambda c: c.cpu_per_minute, "{:.2f}"),
        ("peak RSS MiB", lambda c: c.peak_rss / 2**20, "{:.0f}"),
        ("bytes/s to the terminal", lambda c: c.bytes_per_second, "{:.0f}"),
    ):
        a, b = Stat.of([fn(c) for c in ours]), Stat.of([fn(c) for c in peer])
        ratio = a.median / b.median if b.median else float("nan")
        rows.append(f"| {metric} | {a.text(fmt)} | {b.text(fmt)} | {ratio:.2f} |")
    cpu_ratio = Stat.of([c.cpu_per_minute for c in ours]).median / max(
        Stat.of([c.cpu_per_minute for c in peer]).median, 1e-9
    )
    text = "\n".join(
        [
            "## Real GPU: console overhead against nvitop (issue 7)",
            "",
            f"- Machine: {platform.node()}, {os.cpu_count()} cores, {_gpu_name()}",
            f"- Date: {time.strftime('%Y-%m-%d %H:%M:%S %Z')}; {args.runs} alternating runs of "
            f"{args.seconds:.0f} s each (after {args.warmup:.0f} s warm-up), pty 200x50, "
            "both at a 1 s interval, watching GPU 0 running one GPU-backed simulated server.",
            "- Commands: `gpufleet console --ports P --gpus 0` (NVML) vs `nvitop --interval 1`.",
            "",
            "| metric | gpufleet | nvitop | ratio |",
            "|---|---|---|---|",
            *rows,
            "",
            f"Target (console at or below nvitop's CPU per refresh): "
            f"{'met' if cpu_ratio <= 1.0 else 'missed'} (ratio {cpu_ratio:.2f}).",
        ]
    )
    args.out.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

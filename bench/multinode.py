"""``python -m bench.multinode``: what the agent and the many-node console cost, measured against
peers in the same run; writes ``bench/results-multinode.md``.

1. Agent overhead, 8 simulated GPUs: CPU per ``/metrics`` scrape of ``gpufleet agent`` (the
   agent's CPU over N scrapes, less its idle CPU over as long: its once-a-second view is counted
   apart) against Debian's ``prometheus-node-exporter`` scraped the same way (a node-exporter
   peer: what an operator already runs per node).
2. The console over 4 nodes x 8 GPUs of agents in a 200x50 pty: CPU-s per minute, bytes to the
   terminal, RSS (four read-only agents over one 8-server simulated fleet: 32 panels).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil

from bench.ptyrun import measure
from bench.simfleet import BASELINE, free_ports, kill_strays, sim_profile_text
from tui import paths

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results-multinode.md"
SCRAPES = 200


def _env(state: Path) -> dict[str, str]:
    return dict(
        os.environ,
        **{
            paths.STATE_ENV: str(state),
            paths.PROFILES_ENV: str(state / "profiles"),
            "PYTHONPATH": str(ROOT),
        },
    )


@contextlib.contextmanager
def fleet(state: Path, gpus: int) -> Iterator[list[int]]:
    """``gpus`` simulated servers (baseline) in ``state``; stopped afterwards."""
    ports = free_ports(gpus)
    (state / "profiles").mkdir(parents=True, exist_ok=True)
    text = sim_profile_text(
        "bench-base", list(range(gpus)), ports, str(state / "logs"), BASELINE, 50
    )
    (state / "profiles" / "bench-base.toml").write_text(text)
    env = _env(state)
    argv = [sys.executable, "-m", "tui", "apply", "bench-base", "--no-measure", "--timeout", "90"]
    subprocess.run(argv, env=env, check=True, capture_output=True, timeout=180)
    try:
        yield ports
    finally:
        stop = [sys.executable, "-m", "tui", "sim-fleet", "stop", "--mode", "terminate"]
        subprocess.run(stop, env=env, capture_output=True, timeout=120)
        kill_strays(ports)


@contextlib.contextmanager
def process(argv: list[str], env: dict[str, str], url: str) -> Iterator[psutil.Process]:
    """A server process, once ``url`` answers; SIGTERMed afterwards."""
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                httpx.get(url, timeout=1)
                break
            time.sleep(0.1)
        yield psutil.Process(proc.pid)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _cpu(proc: psutil.Process) -> float:
    times = proc.cpu_times()
    return float(times.user + times.system)


def per_scrape(proc: psutil.Process, url: str, headers: dict[str, str]) -> tuple[float, int, float]:
    """(CPU ms per scrape net of idle, bytes per scrape, idle CPU-s per minute)."""
    time.sleep(2)
    c0, t0 = _cpu(proc), time.monotonic()
    time.sleep(10)
    idle_per_s = (_cpu(proc) - c0) / (time.monotonic() - t0)
    size = 0
    with httpx.Client(headers=headers) as client:
        c0, t0 = _cpu(proc), time.monotonic()
        for _ in range(SCRAPES):
            size = len(client.get(url).content)
        spent, took = _cpu(proc) - c0, time.monotonic() - t0
    net = max(0.0, spent - idle_per_s * took)
    return 1000 * net / SCRAPES, size, 60 * idle_per_s


def agent_overhead(tmp: Path) -> list[str]:
    state = tmp / "agent"
    rows = []
    with fleet(state, 8):
        port = free_ports(1)[0]
        token = state / "agent.token"
        argv = [
            sys.executable,
            "-m",
            "tui",
            "agent",
            "--profile",
            "bench-base",
            "--port",
            str(port),
        ]
        argv += ["--token-file", str(token), "--node", "bench"]
        url = f"http://127.0.0.1:{port}/metrics"
        with process(argv, _env(state), url) as agent:
            headers = {"authorization": f"Bearer {token.read_text().strip()}"}
            ms, size, idle = per_scrape(agent, url, headers)
            rows.append(f"| gpufleet agent, 8 GPUs | {ms:.2f} | {size:,} | {idle:.2f} |")
        exporter = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")
        if exporter is None:
            rows.append("| prometheus-node-exporter | not installed | | |")
        else:
            port = free_ports(1)[0]
            argv = [exporter, f"--web.listen-address=127.0.0.1:{port}"]
            url = f"http://127.0.0.1:{port}/metrics"
            with process(argv, dict(os.environ), url) as peer:
                ms, size, idle = per_scrape(peer, url, {})
                rows.append(
                    f"| prometheus-node-exporter (peer) | {ms:.2f} | {size:,} | {idle:.2f} |"
                )
    return rows


def console_cost(tmp: Path, seconds: float = 30.0) -> list[str]:
    state = tmp / "nodes"
    with fleet(state, 8), contextlib.ExitStack() as stack:
        token = state / "agent.token"
        addresses = []
        for i in range(4):
            port = free_ports(1)[0]
            argv = [sys.executable, "-m", "tui", "agent", "--profile", "bench-base"]
            argv += ["--port", str(port), "--token-file", str(token), "--node", f"node{i + 1}"]
            argv += ["--readonly"]
            stack.enter_context(process(argv, _env(state), f"http://127.0.0.1:{port}/metrics"))
            addresses.append(f"127.0.0.1:{port}")
        argv = [sys.executable, "-m", "tui", "console", "--agents", ",".join(addresses)]
        argv += ["--token-file", str(token)]
        cost = measure(
            argv, seconds=seconds, warmup=5.0, rows=50, cols=200, env={"PYTHONPATH": str(ROOT)}
        )
    per_min = cost.cpu_s * 60 / cost.seconds
    return [
        f"| console, 4 nodes x 8 GPUs (32 panels), 200x50 pty | {per_min:.2f} CPU-s/min "
        f"({100 * per_min / 60:.1f} % of a core) | {cost.tty_bytes / cost.seconds / 1024:.1f} KB/s "
        f"| {cost.peak_rss / 2**20:.0f} MiB |"
    ]


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="gpufleet-bench-mn-") as tmp:
        agent = agent_overhead(Path(tmp))
        console = console_cost(Path(tmp))
    text = "\n".join(
        [
            "# Many nodes: agent and console cost",
            "",
            f"Measured by `python -m bench.multinode` on {os.cpu_count()} cores, "
            f"{time.strftime('%Y-%m-%d %H:%M')} (a shared development machine: other test runs "
            "were using its cores, so these are upper bounds).",
            "",
            f"## Agent overhead: CPU per /metrics scrape ({SCRAPES} scrapes, net of idle)",
            "",
            "| exporter | CPU ms / scrape | bytes / scrape | idle CPU-s / min |",
            "|---|---|---|---|",
            *agent,
            "",
            "The agent's idle CPU is its once-a-second view of the node (the fleet monitor: 8 x",
            "`/metrics` of the servers, GPU records, log tails, the fleet state and the job's",
            "status), which a scrape never waits for.",
            "",
            "## Console over 4 nodes x 8 GPUs of agents",
            "",
            "| what | CPU | to the terminal | RSS |",
            "|---|---|---|---|",
            *console,
            "",
        ]
    )
    RESULTS.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

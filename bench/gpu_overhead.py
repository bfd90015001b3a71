"""Console overhead against nvitop on a real GPU, under load (run on a GPU machine).

Scenarios (``--scenario``, repeatable):

* ``one``: one GPU-backed simulated SGLang server on GPU 0 serving ``CLIENTS_ONE`` concurrent
  clients, the GPU busy with a matrix-product loop whose duty cycle changes every second
  (``bench.gpu_load``): both programs have something to redraw every second.
* ``seven``: the seed's shape, seven servers watched: the GPU-backed one on GPU 0 and six
  simulated without backing, ``CLIENTS_SEVEN`` clients each, the same GPU load.
* ``idle``: the one server, no clients, no GPU load (issue 7's figures, kept as a second row).

In each, the programs (gpufleet's console; optionally ``--base DIR``, the console of an earlier
checkout, for a before/after in the same run; and ``nvitop --interval 1``) run in turn in a real
200x50 pty for ``--seconds`` after ``--warmup``, ``--runs`` times, alternating, so drift hits
all of them. Both refresh once a second. We report CPU seconds per minute of the program's
process tree, bytes per second written to the terminal and peak RSS, median (min-max) and the
ratio against nvitop. Loads and servers run outside the measured trees.

    python -m bench.gpu_overhead --scenario one --scenario idle --runs 3 --out one.md
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from bench.harness import Stat, gpufleet_argv, unwind_on_sigterm
from bench.ports import free_port
from bench.ptyrun import PtyCost, measure

ROOT = Path(__file__).resolve().parent.parent
CLIENTS_ONE = 24
"""Concurrent clients of the one server (the issue's measurement)."""
CLIENTS_SEVEN = 12
"""Concurrent clients of each of the seven servers."""
SIM_FLAGS = [
    "--mem-fraction-static", "0.85", "--max-mamba-cache-size", "80",
    "--mamba-full-memory-ratio", "0.4", "--speculative-algorithm", "EAGLE",
    "--enable-metrics", "--sim-speed", "10",
]  # fmt: skip
"""The seed's knobs; speed 10 so requests finish and new ones arrive every second."""


def _gpu_name() -> str:
    if shutil.which("nvidia-smi") is None:
        return "no GPU"
    out = subprocess.run(
        ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    ).stdout.strip()
    return out.splitlines()[0] if out else "unknown GPU"


def _spawn(argv: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    handle = log.open("wb")
    return subprocess.Popen(
        argv, stdout=handle, stderr=subprocess.STDOUT, env=env, start_new_session=True
    )


def start_server(port: int, log: Path, *, cuda: bool) -> subprocess.Popen[bytes]:
    """A simulated server (GPU-backed on GPU 0 when ``cuda``); not waited for."""
    argv = [sys.executable, "-m", "tui", "sim", "--port", str(port), *SIM_FLAGS]
    if cuda:
        argv[4:4] = ["--gpu-backing", "cuda", "--sim-gpu", "h200"]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "0"}
    return _spawn(argv, log, env)


def wait_ready(procs: dict[int, subprocess.Popen[bytes]], logs: dict[int, Path]) -> None:
    """Until every server's ``/ready`` answers 200 (240 s at most)."""
    deadline = time.monotonic() + 240
    waiting = set(procs)
    while waiting and time.monotonic() < deadline:
        for port in list(waiting):
            proc = procs[port]
            if proc.poll() is not None:
                tail = logs[port].read_text(errors="replace")[-2000:]
                raise RuntimeError(f"server on {port} exited {proc.returncode}: {tail}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"http://127.0.0.1:{port}/ready", timeout=2).status_code == 200:
                    waiting.discard(port)
        time.sleep(0.5)
    if waiting:
        raise RuntimeError(f"servers on {sorted(waiting)} not ready in 240 s")


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Kill the process group we started (its session leader is ``proc``)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


@contextlib.contextmanager
def fleet(
    servers: int, clients: int, gpu_load: bool, logs: Path, cuda: bool = True
) -> Iterator[list[int]]:
    """``servers`` servers (the first GPU-backed when ``cuda``), their clients and the GPU
    load; yields their ports."""
    ports = [free_port() for _ in range(servers)]
    procs: dict[int, subprocess.Popen[bytes]] = {}
    paths = {port: logs / f"sglang_{port}.log" for port in ports}
    loads: list[subprocess.Popen[bytes]] = []
    try:
        for i, port in enumerate(ports):
            procs[port] = start_server(port, paths[port], cuda=cuda and i == 0)
        wait_ready(procs, paths)
        env = dict(os.environ)
        if gpu_load:
            argv = [sys.executable, "-m", "bench.gpu_load", "gpu", "--seconds", "3600"]
            loads.append(_spawn(argv, logs / "gpu_load.log", env))
        if clients:
            argv = [
                sys.executable, "-m", "bench.gpu_load", "clients", "--per-server", str(clients),
                "--ports", ",".join(map(str, ports)), "--seconds", "3600",
            ]  # fmt: skip
            loads.append(_spawn(argv, logs / "clients.log", env))
        time.sleep(3)
        for load in loads:
            if load.poll() is not None:
                raise RuntimeError(f"a load exited {load.returncode}: {load.args!r}")
        yield ports
    finally:
        for proc in [*loads, *procs.values()]:
            stop(proc)


def console_argv(ports: list[int], base: Path | None = None) -> list[str]:
    """The console on ``ports`` (GPUs 0..n-1, NVML); from ``base``'s code when given."""
    args = ["console", "--ports", ",".join(map(str, ports)), "--gpus", f"0-{len(ports) - 1}"]
    if len(ports) == 1:
        args[-1] = "0"
    return gpufleet_argv(base, *args)


SCENARIOS = {
    "one": (1, CLIENTS_ONE, True, "1 server under load"),
    "seven": (7, CLIENTS_SEVEN, True, "7 servers under load"),
    "idle": (1, 0, False, "1 server idle"),
}
"""name -> (servers, clients per server, GPU load, words)."""


def run_scenario(name: str, args: argparse.Namespace, logs: Path) -> list[str]:
    """Measure every program in turn; the scenario's Markdown table."""
    servers, clients, gpu_load, words = SCENARIOS[name]
    local = args.local
    with fleet(servers, clients, gpu_load and not local, logs, cuda=not local) as ports:
        programs = {"gpufleet": console_argv(ports)}
        if args.base is not None:
            programs["gpufleet before"] = console_argv(ports, args.base)
        # --local (a machine without a GPU, to try the script): the Textual floor stands in.
        floor = [sys.executable, str(ROOT / "bench" / "floor_clock.py")]
        programs["nvitop"] = floor if local else [sys.executable, "-m", "nvitop", "--interval", "1"]
        costs: dict[str, list[PtyCost]] = {p: [] for p in programs}
        for run in range(args.runs):
            for program, argv in programs.items():
                cost = measure(argv, seconds=args.seconds, warmup=args.warmup, rows=50, cols=200)
                costs[program].append(cost)
                print(
                    f"{name} run {run} {program}: {cost.cpu_per_minute:.3f} CPU-s/min "
                    f"{cost.bytes_per_second:.0f} B/s {cost.peak_rss / 2**20:.0f} MiB",
                    flush=True,
                )
    names = list(programs)
    head = " | ".join(names)
    ratios = " | ".join(f"{p} / nvitop" for p in names[:-1])
    rows = [
        f"### {words}: {', '.join(names)}",
        "",
        f"| metric | {head} | {ratios} |",
        "|---|" + "---|" * (2 * len(names) - 1),
    ]
    for metric, fn, fmt in (
        ("CPU s per minute (1 refresh/s)", lambda c: c.cpu_per_minute, "{:.2f}"),
        ("bytes/s to the terminal", lambda c: c.bytes_per_second, "{:.0f}"),
        ("peak RSS MiB", lambda c: c.peak_rss / 2**20, "{:.0f}"),
    ):
        stats = {p: Stat.of([fn(c) for c in costs[p]]) for p in names}
        peer = stats["nvitop"].median
        cells = " | ".join(stats[p].text(fmt) for p in names)
        ratio = " | ".join(f"{stats[p].median / peer:.2f}" if peer else "–" for p in names[:-1])
        rows.append(f"| {metric} | {cells} | {ratio} |")
    cpu = {p: [c.cpu_per_minute for c in costs[p]] for p in names}
    paired = [Stat.paired(cpu[p], cpu["nvitop"]) for p in names[:-1]]
    rows.append(
        "| CPU, each run over the nvitop run beside it | "
        + " | ".join("–" for _ in names)
        + " | "
        + " | ".join(stat.text("{:.2f}") if stat else "–" for stat in paired)
        + " |"
    )
    return rows


def main(argv: list[str] | None = None) -> int:
    """Run the scenarios and write their tables to ``--out``."""
    unwind_on_sigterm()
    parser = argparse.ArgumentParser()
    parser.add_argument("--scenario", action="append", choices=sorted(SCENARIOS))
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--base", type=Path, default=None, help="an earlier checkout's root")
    parser.add_argument("--logs", type=Path, default=Path("/tmp/gpu-overhead"))
    parser.add_argument("--out", type=Path, default=Path("results-gpu.md"))
    parser.add_argument(
        "--local", action="store_true", help="no GPU: sims only, the floor clock as the peer"
    )
    args = parser.parse_args(argv)
    args.logs.mkdir(parents=True, exist_ok=True)
    text = [
        f"- Machine: {platform.node()}, {os.cpu_count()} cores, {_gpu_name()}",
        f"- Date: {time.strftime('%Y-%m-%d %H:%M:%S %Z')}; {args.runs} alternating runs of "
        f"{args.seconds:.0f} s each (after {args.warmup:.0f} s warm-up), pty 200x50, all at a "
        "1 s interval.",
        "",
    ]
    for name in args.scenario or ["one", "seven", "idle"]:
        text += [*run_scenario(name, args, args.logs), ""]
    args.out.write_text("\n".join(text) + "\n")
    print("\n".join(text))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

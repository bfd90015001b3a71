"""Console overhead against nvitop on a real GPU, under load (run on a GPU machine).

Scenarios (``--scenario``, repeatable):

* ``one``: one GPU-backed simulated SGLang server on GPU 0 serving ``CLIENTS_ONE`` concurrent
  clients, the GPU busy with a matrix-product loop whose duty cycle changes every second
  (``bench.gpu_load``): both programs have something to redraw every second.
* ``seven``: the seed's shape, seven servers watched: the GPU-backed one on GPU 0 and six
  simulated without backing, ``CLIENTS_SEVEN`` clients each, the same GPU load.
* ``idle``: the one server, no clients, no GPU load (issue 7's figures, kept as a second row).

In each, the programs (gpufleet's console; optionally the console with a hand-written
replacement switched off, ``--plain NAME`` for each: ``GPUFLEET_PLAIN``, ``tui.plain``;
optionally ``--base DIR``, the console of an earlier checkout, for a before/after in the same run;
and ``nvitop --interval 1``) run in turn in a real 200x50 pty for ``--seconds`` after
``--warmup``, ``--runs`` times, alternating, so drift hits all of them. Both refresh once a
second. We report CPU seconds per minute of the program's process tree, bytes per second written
to the terminal and peak RSS, median (min-max) and the ratio against nvitop, and for each
``--plain`` variant its runs over the console's runs beside them (``bench.plain_variants``: does
the replacement buy 10 %?). Loads and servers run outside the measured trees.

The GPU-backed server is sized to GPU 0 (``gpu_backed_flags``): the largest simulated card that
fits in it, the seed's model where it fits at 0.85 (a 141 GB H200), an 8B model on an 80 GB H100.

    python -m bench.gpu_overhead --scenario one --scenario idle --runs 3 --out one.md
    python -m bench.gpu_overhead --scenario seven --runs 2 --seconds 20 --warmup 4 \
        --plain keepalive --plain batch --plain gcfreeze --plain render
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
from bench.plain_variants import AS_IS, checked, earned_table, variant_env, variant_name
from bench.ports import free_port
from bench.ptyrun import PtyCost, measure
from tui.gpu.sim_records import SIM_GPU_KINDS

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
SEED_MODEL_MIB = 120 * 1024
"""The seed's model (FP8 weights, 80 Mamba slots, EAGLE) fits at 0.85 only on a card this big
(``tests/core/test_gpu_sim_cuda.py``'s measure); on a smaller one the 8B model stands in."""
SMALL_CARD_FLAGS = [
    "--sim-model", "llama-8b", "--mem-fraction-static", "0.85", "--enable-metrics",
    "--sim-speed", "10",
]  # fmt: skip
"""The GPU-backed server's flags on a card below ``SEED_MODEL_MIB`` (its pools still take most
of the card)."""
MIB = 1024**2


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


def card_mib() -> int | None:
    """GPU 0's memory in MiB as nvidia-smi reports it (None without one)."""
    if shutil.which("nvidia-smi") is None:
        return None
    out = subprocess.run(
        ["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits", "-i", "0"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    ).stdout.strip()
    try:
        return int(float(out.splitlines()[0]))
    except (IndexError, ValueError):
        return None


def gpu_backed_flags(total_mib: int | None) -> list[str]:
    """The GPU-backed server's ``--sim-gpu`` and flags for a card of ``total_mib``: the largest
    simulated card no bigger than it, the seed's model and knobs where that card holds them.

    Raises:
        RuntimeError: no GPU found, or one smaller than every simulated card.
    """
    if total_mib is None:
        raise RuntimeError("no GPU 0 found (nvidia-smi): the GPU-backed server needs one")
    fitting = [
        (total // MIB, kind)
        for kind, (_, total, _) in SIM_GPU_KINDS.items()
        if total // MIB <= total_mib
    ]
    if not fitting:
        smallest = min(total // MIB for _, total, _ in SIM_GPU_KINDS.values())
        raise RuntimeError(f"GPU 0 has {total_mib} MiB; the smallest simulated card {smallest}")
    card, kind = max(fitting)
    flags = SIM_FLAGS if card >= SEED_MODEL_MIB else SMALL_CARD_FLAGS
    return ["--gpu-backing", "cuda", "--sim-gpu", kind, *flags]


def _spawn(argv: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    handle = log.open("wb")
    return subprocess.Popen(
        argv, stdout=handle, stderr=subprocess.STDOUT, env=env, start_new_session=True
    )


def start_server(port: int, log: Path, *, cuda: bool) -> subprocess.Popen[bytes]:
    """A simulated server (GPU-backed on GPU 0 when ``cuda``, sized to it); not waited for."""
    flags = gpu_backed_flags(card_mib()) if cuda else SIM_FLAGS
    argv = [sys.executable, "-m", "tui", "sim", "--port", str(port), *flags]
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


Program = tuple[list[str], dict[str, str], bytes | None]
"""A measured program: its argv, the environment it adds, and what it shows once its first
reading is drawn (the warm-up starts there; None: at its start)."""


def programs_for(ports: list[int], args: argparse.Namespace) -> dict[str, Program]:
    """The programs of one rotation, in order: the console as it is, each ``--plain`` variant,
    ``--base``'s console, and the peer (nvitop, or the Textual floor with ``--local``)."""
    console = console_argv(ports)
    ready = f"GPU {len(ports) - 1}".encode()  # the last panel's title: every panel drawn
    programs: dict[str, Program] = {AS_IS: (console, variant_env(""), ready)}
    for switches in args.plain or []:
        programs[variant_name(switches)] = (console, variant_env(switches), ready)
    if args.base is not None:
        programs["gpufleet before"] = (console_argv(ports, args.base), variant_env(""), ready)
    # --local (a machine without a GPU, to try the script): the Textual floor stands in.
    floor = [sys.executable, str(ROOT / "bench" / "floor_clock.py")]
    peer = floor if args.local else [sys.executable, "-m", "nvitop", "--interval", "1"]
    programs["nvitop"] = (peer, {}, None)
    return programs


def run_scenario(name: str, args: argparse.Namespace, logs: Path) -> list[str]:
    """Measure every program in turn; the scenario's Markdown tables."""
    servers, clients, gpu_load, words = SCENARIOS[name]
    local = args.local
    with fleet(servers, clients, gpu_load and not local, logs, cuda=not local) as ports:
        programs = programs_for(ports, args)
        costs: dict[str, list[PtyCost]] = {p: [] for p in programs}
        try:
            for run in range(args.runs):
                for program, (argv, env, ready) in programs.items():
                    cost = measure(
                        argv,
                        seconds=args.seconds,
                        warmup=args.warmup,
                        rows=50,
                        cols=200,
                        env=env,
                        ready_marker=ready,
                    )
                    costs[program].append(cost)
                    print(
                        f"{name} run {run} {program}: {cost.cpu_per_minute:.3f} CPU-s/min "
                        f"{cost.bytes_per_second:.0f} B/s {cost.peak_rss / 2**20:.0f} MiB "
                        f"start {cost.start_cpu_s:.2f} CPU-s",
                        flush=True,
                    )
        except KeyboardInterrupt:
            # A deadline (timeout -s INT on a lent machine): the whole rotations so far are
            # still a result; no later scenario runs.
            whole = min(len(runs) for runs in costs.values())
            print(f"{name}: stopped after {whole} whole rotations", flush=True)
            if not whole:
                raise
            args.stopped = True
            costs = {p: runs[:whole] for p, runs in costs.items()}
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
        ("CPU s to start (to the window)", lambda c: c.start_cpu_s, "{:.2f}"),
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
    earned = earned_table(costs)
    return [*rows, *(["", *earned] if earned else [])]


def main(argv: list[str] | None = None) -> int:
    """Run the scenarios and write their tables to ``--out``."""
    unwind_on_sigterm()
    parser = argparse.ArgumentParser()
    parser.add_argument("--scenario", action="append", choices=sorted(SCENARIOS))
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--base", type=Path, default=None, help="an earlier checkout's root")
    parser.add_argument(
        "--plain",
        action="append",
        metavar="SWITCHES",
        help="also the console with these replacements off (a GPUFLEET_PLAIN value; repeatable)",
    )
    parser.add_argument("--logs", type=Path, default=Path("/tmp/gpu-overhead"))
    parser.add_argument("--out", type=Path, default=Path("results-gpu.md"))
    parser.add_argument(
        "--local", action="store_true", help="no GPU: sims only, the floor clock as the peer"
    )
    args = parser.parse_args(argv)
    try:
        checked(args.plain or [])
    except ValueError as error:
        parser.error(str(error))
    args.logs.mkdir(parents=True, exist_ok=True)
    backed = "none (--local)" if args.local else " ".join(gpu_backed_flags(card_mib())[:4])
    text = [
        f"- Machine: {platform.node()}, {os.cpu_count()} cores, {_gpu_name()}",
        f"- Date: {time.strftime('%Y-%m-%d %H:%M:%S %Z')}; {args.runs} alternating runs of "
        f"{args.seconds:.0f} s each (after {args.warmup:.0f} s warm-up), pty 200x50, all at a "
        f"1 s interval. GPU-backed server: {backed}.",
        "",
    ]
    args.stopped = False
    for name in args.scenario or ["one", "seven", "idle"]:
        text += [*run_scenario(name, args, args.logs), ""]
        if args.stopped:
            text.append(f"(stopped early: the deadline came during {name})")
            break
    args.out.write_text("\n".join(text) + "\n")
    print("\n".join(text))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

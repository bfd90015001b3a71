"""Flat memory over a whole job: the console, the pipeline and the agent on the simulated fleet for
the equivalent of the seed's 41-hour job, their RSS sampled (issue 31; a benchmark, not a test).

The demo's fleet (7 simulated B200s on free ports, the sim at ``--speed``), a job of 2,000,000
prompts (more than the seed's 913,786, so it runs through the soak) run by ``gpufleet
generate``, ``gpufleet agent`` serving the node with a
scraper asking its ``/metrics`` and snapshot every 2 s (a Prometheus and a remote console), and
the console on it in a real 200x50 pty. Every ``--sample`` seconds the RSS of each of the three
processes is recorded with the job's progress. After ``--warmup`` minutes (histories and graph
windows filling, caches warming) each process's growth to the end must stay under 5 %: the
median of the last three samples against the median of the three after warm-up.

At ``--speed 100`` for 25 minutes the simulated servers live 41.7 hours (the sim compresses
every server-side delay by the speed); what the console, agent and pipeline see per wall second
is the job's events at that speed. Histories kept by wall time (the graphs' 10 minutes, the
history store's tiers) are bounded by their own docstrings' windows, which a 25-minute run
fills.

    python -m bench.bench_soak --speed 100 --minutes 25
    python -m bench.bench_soak --speed 20 --minutes 10 --base /path/to/an/older/checkout
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import json
import os
import pty
import statistics
import struct
import subprocess
import tempfile
import termios
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil

from bench.harness import gpufleet_argv
from bench.ports import free_ports
from bench.simfleet import ROOT, write_prompts

SEED_PROMPTS = 913_786
"""The seed's job."""
PROMPTS = 2_000_000
"""Prompts in the soak's job: more than the seed's, so the job never ends inside the soak (at
speed 100 this machine's simulated fleet serves ~48,000 a minute)."""
SEED_HOURS = 41.0
"""How long it took on the seed's 7 B200s."""
LIMIT = 0.05
"""Growth allowed after warm-up."""


@dataclass(frozen=True, slots=True)
class Sample:
    """One sample of the three processes."""

    t: float
    """Seconds since the console started."""
    console: float
    """Its RSS, MiB."""
    pipeline: float
    """The pipeline's RSS, MiB."""
    agent: float
    """The agent's RSS, MiB."""
    done: int
    """Prompts done so far."""


def _rss(proc: subprocess.Popen[bytes] | None) -> float:
    if proc is None:
        return float("nan")
    try:
        return psutil.Process(proc.pid).memory_info().rss / 2**20
    except psutil.Error:
        return float("nan")


def _done(status: Path) -> int:
    with contextlib.suppress(OSError, ValueError):
        return int(json.loads(status.read_text()).get("done", 0))
    return 0


@contextlib.contextmanager
def _fleet(state: Path, gpus: int, speed: float) -> Iterator[Path]:
    """The demo's fleet at ``speed`` under ``state``: its profile file; stopped on exit."""
    os.environ["GPUFLEET_STATE_DIR"] = str(state)
    from bench.simfleet import stop_all
    from tui.ops.demo import demo_profile
    from tui.ops.service import FleetOps
    from tui.ops.simfleet import sim_profile, wait_ready
    from tui.profiles import save_profile
    from tui.state.fleet_state import read_records

    base = free_ports(gpus, consecutive=True)[0]
    profile = demo_profile(sim_profile(None), gpus, speed, base)
    path = save_profile(profile, state.parent / "profiles" / f"{profile.name}.toml")
    try:
        up = asyncio.run(FleetOps(profile, by="bench").start(profile))
        failures = [why for why in up.values() if why]
        if failures:
            raise RuntimeError("; ".join(failures))
        not_ready = [
            r.message for r in wait_ready(list(read_records().values()), 120) if not r.ready
        ]
        if not_ready:
            raise RuntimeError("; ".join(not_ready))
        yield path
    finally:
        stop_all(release_s=30.0)


def _drain(master: int, stop: threading.Event) -> None:
    """Read what the console writes to its terminal (a terminal nobody reads would block it)."""
    while not stop.is_set():
        try:
            if not os.read(master, 65536):
                return
        except OSError:
            return


def _scrape(url: str, token: str, stop: threading.Event) -> None:
    """A Prometheus and a remote console: /metrics and the snapshot every 2 s."""
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(timeout=10, headers=headers) as client:
        while not stop.wait(2.0):
            for path in ("/metrics", "/api/v1/snapshot", "/api/v1/journal?last=20"):
                with contextlib.suppress(httpx.HTTPError):
                    client.get(url + path)


def _start(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as sink:
        return subprocess.Popen(
            argv, env=env, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=sink, stderr=sink,
            start_new_session=True,
        )  # fmt: skip


def _stop(proc: subprocess.Popen[bytes] | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


def soak(
    minutes: float, speed: float, sample_s: float, gpus: int, base: Path | None
) -> list[Sample]:
    """Run the soak; returns the samples (the fleet and everything started are stopped)."""
    samples: list[Sample] = []
    with tempfile.TemporaryDirectory(prefix="gpufleet-soak-") as tmp:
        root = Path(tmp)
        state = root / "state"
        state.mkdir(mode=0o700)
        env = {**os.environ, "GPUFLEET_STATE_DIR": str(state), "PYTHONPATH": str(ROOT)}
        env["GPUFLEET_CONFIG_DIR"] = str(root / "config")
        env["GPUFLEET_PROFILES_DIR"] = str(root / "profiles")
        prompts = write_prompts(root / "prompts.jsonl", PROMPTS)
        status = state / "pipeline" / "status.json"
        token = "soak-" + os.urandom(8).hex()
        (root / "agent.token").write_text(token + "\n")
        (root / "agent.token").chmod(0o600)
        stop = threading.Event()
        pipeline = agent = console = None
        master = -1
        with _fleet(state, gpus, speed) as profile_path:
            try:
                urls = []
                from tui.profiles import load_profile

                profile = load_profile(profile_path)
                for gpu in profile.gpus:
                    urls += ["--server", f"http://127.0.0.1:{profile.port_for(gpu)}"]
                pipeline = _start(
                    gpufleet_argv(
                        base, "generate", "--prompts", str(prompts), "--out", str(root / "out"),
                        "--status", str(status), "--fleet-timeout", "3600", *urls,
                    ),
                    env,
                    root / "pipeline.log",
                )  # fmt: skip
                agent_port = free_ports(1)[0]
                agent = _start(
                    gpufleet_argv(
                        base, "agent", "--profile", profile.name, "--port", str(agent_port),
                        "--token-file", str(root / "agent.token"), "--status", str(status),
                    ),
                    env,
                    root / "agent.log",
                )  # fmt: skip
                master, slave = pty.openpty()
                fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
                term = {**env, "TERM": "xterm-256color", "COLUMNS": "200", "LINES": "50"}
                console = subprocess.Popen(
                    gpufleet_argv(base, "console", "--profile", profile.name),
                    env=term, cwd=ROOT, stdin=slave, stdout=slave, stderr=slave,
                    start_new_session=True, close_fds=True,
                )  # fmt: skip
                os.close(slave)
                threading.Thread(target=_drain, args=(master, stop), daemon=True).start()
                url = f"http://127.0.0.1:{agent_port}"
                threading.Thread(target=_scrape, args=(url, token, stop), daemon=True).start()
                started = time.monotonic()
                end = started + minutes * 60
                while (now := time.monotonic()) < end:
                    sample = Sample(
                        now - started, _rss(console), _rss(pipeline), _rss(agent), _done(status)
                    )
                    samples.append(sample)
                    print(
                        f"{sample.t / 60:6.1f} min  console {sample.console:6.1f}  pipeline "
                        f"{sample.pipeline:6.1f}  agent {sample.agent:6.1f} MiB  done "
                        f"{sample.done:,}",
                        flush=True,
                    )
                    for proc, name in (
                        (console, "console"),
                        (pipeline, "pipeline"),
                        (agent, "agent"),
                    ):
                        if proc.poll() is not None:
                            raise RuntimeError(
                                f"the {name} exited ({proc.returncode}) at {sample.t:.0f} s"
                            )
                    time.sleep(max(0.0, min(sample_s, end - time.monotonic())))
            finally:
                stop.set()
                _stop(console)
                _stop(agent)
                _stop(pipeline)
                if master >= 0:
                    os.close(master)
    return samples


def growth(samples: list[Sample], warmup_s: float, field: str) -> tuple[float, float, float]:
    """(MiB after warm-up, MiB at the end, growth): medians of three samples each."""
    after = [s for s in samples if s.t >= warmup_s]
    if len(after) < 6:
        raise ValueError("too few samples after the warm-up")
    start = statistics.median(getattr(s, field) for s in after[:3])
    last = statistics.median(getattr(s, field) for s in after[-3:])
    return start, last, (last - start) / start


def main(argv: list[str] | None = None) -> int:
    """Run the soak; exit 1 when a process grew 5 % or more after warm-up."""
    parser = argparse.ArgumentParser(prog="python -m bench.bench_soak")
    parser.add_argument("--minutes", type=float, default=25.0)
    parser.add_argument("--speed", type=float, default=100.0)
    parser.add_argument("--sample", type=float, default=30.0, help="seconds between samples")
    parser.add_argument("--warmup", type=float, default=5.0, help="minutes of warm-up")
    parser.add_argument("--gpus", type=int, default=7)
    parser.add_argument("--base", type=Path, default=None, help="run another checkout's code")
    args = parser.parse_args(argv)
    samples = soak(args.minutes, args.speed, args.sample, args.gpus, args.base)
    hours = args.minutes * args.speed / 60
    print(
        f"\n{args.minutes:g} min at speed {args.speed:g}: {hours:.1f} h of simulated job; "
        f"{samples[-1].done:,} prompts done (the seed's job: {SEED_PROMPTS:,})"
    )
    ok = True
    for field in ("console", "pipeline", "agent"):
        start, last, grew = growth(samples, args.warmup * 60, field)
        ok &= grew < LIMIT
        print(f"{field:8s} {start:6.1f} -> {last:6.1f} MiB after warm-up: {grew:+.1%}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

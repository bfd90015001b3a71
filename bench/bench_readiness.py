"""Readiness detection: from the ready line in the log to "ready", gpufleet vs the seed's loop.

One run: a simulated fleet is launched from nothing by ``gpufleet apply`` (its verify step asks
``/ready`` every 0.5 s and at once when the followed log shows the ready line; SGLang 0.5.23's
``/health`` takes a second, a generation), and at the same moment the seed's own bash loop
(``bench/peers/seed_ready_loop.sh``: 5 s polls of ``/model_info``) starts on the same ports. The
bench process polls every log file every 2 ms and notes when "The server is fired up and ready
to roll!" was appended (the log's own stamp has 1 s resolution). gpufleet's moment is when its
``GPU n: READY`` line reaches the bench through a pipe; the loop prints its own clock per port.
The delay is that moment minus the append time; a negative delay is a false ready.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable
from pathlib import Path

import psutil

from bench.harness import Context, Row, Stat
from bench.simfleet import BASELINE, free_ports, sim_profile_text, sims_on_ports
from tui.sim.logfmt import READY_LINE

BENCH = "readiness detection"
ROOT = Path(__file__).resolve().parent.parent
SPEEDS = (6.1, 8.3, 10.7)
"""One --sim-speed per run: startups of ~5.4, ~4 and ~3.1 s (the seed's took ~33 s at speed 1),
so the ready line falls at a different phase of the 0.5 s verify poll in each run."""
_READY = READY_LINE.encode()


def _profile(path: Path, gpus: list[int], ports: list[int], logs: Path, speed: float) -> None:
    # The bare model and baseline knobs, no metrics flag: what the seed's loop was timed on.
    text = sim_profile_text(
        "bench-readiness", gpus, ports, str(logs), BASELINE, speed, seed_flags=False, metrics=False
    )
    path.write_text(text)


class _LogWatch:
    """Note when each log first holds the ready line (2 ms polls of size and new bytes)."""

    def __init__(self, logs: dict[int, Path]) -> None:
        self.logs = logs
        self.seen: dict[int, float] = {}
        self._offsets = {gpu: 0 for gpu in logs}
        self._tails = {gpu: b"" for gpu in logs}

    def poll(self) -> None:
        for gpu, path in self.logs.items():
            if gpu in self.seen:
                continue
            try:
                size = os.stat(path).st_size
            except FileNotFoundError:
                continue
            if size < self._offsets[gpu]:
                self._offsets[gpu], self._tails[gpu] = 0, b""  # rotated on launch: a new file
            if size == self._offsets[gpu]:
                continue
            now = time.time()
            with open(path, "rb") as handle:
                handle.seek(self._offsets[gpu])
                data = handle.read()
            self._offsets[gpu] += len(data)
            window = self._tails[gpu] + data
            if _READY in window:
                self.seen[gpu] = now
            self._tails[gpu] = window[-len(_READY) :]


def _reader(stream: Iterable[str], sink: list[tuple[float, str]]) -> None:
    for line in stream:
        sink.append((time.time(), line.rstrip("\n")))


def _kill_group(proc: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _kill_strays(ports: list[int]) -> None:
    """Kill simulated servers on these ports that a failed stop left behind."""
    for proc in sims_on_ports(ports):
        with contextlib.suppress(psutil.Error):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(psutil.Error):
            proc.kill()


_STOP = "from bench.simfleet import stop_all\nstop_all()\n"


def one_run(work: Path, gpus: list[int], speed: float) -> tuple[list[float], list[float]]:
    """Launch, watch, stop; returns (gpufleet delays, seed loop delays) in seconds."""
    ports = free_ports(len(gpus))
    logs = work / "logs"
    profile = work / "profile.toml"
    _profile(profile, gpus, ports, logs, speed)
    env = {**os.environ, "GPUFLEET_STATE_DIR": str(work / "state"), "PYTHONUNBUFFERED": "1"}
    watch = _LogWatch({g: logs / f"sglang_gpu{g}.log" for g in gpus})
    ours_out: list[tuple[float, str]] = []
    seed_out: list[tuple[float, str]] = []
    argv = [sys.executable, "-m", "tui", "apply", str(profile), "--no-measure", "--timeout", "60"]
    seed_argv = ["bash", str(ROOT / "bench/peers/seed_ready_loop.sh"), str(watch.logs[gpus[0]])]
    procs: list[subprocess.Popen[str]] = []
    try:
        for cmd, sink in ((argv, ours_out), ([*seed_argv, *map(str, ports)], seed_out)):
            proc = subprocess.Popen(
                cmd,
                cwd=ROOT,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                start_new_session=True,
            )
            procs.append(proc)
            threading.Thread(target=_reader, args=(proc.stdout, sink), daemon=True).start()
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            watch.poll()
            if len(watch.seen) == len(gpus) and all(p.poll() is not None for p in procs):
                break
            time.sleep(0.002)  # the watcher's poll interval: it is the measuring instrument
        else:
            raise RuntimeError(f"not every server got ready in time: {ours_out[-5:]}")
    finally:
        for proc in procs:
            _kill_group(proc)
        subprocess.run([sys.executable, "-c", _STOP], cwd=ROOT, env=env, capture_output=True)
        _kill_strays(ports)
    ours = []
    for when, line in ours_out:
        parts = line.split()
        if len(parts) >= 3 and parts[0] == "GPU" and parts[2] == "READY":
            ours.append(when - watch.seen[int(parts[1].rstrip(":"))])
    by_port = dict(zip(ports, gpus, strict=True))
    seed = []
    for _, line in seed_out:
        parts = line.split()
        if len(parts) == 3 and parts[0] == "READY":
            seed.append(float(parts[2]) - watch.seen[by_port[int(parts[1])]])
    if len(ours) != len(gpus) or len(seed) != len(gpus):
        raise RuntimeError(f"missing ready reports: gpufleet {ours_out}, seed {seed_out}")
    return ours, seed


def run(ctx: Context) -> list[Row]:
    """Three runs of a 5-GPU simulated fleet (one of 3 GPUs when quick); return the rows."""
    gpus = [0, 1, 2] if ctx.quick else [0, 1, 2, 3, 4]
    speeds = SPEEDS[1:2] if ctx.quick else SPEEDS
    runs = len(speeds)
    ours: list[float] = []
    seed: list[float] = []
    for n, speed in enumerate(speeds):
        work = ctx.scratch / f"ready-{n}"
        work.mkdir()
        a, b = one_run(work, gpus, speed)
        ours += a
        seed += b
    ours_s, seed_s = Stat.of(ours), Stat.of(seed)
    early = sum(1 for d in seed if d < 0)
    peer = "seed's bash loop (5 s polls of /model_info)"
    return [
        Row(
            BENCH,
            "ready line appended -> marked ready (s)",
            ours_s,
            peer,
            seed_s,
            "median < 0.5 s",
            ours_s.median < 0.5,
            note=(
                f"{len(gpus)} simulated servers x {runs} runs at --sim-speed "
                f"{', '.join(f'{v:g}' for v in speeds)}; "
                f"gpufleet asks /ready every 0.5 s (ApplyOptions.poll_s) and at once on the ready "
                f"line (the sim's /health takes >= 1 s, as 0.5.23's). The seed's "
                f"loop declared {early} of {len(seed)} servers ready BEFORE the ready line "
                f"(earliest {min(seed):.2f} s): /model_info answers during warmup, before the "
                "server can serve"
            ),
            fmt="{:.3f}",
        ),
        Row(
            BENCH,
            "false ready (declared before the ready line)",
            Stat.of([float(sum(1 for d in ours if d < 0))]),
            peer,
            Stat.of([float(early)]),
            "0",
            all(d >= 0 for d in ours),
            fmt="{:.0f}",
        ),
    ]

"""Retune cycle: wall time of a full apply on 7 simulated GPUs, against the seed's bash sequence.

Per run, on a 7-GPU simulated fleet at a fixed speed factor (already running the baseline):

- **floor**: the servers' own startup: the candidate profile's seven servers launched by a bare
  ``Popen`` (no tool), from launch to the moment "ready to roll" is appended to the slowest log
  (the bench polls the logs every 2 ms);
- **gpufleet**: ``gpufleet apply CANDIDATE --no-measure`` from start to exit (stop, wait for the
  memory release, launch, follow the logs, ready on ``/ready`` on every GPU, verify);
- **seed**: the seed's manual sequence in bash (``bench/peers/seed_retune.sh``: kill, ``setsid``
  relaunch, its 5 s ``/model_info`` poll loop).

The tool's overhead is gpufleet's wall time minus the floor (target: under 1 s). A second
floor adds the old servers' own stop (bare SIGTERM to the last group member's exit), which a
retune cannot skip: what gpufleet adds over both is reported too. A third takes the servers' own
*drain* as their stop (SIGTERM to each main pid, as ``apply`` does by default, to the last group
member's exit): SGLang 0.5.23's ``sigterm_watchdog`` (``srt/managers/tokenizer_manager.py``)
looks at its flag every 5 s (0.5 s at speed 10), then shuts its scheduler down and waits for it
in 0.1 s steps, so a drain takes longer than killing the group, by the server's own doing.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from bench.harness import Context, Row, Stat
from bench.simfleet import AGGRESSIVE, BASELINE, free_ports, sim_profile_text, sims_on_ports
from tui.profiles import load_profile
from tui.profiles.launch_args import argv_for
from tui.sim.logfmt import READY_LINE

BENCH = "retune cycle"
ROOT = Path(__file__).resolve().parent.parent
GPUS = list(range(7))
SPEED = 10.0
"""Fixed speed factor: a server's own startup is ~3.3 s of phases plus Python's start."""
KNOBS = {"baseline": BASELINE, "aggressive": AGGRESSIVE}


def _profile(path: Path, name: str, ports: list[int], logs: Path) -> Path:
    # No metrics flag: the servers start as the seed's did, and both sides time the same ones.
    text = sim_profile_text(name, GPUS, ports, str(logs), KNOBS[name], SPEED, metrics=False)
    path.write_text(text)
    return path


@dataclass(frozen=True, slots=True)
class ApplyTimes:
    """One ``gpufleet apply``, timed from its start to its exit, with the two stretches that are
    gpufleet's alone (read from its output lines as they arrive)."""

    wall_s: float
    """Start to exit."""
    start_s: float
    """Start to its first 'GPU N: stopping' line: the command's own start (interpreter,
    imports, profile and flag check, preflight) before any server is touched."""
    tail_s: float
    """Its last 'GPU N: READY' line to its exit (verify, fleet state, journal, exit)."""


def _apply(profile: Path, env: dict[str, str]) -> ApplyTimes:
    argv = [sys.executable, "-m", "tui", "apply", str(profile), "--no-measure"]
    t0 = time.perf_counter()
    stopping = ready = None
    lines = []
    with subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:  # the events are printed (flushed) as they happen
            now = time.perf_counter() - t0
            lines.append(line)
            if stopping is None and ": stopping (" in line:
                stopping = now
            if ": READY in " in line:
                ready = now
        code = proc.wait(timeout=300)
    wall = time.perf_counter() - t0
    if code != 0 or stopping is None or ready is None:
        raise RuntimeError(f"apply failed ({code}): {''.join(lines)[-2000:]}")
    return ApplyTimes(wall, stopping, wall - ready)


def _stop_all(env: dict[str, str]) -> None:
    code = "from bench.simfleet import stop_all; stop_all(release_s=20.0)"
    subprocess.run([sys.executable, "-c", code], env=env, timeout=120, check=False)


def _server_pgids(ports: list[int]) -> list[int]:
    import psutil

    found = []
    for proc in sims_on_ports(ports):
        with contextlib.suppress(psutil.Error):
            found.append(os.getpgid(proc.info["pid"]))
    return sorted(set(found))


def _kill_groups(pgids: list[int]) -> None:
    for pgid in pgids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)


def _bare_stop(procs: list[subprocess.Popen[bytes]], drain: bool = False) -> float:
    """The servers' own stop: SIGTERM every group (``drain``: every main pid), until every
    member has exited (2 ms polls)."""
    import psutil

    pgids = {p.pid for p in procs}
    members = []
    for proc in psutil.process_iter(["pid"]):
        with contextlib.suppress(psutil.Error, ProcessLookupError):
            if os.getpgid(proc.info["pid"]) in pgids:
                members.append(proc)
    t0 = time.perf_counter()
    for pgid in pgids:
        with contextlib.suppress(ProcessLookupError):
            if drain:
                os.kill(pgid, signal.SIGTERM)  # the leader: the group's pgid is its pid
            else:
                os.killpg(pgid, signal.SIGTERM)
    deadline = t0 + 60
    while time.perf_counter() < deadline:
        for p in procs:
            p.poll()  # reap our own children, so they do not linger as zombies
        alive = []
        for proc in members:
            with contextlib.suppress(psutil.NoSuchProcess):
                if proc.status() != psutil.STATUS_ZOMBIE:
                    alive.append(proc)
        if not alive:
            return time.perf_counter() - t0
        members = alive
        time.sleep(0.002)
    raise RuntimeError("floor servers did not exit within 60 s of SIGTERM")


def _floor(
    profile_path: Path, env: dict[str, str], logs: Path, drain: bool = False
) -> tuple[float, float]:
    """The servers' own startup (bare launches, to the slowest ready line) and own stop (the
    group's SIGTERM, or with ``drain`` the main pids')."""
    profile = load_profile(profile_path)
    procs, logs_of = [], []
    t0 = time.perf_counter()
    for gpu in GPUS:
        log = logs / f"floor_gpu{gpu}.log"
        logs_of.append(log)
        handle = log.open("wb")
        argv = argv_for(profile, gpu)
        genv = {**env, "CUDA_VISIBLE_DEVICES": str(gpu)}
        procs.append(
            subprocess.Popen(
                argv, stdout=handle, stderr=subprocess.STDOUT, env=genv, start_new_session=True
            )
        )
    ready = [READY_LINE.encode()] * len(GPUS)
    done: dict[int, float] = {}
    deadline = t0 + 120
    while len(done) < len(GPUS) and time.perf_counter() < deadline:
        for gpu, log in enumerate(logs_of):
            if gpu not in done and ready[gpu] in log.read_bytes():
                done[gpu] = time.perf_counter() - t0
        time.sleep(0.002)  # the probe's own resolution
    if len(done) < len(GPUS):
        _kill_groups([p.pid for p in procs])
        raise RuntimeError("floor servers did not all become ready")
    time.sleep(1.0)  # idle a moment, as the fleet an apply stops has been
    try:
        stop_s = _bare_stop(procs, drain)
    finally:
        _kill_groups([p.pid for p in procs])
        for p in procs:
            p.wait()
    return max(done.values()), stop_s


def _seed(profile_path: Path, env: dict[str, str], logs: Path, ports: list[int]) -> float:
    profile = load_profile(profile_path)
    argv0 = argv_for(profile, 0)
    i = argv0.index("--port")
    server_argv = argv0[:i] + argv0[i + 2 :]
    pgids = ",".join(str(p) for p in _server_pgids(ports))
    script = ROOT / "bench" / "peers" / "seed_retune.sh"
    cmd = ["bash", str(script), str(logs), pgids, ",".join(map(str, ports)), "--", *server_argv]
    t0 = time.perf_counter()
    result = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=400, check=False)
    wall = time.perf_counter() - t0
    if result.returncode != 0:
        raise RuntimeError(f"seed sequence failed: {result.stdout[-1000:]}")
    _kill_groups(_server_pgids(ports))
    return wall


def run(ctx: Context) -> list[Row]:
    runs = 1 if ctx.quick else 2
    tool, floor, stop, seed, drain_floor = [], [], [], [], []
    own_start, own_tail = [], []
    for n in range(runs):
        state = ctx.scratch / f"retune-{n}"
        logs = state / "logs"
        logs.mkdir(parents=True)
        ports = free_ports(len(GPUS))
        env = {**os.environ, "GPUFLEET_STATE_DIR": str(state), "PYTHONPATH": str(ROOT)}
        base = _profile(state / "baseline.toml", "baseline", ports, logs)
        cand = _profile(state / "aggressive.toml", "aggressive", ports, logs)
        try:
            startup_s, stop_s = _floor(cand, env, logs)
            floor.append(startup_s)
            stop.append(stop_s)
            startup2_s, drain_s = _floor(cand, env, logs, drain=True)
            drain_floor.append(startup2_s + drain_s)
            _apply(base, env)
            times = _apply(cand, env)
            tool.append(times.wall_s)
            own_start.append(times.start_s)
            own_tail.append(times.tail_s)
            seed.append(_seed(base, env, logs, ports))
        finally:
            _stop_all(env)
            _kill_groups(_server_pgids(ports))
    tool_s, floor_s, seed_s = Stat.of(tool), Stat.of(floor), Stat.of(seed)
    overhead = Stat.of([t - f for t, f in zip(tool, floor, strict=True)])
    both = [f + s for f, s in zip(floor, stop, strict=True)]
    over_both = Stat.of([t - b for t, b in zip(tool, both, strict=True)])
    over_drain = Stat.of([t - b for t, b in zip(tool, drain_floor, strict=True)])
    note = (
        f"7 simulated B200s at --sim-speed {SPEED:g}, baseline -> aggressive; floor = bare "
        "launches to the slowest 'ready to roll' line (2 ms log polling). gpufleet's wall also "
        "includes stopping the old servers and waiting for their memory to be released, which "
        "the seed's sequence skips (it relaunches at once and learns of readiness only at its "
        "next 5 s poll, from /model_info, which answers before the server can serve)"
    )
    return [
        Row(BENCH, "full apply, wall (s)", tool_s, "seed's bash sequence", seed_s,
            "faster than the seed", tool_s.median < seed_s.median, note=note, fmt="{:.2f}"),
        Row(BENCH, "gpufleet over the servers' own startup (s)", overhead,
            "servers' own startup (floor)", floor_s, "< 1 s", overhead.median < 1.0, fmt="{:.2f}",
            note=STOP_NOTE),
        Row(BENCH, "gpufleet over the servers' own stop + startup (s)", over_both,
            "servers' own SIGTERM stop + startup", Stat.of(both), "report", None, fmt="{:.2f}"),
        Row(BENCH, "gpufleet over the servers' own drain + startup (s)", over_drain,
            "servers' own drain (SIGTERM to each main pid) + startup", Stat.of(drain_floor),
            "< 1 s", over_drain.median < 1.0, fmt="{:.2f}", note=DRAIN_NOTE),
        Row(BENCH, "gpufleet alone: start -> first GPU stopping (s)", Stat.of(own_start),
            "-", None, "report", None, fmt="{:.3f}", note=OWN_NOTE),
        Row(BENCH, "gpufleet alone: last GPU ready -> exit (s)", Stat.of(own_tail),
            "-", None, "report", None, fmt="{:.3f}"),
    ]  # fmt: skip


OWN_NOTE = (
    "the two stretches of the apply that are gpufleet's alone, from its output lines as they "
    "arrive: on 2 shared cores the rows above move by a second from run to run (the drain "
    "ends at SGLang's next look, every 0.5 s at speed 10; the startups share the cores), "
    "these by hundredths"
)

DRAIN_NOTE = (
    "apply drains by default (SIGTERM to the main pid; SGLang 0.5.23's sigterm_watchdog sees it "
    "at its next 5 s check, 0.5 s at speed 10, then stops its scheduler): this floor stops the "
    "servers the same way, a second bare launch of the candidate in the same run"
)

STOP_NOTE = (
    "a retune must stop the old servers before their GPUs can take the new ones; the last row "
    "counts the servers' own stop as well (bare SIGTERM of every process group to the last "
    "member's exit, 2 ms polls, on the idle fleet). What remains is gpufleet's: the CLI's "
    "start and preflight (~0.4 s), identity checks and process-group scans before and after "
    "the signal, and waiting for the GPU memory's release"
)

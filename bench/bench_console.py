"""Console overhead: the console on the busy 7-GPU simulated fleet vs a one-label Textual clock.

Setup (once): the demo's fleet (``sim-baseline``, 7 simulated B200s at speed 20) on 7 free ports
under a scratch ``GPUFLEET_STATE_DIR``, and the demo's generation pipeline driving it, so every
server is decoding and every panel's numbers change each second (the honest steady state: an idle
fleet would flatter the console). Then, alternating, in a real pty: ``gpufleet console --profile
sim-baseline`` (what ``gpufleet demo`` opens) and ``bench/floor_clock.py`` (one Label redrawn
each second), each measured for ``SECONDS`` after ``WARMUP``. CPU is the program's whole process
tree (the fleet and the pipeline are not its children). Rows: CPU s/min against the floor,
console CPU as % of one core, peak RSS, bytes/s to the terminal, at 200x50 and 80x24.

    python -m bench console            # full (about 3 minutes of measuring)
    python -m bench.bench_console --seconds 20 --runs 1   # a quick look
    python -m bench.bench_console --runs 3 --plain keepalive --plain render   # what each buys
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from bench.harness import Context, Row, Stat, gpufleet_argv, unwind_on_sigterm
from bench.plain_variants import AS_IS, checked, earned_table, variant_env, variant_name
from bench.ports import free_ports
from bench.ptyrun import PtyCost, measure

BENCH = "console overhead"
ROOT = Path(__file__).resolve().parent.parent
SECONDS = 60.0
"""Measured window per run (the issue's 60 s)."""
WARMUP = 8.0
"""Seconds after start before measuring (imports, first polls, the panels reaching ready)."""
CPU_RATIO_TARGET = 3.0
"""Console CPU within this many times the floor's."""
TTY_TARGET = 2048.0
"""Bytes per second to the terminal at steady state."""
CORE_TARGET = 5.0
"""Percent of one core (issue 3)."""
LOAD_SETTLE_S = 5.0
"""Seconds from starting the pipeline to the first loaded measurement."""


def _ports_free(base: int, count: int) -> bool:
    for port in range(base, base + count):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                return False
    return True


def _base_port(count: int) -> int:
    """30000 when 30000.. are free (the profile's own), else a free run of ``count`` ports."""
    if _ports_free(30000, count):
        return 30000
    return free_ports(count, consecutive=True)[0]


@contextlib.contextmanager
def busy_fleet(
    state: Path, gpus: int = 7, *, idle_first: bool = False
) -> Iterator[Callable[[], None]]:
    """The demo's fleet and pipeline under ``state``; everything is stopped on exit.

    Yields a function that starts the pipeline (the load); it has already been called unless
    ``idle_first`` (then the caller measures the idle fleet first, and calls it after).
    """
    os.environ["GPUFLEET_STATE_DIR"] = str(state)
    from bench.simfleet import stop_all
    from tui.ops.demo import demo_profile, demo_prompts_file, ensure_prompts, pipeline_config
    from tui.ops.pipeline import start_pipeline, stop_pipelines
    from tui.ops.service import FleetOps
    from tui.ops.simfleet import sim_profile, wait_ready
    from tui.state.fleet_state import read_records

    profile = demo_profile(sim_profile(None), gpus, None, _base_port(gpus))
    up = asyncio.run(FleetOps(profile, by="bench").start(profile))
    config = pipeline_config(profile, demo_prompts_file(), 3600.0)
    try:
        failures = [why for why in up.values() if why]
        if failures:
            raise RuntimeError("; ".join(failures))
        records = list(read_records().values())
        not_ready = [r.message for r in wait_ready(records, 120.0) if not r.ready]
        if not_ready:
            raise RuntimeError("; ".join(not_ready))
        ensure_prompts(demo_prompts_file())

        def load() -> None:
            start_pipeline(config)
            time.sleep(LOAD_SETTLE_S)  # every server decoding before anything is measured

        if not idle_first:
            load()
        yield load
    finally:
        stop_pipelines(config.status_path)
        stop_all(release_s=30.0)


def console_argv(base: Path | None = None) -> list[str]:
    """What ``gpufleet demo`` opens on a running fleet (from ``base``'s code when given)."""
    return gpufleet_argv(base, "console", "--profile", "sim-baseline")


def floor_argv() -> list[str]:
    """The floor: one Label redrawn each second."""
    return [sys.executable, str(ROOT / "bench" / "floor_clock.py")]


def _measure(
    argv: list[str],
    seconds: float,
    rows: int,
    cols: int,
    env: dict[str, str] | None = None,
    ready: bytes | None = None,
) -> PtyCost:
    full = {"PYTHONPATH": str(ROOT), **(env or {})}
    return measure(
        argv, seconds=seconds, warmup=WARMUP, rows=rows, cols=cols, env=full, ready_marker=ready
    )


CONSOLE_READY = b"GPU 6"
"""What the console shows once the fleet's first reading is drawn (the last panel's title): the
warm-up starts there, so a start slowed by a busy machine never spills its first frames into
the measured window (it did, under a load of 15 on two cores: 2-4 CPU-s/min runs)."""


def _rows(size: str, ours: list[PtyCost], floor: list[PtyCost], note: str) -> list[Row]:
    cpu = Stat.of([c.cpu_per_minute for c in ours])
    cpu_floor = Stat.of([c.cpu_per_minute for c in floor])
    core = Stat.of([c.cpu_per_minute / 60 * 100 for c in ours])
    rss = Stat.of([c.peak_rss / 2**20 for c in ours])
    rss_floor = Stat.of([c.peak_rss / 2**20 for c in floor])
    tty = Stat.of([c.bytes_per_second for c in ours])
    tty_floor = Stat.of([c.bytes_per_second for c in floor])
    floor_name = "floor: 1-label clock"
    ratio = cpu.median / cpu_floor.median if cpu_floor.median else float("inf")
    return [
        Row(
            BENCH, f"CPU s/min, 7 panels busy, {size}", cpu, floor_name, cpu_floor,
            f"ratio <= {CPU_RATIO_TARGET:g}", ratio <= CPU_RATIO_TARGET, note,
        ),
        Row(
            BENCH, f"CPU % of one core, {size}", core, "issue 3 target", None,
            f"< {CORE_TARGET:g}%", core.median < CORE_TARGET, fmt="{:.2f}",
        ),
        Row(BENCH, f"peak RSS MiB, {size}", rss, floor_name, rss_floor, "report", None),
        Row(
            BENCH, f"bytes/s to the terminal, {size}", tty, floor_name, tty_floor,
            f"< {TTY_TARGET:g} B/s", tty.median < TTY_TARGET, fmt="{:.0f}",
        ),
    ]  # fmt: skip


def _idle_rows(ours: list[PtyCost], floor: list[PtyCost]) -> list[Row]:
    """The idle fleet's rows (servers up, no pipeline): the screen barely changes."""
    cpu = Stat.of([c.cpu_per_minute for c in ours])
    cpu_floor = Stat.of([c.cpu_per_minute for c in floor])
    tty = Stat.of([c.bytes_per_second for c in ours])
    tty_floor = Stat.of([c.bytes_per_second for c in floor])
    floor_name = "floor: 1-label clock"
    ratio = cpu.median / cpu_floor.median if cpu_floor.median else float("inf")
    note = "the same fleet before the pipeline starts: servers ready and idle"
    return [
        Row(
            BENCH, "CPU s/min, 7 panels idle, 200x50", cpu, floor_name, cpu_floor,
            f"ratio <= {CPU_RATIO_TARGET:g}", ratio <= CPU_RATIO_TARGET, note,
        ),
        Row(
            BENCH, "bytes/s to the terminal, idle, 200x50", tty, floor_name, tty_floor,
            f"< {TTY_TARGET:g} B/s", tty.median < TTY_TARGET, fmt="{:.0f}",
        ),
    ]  # fmt: skip


def _alternate(runs: int, window: float, rows: int, cols: int) -> tuple[list[PtyCost], ...]:
    """console, floor, console, floor, ...: ``runs`` of each, alternating."""
    ours: list[PtyCost] = []
    floor: list[PtyCost] = []
    for _ in range(runs):
        ours.append(_measure(console_argv(), window, rows, cols))
        floor.append(_measure(floor_argv(), window, rows, cols))
    return ours, floor


def monitor_cpu_per_minute(polls: int = 15) -> float:
    """CPU s/min of the fleet monitor alone (no UI) at one poll a second, in this process."""
    import asyncio

    from tui.fleet.monitor import FleetMonitor
    from tui.gpu.simulated import SimulatedSource
    from tui.ops.demo import spec_for_profile
    from tui.profiles import load_named
    from tui.state.fleet_state import profile_of, read_running

    profile = load_named("sim-baseline")
    docs = [p.current for p in read_running().values() if p.current_name == profile.name]
    if docs and docs[0] is not None:
        profile = profile_of(docs[0])

    async def go() -> float:
        monitor = FleetMonitor(spec_for_profile(profile), SimulatedSource())
        try:
            for _ in range(3):  # first polls read the logs' tails and /server_info
                await monitor.poll()
            start = time.process_time()
            for _ in range(polls):
                await monitor.poll()
                await asyncio.sleep(0.2)
            return (time.process_time() - start) / polls * 60.0
        finally:
            await monitor.aclose()

    return asyncio.run(go())


def monitor_note(cpu: float) -> str:
    """What the monitor alone costs (``cpu`` CPU-s/min), for the rows' note."""
    return (
        f"what stands in the way of the 3x target: the fleet monitor alone (7 x /metrics on kept "
        f"connections, scanned for a dozen families, simulated GPU records, log tails; no UI) "
        f"costs {cpu:.2f} CPU-s/min "
        f"({cpu / 60 * 1000:.1f} ms a poll), already {cpu / FLOOR_HINT:.0f}x a floor of "
        f"{FLOOR_HINT} before any drawing; the rest is Textual's per-frame work for ~7-20 "
        "changed values a second"
    )


FLOOR_HINT = 0.2
"""The floor's usual CPU s/min on the 2-core dev machine (for the note's arithmetic only)."""


def run(ctx: Context) -> list[Row]:
    """Console vs floor under load (the ratio measured in this run), then the idle rows.

    Idle first (the fleet up, no pipeline): one console and one floor run at 200x50. Then the
    pipeline starts and, under load, console and floor alternate: three runs each at 200x50,
    one each at 80x24 (half as long). About 6 minutes with warm-ups (a quick run: about 2).
    """
    seconds = 15.0 if ctx.quick else SECONDS / 2
    rows: list[Row] = []
    with busy_fleet(ctx.scratch / "state", idle_first=True) as load:
        idle = _alternate(1, seconds, 50, 200)
        load()
        note = f"{NOTE}; {monitor_note(monitor_cpu_per_minute())}"
        for (r, c), runs, window in (
            ((50, 200), 1 if ctx.quick else 3, seconds),
            ((24, 80), 1, seconds / 2),
        ):
            ours, floor = _alternate(runs, window, r, c)
            rows += _rows(f"{c}x{r}", ours, floor, note)
    return rows + _idle_rows(*idle)


NOTE = (
    "the fleet and the demo pipeline run outside the console's process tree; the servers are "
    "decoding throughout, so every panel's load numbers change each second"
)


def main(argv: list[str] | None = None) -> int:
    """A standalone look: ``--seconds``, ``--runs``, ``--idle``, ``--plain SWITCHES`` (the console
    with those replacements off, ``GPUFLEET_PLAIN``; repeatable), ``--base DIR`` (the console of
    an earlier checkout): all measured in one alternation, each ``--plain`` variant paired with
    the console's run of its rotation (``bench.plain_variants``)."""
    unwind_on_sigterm()
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--idle", action="store_true", help="also measure the idle fleet first")
    parser.add_argument("--base", type=Path, default=None, help="an earlier checkout's root")
    parser.add_argument(
        "--plain",
        action="append",
        metavar="SWITCHES",
        help="also the console with these replacements off (a GPUFLEET_PLAIN value; repeatable)",
    )
    args = parser.parse_args(argv)
    try:
        checked(args.plain or [])
    except ValueError as error:
        parser.error(str(error))
    ready = CONSOLE_READY
    programs: dict[str, tuple[list[str], dict[str, str], bytes | None]] = {
        AS_IS: (console_argv(), variant_env(""), ready)
    }
    for switches in args.plain or []:
        programs[variant_name(switches)] = (console_argv(), variant_env(switches), ready)
    if args.base is not None:
        programs["console before"] = (console_argv(args.base), variant_env(""), ready)
    programs["floor"] = (floor_argv(), {}, None)
    with (
        tempfile.TemporaryDirectory(prefix="bench-console-") as scratch,
        busy_fleet(Path(scratch) / "state", idle_first=True) as load,
    ):
        phases = ["idle", "load"] if args.idle else ["load"]
        for phase in phases:
            if phase == "load":
                load()
            costs: dict[str, list[PtyCost]] = {name: [] for name in programs}
            for _ in range(args.runs):
                for name, (prog, env, marker) in programs.items():
                    costs[name].append(_measure(prog, args.seconds, 50, 200, env, marker))
            floor = Stat.of([c.cpu_per_minute for c in costs["floor"]]).median
            for name, runs in costs.items():
                cpu = Stat.of([c.cpu_per_minute for c in runs])
                tty = Stat.of([c.bytes_per_second for c in runs])
                rss = Stat.of([c.peak_rss / 2**20 for c in runs])
                print(
                    f"{phase:4} {name:22} CPU-s/min {cpu.text('{:.2f}'):24} "
                    f"x floor {cpu.median / floor:5.2f}  B/s {tty.text('{:.0f}'):20} "
                    f"RSS MiB {rss.text('{:.0f}')}",
                    flush=True,
                )
            table = earned_table(costs)
            if table:
                print("\n".join([f"{phase}:", *table]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

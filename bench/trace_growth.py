"""Where the console's memory grows: tracemalloc snapshots of a running console, diffed.

The demo's fleet and pipeline (``bench.bench_console.busy_fleet``: 7 simulated B200s at the
demo's speed, every server decoding) and the console on it in a real pty, with ``tracemalloc``
started in the console's own process; a thread there dumps a snapshot every ``--every`` seconds.
At the end the first snapshot after ``--warmup`` is compared with the last, and the allocation
sites that grew most are printed (by line, with their traceback's innermost frames). This is
the tool that found what issue 31's 57 -> 67 MB in 21 minutes was; ``bench.bench_soak`` is the
benchmark that shows it flat.

    python -m bench.trace_growth --minutes 12 --every 120 --top 25
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from bench.bench_console import busy_fleet
from bench.ptyrun import measure

WRAPPER = """
import os, sys, threading, time, tracemalloc, runpy
tracemalloc.start(int(os.environ["TRACE_FRAMES"]))
out, every = os.environ["TRACE_DIR"], float(os.environ["TRACE_EVERY"])
def dump():
    n = 0
    while True:
        time.sleep(every)
        tracemalloc.take_snapshot().dump(os.path.join(out, f"snap{n:03d}.pickle"))
        n += 1
threading.Thread(target=dump, daemon=True, name="trace-dump").start()
sys.argv = ["tui", *sys.argv[1:]]
runpy.run_module("tui", run_name="__main__", alter_sys=True)
"""


def report(directory: Path, warmup_snaps: int, top: int) -> None:
    """Print the sites that grew from snapshot ``warmup_snaps`` to the last one."""
    snaps = sorted(directory.glob("snap*.pickle"))
    if len(snaps) <= warmup_snaps:
        print(f"only {len(snaps)} snapshot(s)")
        return
    first = tracemalloc.Snapshot.load(str(snaps[warmup_snaps]))
    last = tracemalloc.Snapshot.load(str(snaps[-1]))
    keep = [tracemalloc.Filter(False, tracemalloc.__file__)]
    first, last = first.filter_traces(keep), last.filter_traces(keep)
    total = sum(s.size for s in last.statistics("filename")) / 2**20
    print(f"{snaps[warmup_snaps].name} -> {snaps[-1].name}: traced {total:.1f} MiB at the end")
    for stat in last.compare_to(first, "traceback")[:top]:
        if stat.size_diff <= 0:
            continue
        print(f"+{stat.size_diff / 1024:8.1f} KiB  {stat.count_diff:+7d} blocks")
        for line in stat.traceback.format()[-8:]:
            print("      " + line)


def main(argv: list[str] | None = None) -> int:
    """Run the console under tracemalloc on the busy demo fleet; print what grew."""
    parser = argparse.ArgumentParser(prog="python -m bench.trace_growth")
    parser.add_argument("--minutes", type=float, default=12.0)
    parser.add_argument("--every", type=float, default=120.0)
    parser.add_argument("--warmup-snaps", type=int, default=1)
    parser.add_argument("--frames", type=int, default=12)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--out", type=Path, default=None, help="keep the snapshots here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="gpufleet-trace-") as tmp:
        out = args.out or Path(tmp) / "snaps"
        out.mkdir(parents=True, exist_ok=True)
        with busy_fleet(Path(tmp) / "state"):
            env = {
                "TRACE_DIR": str(out),
                "TRACE_EVERY": str(args.every),
                "TRACE_FRAMES": str(args.frames),
                "PYTHONPATH": str(Path(__file__).resolve().parent.parent),
            }
            argv_ = [sys.executable, "-c", WRAPPER, "console", "--profile", "sim-baseline"]
            started = time.monotonic()
            cost = measure(argv_, seconds=args.minutes * 60, warmup=5.0, env=env)
            print(
                f"ran {time.monotonic() - started:.0f} s, peak RSS {cost.peak_rss / 2**20:.1f} MiB"
            )
        report(out, args.warmup_snaps, args.top)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

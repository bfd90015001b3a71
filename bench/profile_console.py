"""Where the console's CPU goes under load: per-thread CPU and a py-spy profile of one window.

Runs one of ``bench.gpu_overhead``'s scenarios (the same fleet, clients and GPU load), the
console in the same 200x50 pty, and over the measured window records each thread's CPU time
(``/proc/PID/task/TID/stat``, named by ``py-spy dump``) and a sampled profile (``py-spy record
--format raw --threads``: folded stacks, one line per distinct stack, with its sample count).
With ``--loop-cost`` (``bench/loop_cost``), ``loop-cost.txt`` also charges the window's
thread CPU to each event-loop callback, Textual message and poll function (with ``--no-spy``:
the sampler's own cost stays out); ``--wrap module:Class.method`` charges more functions, e.g.
the UI's own (``tui.ui.grid.gpu_panel:GpuPanelView.lines``). Not a ratio benchmark: it says
where to cut, ``bench.gpu_overhead`` says whether a cut paid.

    python -m bench.profile_console --scenario seven --seconds 30 --out /tmp/prof
    python -m bench.profile_console --local --no-spy --loop-cost --out /tmp/prof
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from bench.gpu_overhead import SCENARIOS, console_argv, fleet
from bench.harness import unwind_on_sigterm
from bench.ptyrun import measure

TICKS = os.sysconf("SC_CLK_TCK")
ROOT = Path(__file__).resolve().parent.parent
LOOP_COST_WRAP = ",".join(
    [
        "tui.fleet.monitor:FleetMonitor._host_side",
        "tui.fleet.monitor:FleetMonitor._sample_gpus",
        "tui.fleet.monitor:FleetMonitor._steady_loads",
        "tui.fleet.monitor:FleetMonitor._read_profiles",
        "tui.servers.batch_fetch:BatchFetcher.fetch_all",
        "tui.history.recorder:HistoryRecorder.flush_if_due",
    ]
)
"""The thread work ``--loop-cost`` charges by function (the poll's blocking part)."""


def thread_cpu(pid: int) -> dict[int, float]:
    """CPU seconds (user + system) of each thread of ``pid``, by thread id."""
    found: dict[int, float] = {}
    for entry in os.scandir(f"/proc/{pid}/task"):
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue  # the thread ended between the listing and the read
        fields = stat.rsplit(")", 1)[1].split()
        found[int(entry.name)] = (int(fields[11]) + int(fields[12])) / TICKS
    return found


def fold(raw: Path, depth: int) -> list[str]:
    """The raw profile's heaviest stacks cut to their innermost ``depth`` frames, and its
    heaviest single functions (self samples), as text lines."""
    inner: Counter[str] = Counter()
    leaf: Counter[str] = Counter()
    threads: Counter[str] = Counter()
    total = 0
    for line in raw.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = stack.split(";")
        threads[frames[0]] += n
        inner[";".join(frames[-depth:])] += n
        leaf[frames[-1]] += n
    out = [f"samples {total}", "", "## threads"]
    out += [f"{n:6d} {100 * n / total:5.1f}% {name}" for name, n in threads.most_common()]
    out += ["", "## self"]
    out += [f"{n:6d} {100 * n / total:5.1f}% {name}" for name, n in leaf.most_common(60)]
    out += ["", f"## innermost {depth} frames"]
    out += [f"{n:6d} {100 * n / total:5.1f}% {name}" for name, n in inner.most_common(60)]
    return out


def loop_cost_report(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """Per second over the window between two of ``bench/loop_cost``'s documents: the process
    CPU, then each table (loop handles, Textual messages, wrapped functions), heaviest first."""
    seconds = float(after["at"]) - float(before["at"])
    if seconds <= 0:
        return ["loop cost: no window between the two documents"]
    cpu = float(after["process_cpu"]) - float(before["process_cpu"])
    out = [f"window {seconds:.1f} s, process CPU {1000 * cpu / seconds:.2f} ms/s"]
    for table in ("handles", "messages", "functions"):
        now, then = after[table], before.get(table, {})
        assert isinstance(now, dict) and isinstance(then, dict)
        rows = []
        for key, (count, spent) in now.items():
            count0, spent0 = then.get(key, (0, 0.0))
            if spent > spent0:
                calls = (count - count0) / seconds
                per_s = 1000 * (spent - spent0) / seconds
                rows.append((per_s, calls, key))
        rows.sort(reverse=True)
        out += ["", f"## {table}: {sum(r[0] for r in rows):.2f} ms/s"]
        for per_s, calls, key in rows[:30]:
            each = 1000 * per_s / calls if calls else 0.0
            out.append(f"{per_s:7.3f} ms/s {calls:6.1f}/s {each:8.1f} us  {key}")
    return out


def main(argv: list[str] | None = None) -> int:
    """Profile the console over one window of a scenario; write the files under ``--out``."""
    unwind_on_sigterm()
    parser = argparse.ArgumentParser()
    parser.add_argument("--scenario", choices=sorted(SCENARIOS), default="seven")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--warmup", type=float, default=8.0)
    parser.add_argument("--rate", type=int, default=200, help="py-spy samples per second")
    parser.add_argument(
        "--blocking", action="store_true", help="py-spy pauses the console for each sample"
    )
    parser.add_argument("--no-spy", action="store_true", help="per-thread CPU only")
    parser.add_argument(
        "--loop-cost",
        action="store_true",
        help="charge thread CPU per loop callback, message and poll function (bench/loop_cost)",
    )
    parser.add_argument(
        "--wrap",
        action="append",
        default=[],
        help="with --loop-cost, also charge this function (module:Class.method; repeatable)",
    )
    parser.add_argument("--base", type=Path, default=None, help="profile an earlier checkout")
    parser.add_argument("--local", action="store_true", help="no GPU: simulated servers only")
    parser.add_argument("--logs", type=Path, default=Path("/tmp/gpu-overhead"))
    parser.add_argument("--out", type=Path, default=Path("/tmp/console-profile"))
    args = parser.parse_args(argv)
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    args.out.mkdir(parents=True, exist_ok=True)
    args.logs.mkdir(parents=True, exist_ok=True)
    raw = args.out / "profile.txt"
    servers, clients, gpu_load, _ = SCENARIOS[args.scenario]
    state: dict[str, object] = {}

    cost_file = args.out / "loop-cost"
    env: dict[str, str] = {}
    if args.loop_cost:
        path = [str(ROOT / "bench" / "loop_cost"), os.environ.get("PYTHONPATH") or str(ROOT)]
        env = {
            "PYTHONPATH": os.pathsep.join(path),
            "LOOP_COST_OUT": str(cost_file),
            "LOOP_COST_WRAP": ",".join([LOOP_COST_WRAP, *args.wrap]),
        }

    def loop_cost(pid: int) -> dict[str, object] | None:
        try:
            found: dict[str, object] = json.loads(Path(f"{cost_file}.{pid}.json").read_text())
        except (OSError, ValueError):
            return None
        return found

    def on_window(pid: int, opening: bool) -> None:
        if opening:
            state["loop cost"] = loop_cost(pid)
            state["before"] = thread_cpu(pid)
            if args.no_spy:
                return
            state["spy"] = subprocess.Popen(
                [spy, "record", "--pid", str(pid), "--rate", str(args.rate), "--duration",
                 str(int(args.seconds)), "--format", "raw", "--threads", "--output", str(raw),
                 *([] if args.blocking else ["--nonblocking"])],
                stdout=subprocess.DEVNULL, stderr=(args.out / "py-spy.log").open("wb"),
            )  # fmt: skip
            return
        after = thread_cpu(pid)
        first, last = state.get("loop cost"), loop_cost(pid)
        if isinstance(first, dict) and last is not None:
            report = loop_cost_report(first, last)
            (args.out / "loop-cost.txt").write_text("\n".join(report) + "\n")
        dump = ""
        if not args.no_spy:
            dump = subprocess.run(
                [spy, "dump", "--pid", str(pid)], capture_output=True, text=True, timeout=30
            ).stdout
        before = state["before"]
        assert isinstance(before, dict)
        rows = sorted(((after[t] - before.get(t, 0.0), t) for t in after), reverse=True)
        lines = [f"{cpu:8.3f} s  tid {tid}" for cpu, tid in rows]
        lines += [f"total {sum(c for c, _ in rows):.3f} s over {args.seconds:.0f} s", "", dump]
        (args.out / "threads.txt").write_text("\n".join(lines) + "\n")

    local = args.local
    with fleet(servers, clients, gpu_load and not local, args.logs, cuda=not local) as ports:
        cost = measure(
            console_argv(ports, args.base),
            seconds=args.seconds,
            warmup=args.warmup,
            on_window=on_window,
            env=env,
        )
    spy_proc = state.get("spy")
    if isinstance(spy_proc, subprocess.Popen):
        spy_proc.wait(60)
    summary = [
        f"{args.scenario}: {cost.cpu_per_minute:.3f} CPU-s/min, "
        f"{cost.bytes_per_second:.0f} B/s, {cost.peak_rss / 2**20:.0f} MiB",
        "",
    ]
    if raw.exists():
        summary += fold(raw, depth=4)
    (args.out / "summary.txt").write_text("\n".join(summary) + "\n")
    print("\n".join(summary[:40]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The fleet monitor's CPU per poll, alone (no UI), against seven simulated servers under load.

Why: the console's poll (``FleetMonitor.poll``: liveness, the fleet state, seven log tails and
parses, seven ``/metrics`` probes, the GPU sample, the thread hops between) is a fixed cost paid
every second; whole-console benchmarks see it through Textual's noise. Here the monitor runs in a
child process of its own at one poll a second, and the child reports its CPU (all threads:
``time.process_time``) per poll over the window, and the thread time of ``_host_side`` and
``_sample_gpus`` per call. With ``--base DIR`` the same fleet is watched by an earlier checkout's
monitor too, alternating, so drift hits both. ``--profile FILE`` writes a cProfile of the window
(main thread only; the worker threads' share shows in the host-side numbers).

    python -m bench.bench_poll --runs 3 --polls 20 --base /tmp/base
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.gpu_overhead import CLIENTS_SEVEN, fleet
from bench.harness import unwind_on_sigterm

ROOT = Path(__file__).resolve().parent.parent


def child(ports: list[int], polls: int, warmup: int, interval: float, profile: str) -> None:
    """Poll the fleet; print one JSON line of CPU per poll (ms) to stdout."""
    import asyncio
    import cProfile

    from tui.fleet import monitor as fm
    from tui.ui.cli import make_poller

    host = [0.0, 0]
    gpus = [0.0, 0]

    # The worker threads' calls, profiled apart (a profiler is per thread).
    threads = cProfile.Profile(time.thread_time) if profile else None
    window = [False]

    def timed(fn: Callable[..., Any], acc: list[float]) -> Callable[..., Any]:
        def wrapper(*a: Any, **k: Any) -> Any:
            if threads is not None and window[0]:
                threads.enable()
            start = time.thread_time()
            try:
                return fn(*a, **k)
            finally:
                acc[0] += time.thread_time() - start
                acc[1] += 1
                if threads is not None and window[0]:
                    threads.disable()

        return wrapper

    # the monitor's own methods, timed where they run (restored by the process's end)
    fm.FleetMonitor._host_side = timed(fm.FleetMonitor._host_side, host)  # type: ignore[method-assign]
    fm.FleetMonitor._sample_gpus = timed(fm.FleetMonitor._sample_gpus, gpus)  # type: ignore[method-assign]
    monitor = make_poller(tuple(ports), tuple(range(len(ports))), None, "sglang_{port}.log")
    assert isinstance(monitor, fm.FleetMonitor)

    async def go() -> dict[str, float | str]:
        try:
            for _ in range(warmup):
                await monitor.poll()
                await asyncio.sleep(interval)
            window[0] = True
            host[:] = [0.0, 0]
            gpus[:] = [0.0, 0]
            prof = cProfile.Profile(time.thread_time) if profile else None
            cpu = time.process_time()
            main_cpu = time.thread_time()
            wall = 0.0
            for _ in range(polls):
                if prof is not None:
                    prof.enable()
                start = time.perf_counter()
                snapshot = await monitor.poll()
                wall += time.perf_counter() - start
                if prof is not None:
                    prof.disable()
                await asyncio.sleep(interval)
            cpu = time.process_time() - cpu
            main_cpu = time.thread_time() - main_cpu
            if prof is not None:
                prof.dump_stats(profile)
            if threads is not None:
                threads.dump_stats(profile + ".threads")
            states = [p.server.state.value for p in snapshot.panels if p.server]
            return {
                "cpu_ms_per_poll": 1000 * cpu / polls,
                "main_ms_per_poll": 1000 * main_cpu / polls,
                "wall_ms_per_poll": 1000 * wall / polls,
                "host_side_ms": 1000 * host[0] / max(host[1], 1),
                "sample_gpus_ms": 1000 * gpus[0] / max(gpus[1], 1),
                "states": " ".join(states),
            }
        finally:
            await monitor.aclose()

    print(json.dumps(asyncio.run(go())), flush=True)


def _run(base: Path | None, ports: list[int], args: argparse.Namespace, profile: str) -> dict:
    code = (
        "import sys; "
        + (f"sys.path.insert(0, {str(base.resolve())!r}); " if base else "")
        + "import importlib.util as u; "
        + f"s = u.spec_from_file_location('bench_poll', {__file__!r}); "
        + "m = u.module_from_spec(s); s.loader.exec_module(m); "
        + f"m.child({ports!r}, {args.polls}, {args.warmup}, {args.interval}, {profile!r})"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        text=True,
        check=True,
        cwd=base or ROOT,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    """Start the fleet, then measure the monitor (and ``--base``'s) ``--runs`` times each."""
    unwind_on_sigterm()
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--polls", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=4)
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--base", type=Path, default=None, help="an earlier checkout's root")
    parser.add_argument("--profile", default="", help="write a cProfile of the window here")
    parser.add_argument("--logs", type=Path, default=Path("/tmp/bench-poll"))
    parser.add_argument(
        "--ports", type=Path, default=None, help="a JSON list of a running fleet's ports"
    )
    args = parser.parse_args(argv)
    args.logs.mkdir(parents=True, exist_ok=True)
    programs: dict[str, Path | None] = {"after": None}
    if args.base is not None:
        programs = {"before": args.base, "after": None}
    results: dict[str, list[dict]] = {name: [] for name in programs}
    given = json.loads(args.ports.read_text()) if args.ports else None
    with (
        contextlib.nullcontext(given)
        if given
        else fleet(7, CLIENTS_SEVEN, False, args.logs, cuda=False) as ports
    ):
        for run in range(args.runs):
            for name, base in programs.items():
                profile = f"{args.profile}.{name}.{run}" if args.profile else ""
                found = _run(base, ports, args, profile)
                results[name].append(found)
                print(f"run {run} {name}: {json.dumps(found)}", flush=True)
    for name, rows in results.items():
        for key in (
            "cpu_ms_per_poll",
            "main_ms_per_poll",
            "host_side_ms",
            "sample_gpus_ms",
            "wall_ms_per_poll",
        ):
            values = sorted(r[key] for r in rows)
            print(f"{name:6s} {key:16s} median {values[len(values) // 2]:7.3f}  {values}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

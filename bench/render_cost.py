"""What each render replacement saves a reading, in-process: the console's drawing alone, with
each render switch of ``GPUFLEET_PLAIN`` off in turn (``tui.plain``).

The pty benchmarks (``bench.bench_console``, ``bench.gpu_overhead``) measure the whole console,
whose per-run noise on a shared two-core machine hides a few percent; this one measures the part
the render switches change, precisely enough to tell them apart: the console headless at 200x50
on the tests' seven-GPU fleet, readings in which every busy panel changes its counts, its KV
line and its throughput history (as under load), each followed by the frame Textual draws for
it, turned into the escape codes a terminal would get (headless Textual skips that step; here it
is done and counted). One process per variant (the switches are read once per process), the
variants alternating round by round; CPU by ``time.process_time`` over the readings.

Read a saving against the console's whole CPU from a pty benchmark: at ~0.6 CPU-s/min (10 ms a
second), 1 ms a reading is 10 %.

    python -m bench.render_cost --rounds 3 --readings 150
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.plain_variants import AS_IS, EARN_BAR, variant_name
from tui import plain

ROOT = Path(__file__).resolve().parent.parent
VARIANTS = ("", *plain.GROUPS["render"], "render")
"""``GPUFLEET_PLAIN`` of each variant ("": every replacement on)."""
PAUSE_S = 0.05
"""Time given to each reading's frame (Textual draws at most 60 a second)."""


def _reading(fleet: Any, step: int) -> Any:
    """The next reading: every busy panel's counts, KV use and throughput history moved."""
    panels = []
    for panel in fleet.panels:
        server = panel.server
        if server is not None and server.running is not None:
            history = (*server.throughput_history[1:], 1000.0 + 37.0 * (step % 23))
            server = replace(
                server,
                running=(step * 3 + panel.gpu_index) % 17,
                queued=(step * 7) % 31,
                token_usage=(step % 10) / 10,
                throughput_history=history,
                gen_throughput=history[-1],
                updated_at=server.updated_at + step,
            )
        panels.append(replace(panel, server=server))
    return replace(fleet, panels=tuple(panels), taken_at=fleet.taken_at + step)


async def _one(readings: int) -> dict[str, float]:
    """This process's variant: CPU and terminal bytes a reading."""
    sys.path.insert(0, str(ROOT / "tests" / "helpers"))
    from textual._compositor import CompositorUpdate
    from textual.app import App
    from ui_helpers import make_app, settle, seven_gpu_fleet

    sent = [0]
    display = App._display

    def counted(self: App[Any], screen: Any, renderable: Any) -> None:
        if isinstance(renderable, CompositorUpdate):  # what a terminal would be sent
            sent[0] += len(renderable.render_segments(self.console).encode())
        display(self, screen, renderable)

    App._display = counted  # type: ignore[method-assign]  # counted, then Textual's own
    fleet = seven_gpu_fleet()
    app: Any = make_app(fleet)
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot, app)
        for step in range(1, 11):  # warm: caches filled, first frames drawn
            fleet = _reading(fleet, step)
            app.main_screen.fleet = fleet
            await pilot.pause(PAUSE_S)
        sent[0] = 0
        start = time.process_time()
        for step in range(11, 11 + readings):
            fleet = _reading(fleet, step)
            app.main_screen.fleet = fleet
            await pilot.pause(PAUSE_S)
        cpu = time.process_time() - start
    return {"us": cpu / readings * 1e6, "bytes": sent[0] / readings}


def _run(variant: str, readings: int) -> dict[str, float]:
    env = {**os.environ, plain.ENV: variant, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "bench.render_cost", "--one", "--readings", str(readings)]
    out = subprocess.run(
        argv, capture_output=True, text=True, env=env, timeout=600, check=True, cwd=ROOT
    )
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    """Alternate the variants ``--rounds`` times; print a Markdown table."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--readings", type=int, default=150)
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(asyncio.run(_one(args.readings))))
        return 0
    runs: dict[str, list[dict[str, float]]] = {v: [] for v in VARIANTS}
    for round_ in range(args.rounds):
        for variant in VARIANTS:
            runs[variant].append(_run(variant, args.readings))
            got = runs[variant][-1]
            name = variant_name(variant) if variant else AS_IS
            print(f"round {round_} {name}: {got['us']:.0f} us, {got['bytes']:.0f} B", flush=True)
    mine = [r["us"] for r in runs[""]]
    print(
        f"\n{args.rounds} rounds of {args.readings} readings, each variant in its own process;"
        f" a saving is the variant's CPU a reading minus the console's as is, paired by round"
        f" (bar: {EARN_BAR:.2f}x the console's whole CPU, see the module)\n"
    )
    print("| variant | CPU us a reading | saving us, paired | bytes a reading |")
    print("|---|---|---|---|")
    for variant in VARIANTS:
        us = [r["us"] for r in runs[variant]]
        sent = statistics.median(r["bytes"] for r in runs[variant])
        saving = "–"
        if variant:
            diffs = [a - b for a, b in zip(us, mine, strict=True)]
            saving = f"{statistics.median(diffs):.0f} ({min(diffs):.0f}–{max(diffs):.0f})"
        name = variant_name(variant) if variant else AS_IS
        print(f"| {name} | {statistics.median(us):.0f} | {saving} | {sent:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

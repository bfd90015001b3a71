"""The tuning form's preflight latency per keystroke, against the CLI's, in the same run (issue 16).

Setup (once): the demo's fleet (``sim-baseline``, 7 simulated B200s) on free ports under a scratch
``GPUFLEET_STATE_DIR``, the demo pipeline driving it, and each server's log grown by ``PAD_MB``
of its own Decode lines, as hours of a job leave it (the form's old preflight re-parsed every log
in full at each keystroke: 4-8 s in the demo). Then, in the same run:

- **the CLI**: ``gpufleet apply sim-baseline --preflight-only`` as a subprocess, wall time (a
  fresh interpreter: imports, the fleet state, one scan of each log, the 7 predictions);
- **the form**: the console (``FleetApp`` with the real fleet monitor polling and the real
  backend, headless) opens the tuning form on all GPUs; each keystroke into the Mamba-slots input
  is posted as the terminal would, and its latency runs until the form shows the preflight of
  the values that keystroke made (``TuningFormScreen.PreflightShown``);
- **the old form** (context): the per-keystroke work the form did before (every log parsed line
  by line), timed in this process.

    python -m bench preflight
    python -m bench.bench_preflight --quick
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.harness import Context, Row, Stat, print_table

BENCH = "tuning form preflight"
ROOT = Path(__file__).resolve().parent.parent
TARGET_S = 0.1
"""The issue's target: the preflight answers within 100 ms of a keystroke."""
PAD_MB = 20
"""Decode lines added to each server's log before measuring (2 in a quick run)."""
KEYS = ("backspace", "backspace", "1", "2", "0", "backspace", "6", "backspace", "9", "5")
"""Keystrokes into the Mamba-slots input ("80" -> "" ... each makes new values; "" is auto)."""


def pad_logs(megabytes: float) -> int:
    """Append ``megabytes`` of each server's own Decode lines to its log; returns bytes added."""
    from tui.state.fleet_state import read_records

    added = 0
    for record in read_records().values():
        path = Path(record.log_path)
        decode = next(
            (line for line in path.read_text().splitlines() if "Decode batch" in line), None
        )
        if decode is None:
            continue
        block = (decode + "\n") * max(1, int(megabytes * 2**20 / (len(decode) + 1)))
        with path.open("a") as handle:
            handle.write(block)
        added += len(block)
    return added


def cli_seconds(runs: int) -> list[float]:
    """Wall seconds of ``gpufleet apply sim-baseline --preflight-only``, each a fresh process."""
    argv = [sys.executable, "-m", "tui", "apply", "sim-baseline", "--preflight-only"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
        out.append(time.perf_counter() - start)
        if done.returncode != 0 or done.stdout.count("preflight GPU") != 7:
            raise RuntimeError(f"the CLI's preflight failed: {done.stdout}{done.stderr}")
    return out


def old_form_seconds(runs: int) -> list[float]:
    """The form's old per-keystroke work: every log parsed line by line, then 7 predictions."""
    from tui.logs.parser import parse_line
    from tui.ops.service import FleetOps
    from tui.retune.calibration import LaunchSizes
    from tui.retune.preflight import preflight
    from tui.state.fleet_state import read_records

    ops = FleetOps(None)
    profile = ops.load("sim-baseline")
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        records = read_records()
        for gpu in profile.gpus:
            sizes = LaunchSizes()
            for raw in Path(records[gpu].log_path).read_text(errors="replace").splitlines():
                event = parse_line(raw)
                if event is not None:
                    sizes.feed(event)
            preflight(profile, gpu, calibration=sizes.calibration())
        out.append(time.perf_counter() - start)
    return out


class FormWatch:
    """The tuning form's ``PreflightShown`` messages, as a ``run_test`` message hook sees them."""

    def __init__(self) -> None:
        self.shown: list[tuple[float, int]] = []
        """(perf_counter when shown, the form's generation it answers)."""
        self.arrived = asyncio.Event()

    def hook(self, message: object) -> None:
        """The message hook."""
        from tui.ui.tuning.form_screen import TuningFormScreen

        if isinstance(message, TuningFormScreen.PreflightShown):
            self.shown.append((time.perf_counter(), message.generation))
            self.arrived.set()

    async def type_keys(
        self, app: Any, pilot: Any, open_key: str, keys: Sequence[str]
    ) -> list[float]:
        """Open the form with ``open_key``, then seconds from each of ``keys`` (typed into the
        Mamba slots field) to the form showing that value's preflight."""
        from textual import events
        from textual.widgets import Input

        from tui.ui.tuning.form_screen import TuningFormScreen

        shown, arrived = self.shown, self.arrived
        app.post_message(events.Key(open_key, open_key))
        form = None
        for _ in range(600):
            form = app.screen
            if isinstance(form, TuningFormScreen) and form.type_ahead.ready and shown:
                break
            await pilot.pause(0.05)
        assert isinstance(form, TuningFormScreen) and shown, "the form never showed"
        form.set_focus(form.query_one("#knob-max_mamba_cache_size", Input))
        await pilot.pause(0.3)
        out: list[float] = []
        for key in keys:
            arrived.clear()
            before = form.generation
            start = time.perf_counter()
            app.post_message(events.Key(key, None if len(key) > 1 else key))
            deadline = start + 30
            while not (shown and shown[-1][1] == form.generation > before):
                assert time.perf_counter() < deadline, f"no preflight after {key!r}"
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(arrived.wait(), deadline - time.perf_counter())
                arrived.clear()
            out.append(shown[-1][0] - start)
            await pilot.pause(0.2)  # an operator's pause between keys
        return out


async def form_latencies(keys: tuple[str, ...]) -> list[float]:
    """Seconds from each keystroke to the form showing its values' preflight."""
    from tui.fleet.monitor import FleetMonitor
    from tui.gpu.simulated import SimulatedSource
    from tui.ops.demo import spec_for_profile
    from tui.ops.local import LocalFleet
    from tui.ops.service import FleetOps
    from tui.ui.app import FleetApp

    ops = FleetOps(None, by="bench")
    profile = ops.load("sim-baseline")
    monitor = FleetMonitor(spec_for_profile(profile), SimulatedSource())
    watch = FormWatch()
    app = FleetApp(LocalFleet(ops, monitor), profile=profile.name)
    try:
        async with app.run_test(size=(120, 40), message_hook=watch.hook) as pilot:
            while not app.main_screen.fleet.panels:
                await pilot.pause(0.05)
            return await watch.type_keys(app, pilot, "T", keys)
    finally:
        await monitor.aclose()


def measure(ctx: Context) -> list[Row]:
    """Inside a busy fleet (``GPUFLEET_STATE_DIR`` set): the three measurements, as rows."""
    pad = 2 if ctx.quick else PAD_MB
    added = pad_logs(pad)
    cli = Stat.of(cli_seconds(2 if ctx.quick else 5))
    old = Stat.of(old_form_seconds(1 if ctx.quick else 3))
    keys = KEYS[:6] if ctx.quick else KEYS * 2
    form = Stat.of(asyncio.run(form_latencies(keys)))
    note = (
        f"7 simulated servers decoding, each log grown by {added / 7 / 2**20:.0f} MiB of Decode "
        f"lines; {len(keys)} keystrokes into the Mamba-slots input, each measured from the key "
        "event to the form showing that value's preflight, with the "
        "fleet monitor polling in the same process; the CLI is a fresh process each run"
    )
    return [
        Row(
            BENCH, "form: keystroke -> preflight shown, s", form,
            "gpufleet apply --preflight-only", cli, f"< {TARGET_S:g} s",
            form.median < TARGET_S, note, fmt="{:.3f}",
        ),
        Row(
            BENCH, "form before issue 16 (every log parsed), s", old,
            "gpufleet apply --preflight-only", cli, "report", None,
            "the per-keystroke work of the old form, timed in-process", fmt="{:.3f}",
        ),
    ]  # fmt: skip


def run(ctx: Context) -> list[Row]:
    """The busy demo fleet, then the measurements (about 1.5 minutes; quick: about 1)."""
    from bench.bench_console import busy_fleet

    with busy_fleet(ctx.scratch / "state"):
        return measure(ctx)


def main(argv: list[str] | None = None) -> int:
    """Standalone: ``--quick`` for the small sizes."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-preflight-") as scratch:
        rows = run(Context(Path(scratch), quick=args.quick))
    print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())

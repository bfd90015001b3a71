"""Draw the console on the demo's fleet at 200x50 into an SVG: the README's screenshot.

Usage: ``python tools/screenshot.py docs/console-demo.svg [--seconds 45]``

It runs the demo as ``gpufleet demo`` does (seven simulated SGLang servers at x20, the pipeline
on the demo prompt set) in a state directory of its own, ``/tmp/gpufleet-screenshot`` (never the
operator's demo), on free ports; opens the real console headless at 200x50; waits until every
GPU is ready and the job has run ``--seconds``; opens the generation pane (``g``); writes
Textual's SVG export of the screen; then stops the pipeline and every server. It takes about a
minute. Run it again after a change to the grid or the pane (the integrator regenerates it).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STATE = Path("/tmp/gpufleet-screenshot")
"""The screenshot's own state directory (its fleet record, logs, prompts, history)."""
SIZE = (200, 50)
"""The terminal the README shows."""


async def _shoot(out: Path, seconds: float) -> None:
    from bench.ports import free_ports
    from tui.fleet.monitor import FleetMonitor
    from tui.gpu.simulated import SimulatedSource
    from tui.ops.demo import (
        demo_profile,
        demo_prompts_file,
        ensure_prompts,
        pipeline_config,
        spec_for_profile,
    )
    from tui.ops.local import LocalFleet
    from tui.ops.marks import JournalMarks
    from tui.ops.service import FleetOps, OpsOptions
    from tui.ops.simfleet import sim_profile
    from tui.ops.windows import console_windows
    from tui.ui.app import FleetApp
    from tui.ui.demo_cli import DEMO_FLEET_TIMEOUT_S

    base = free_ports(7, consecutive=True)[0]
    profile = demo_profile(sim_profile(None), base_port=base)
    ensure_prompts(demo_prompts_file())
    config = pipeline_config(profile, demo_prompts_file(), DEMO_FLEET_TIMEOUT_S)
    windows = console_windows()
    options = OpsOptions(apply=windows.apply, canary=windows.canary, rollout=windows.rollout)
    ops = FleetOps(profile, options=options, by="screenshot", pipeline=config)
    ops.stop_pipeline_with_fleet = True
    try:
        failed = {g: why for g, why in (await ops.start(profile)).items() if why}
        if failed:
            raise SystemExit(f"screenshot: the fleet did not start: {failed}")
        await ops.start_pipeline()
        monitor = FleetMonitor(spec_for_profile(profile), SimulatedSource())
        port = LocalFleet(ops, monitor, status_path=config.status_path, marks=JournalMarks())
        app = FleetApp(port, profile=profile.name)
        async with app.run_test(size=SIZE) as pilot:
            deadline = time.monotonic() + 120
            while not _all_ready(app) and time.monotonic() < deadline:
                await pilot.pause(0.5)
            if not _all_ready(app):
                raise SystemExit("screenshot: the fleet was not ready within 120 s")
            await pilot.pause(seconds)  # the job runs: the rates, the chart and ETA fill in
            await pilot.press("g")
            await pilot.pause(2.0)
            svg = app.export_screenshot(title="gpufleet demo")
        await monitor.aclose()
    finally:
        await ops.stop_fleet(mode="terminate")
    out.write_text(svg, encoding="utf-8")
    print(f"screenshot: wrote {out} ({len(svg):,} bytes)")


def _all_ready(app: object) -> bool:
    from tui.fleet.snapshot import ServerState
    from tui.ui.app import FleetApp

    assert isinstance(app, FleetApp)
    panels = app.main_screen.fleet.panels
    return len(panels) == 7 and all(
        p.server is not None and p.server.state is ServerState.READY for p in panels
    )


def main(argv: list[str]) -> int:
    """Write the screenshot; returns the exit status."""
    parser = argparse.ArgumentParser(prog="tools/screenshot.py", description=__doc__)
    parser.add_argument("out", type=Path, help="the SVG to write (docs/console-demo.svg)")
    parser.add_argument("--seconds", type=float, default=45.0, help="job time before the shot")
    args = parser.parse_args(argv)
    shutil.rmtree(STATE, ignore_errors=True)
    os.environ["GPUFLEET_STATE_DIR"] = str(STATE)
    sys.path.insert(0, str(ROOT))
    asyncio.run(_shoot(args.out.resolve(), args.seconds))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

"""``gpufleet sim-fleet start|stop|status [--profile NAME] [--gpus 0,1]``.

Start and stop go through the operations core (``FleetOps.start`` / ``FleetOps.kill``):
the operation lock, the fleet state, the one stop-and-release, the journal. ``stop`` stops
every server the fleet state records, whatever profile it runs, and checks every port it keeps;
it prints each GPU as done, REFUSED (not verified as the fleet's: nothing was signalled) or
FAILED, and exits 1 unless every GPU is done.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence

from tui.cli_args import SECONDS_OR_ZERO, ArgumentParser
from tui.control.identity import IdentityMismatch, verify
from tui.ops import simfleet as fleet
from tui.ops.cli.common import add_drain_timeout, exit_status, run_refusing, stop_timeouts
from tui.ops.door import StopIncomplete
from tui.ops.service import FleetOps, OpsOptions
from tui.state.fleet_state import read_fleet, read_records


def _gpus(text: str) -> list[int]:
    try:
        gpus = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--gpus {text!r}: must be comma-separated GPU indices, e.g. 0,1"
        ) from None
    if not gpus or any(g < 0 for g in gpus):
        raise argparse.ArgumentTypeError(f"--gpus {text!r}: must list GPU indices >= 0")
    return gpus


def _parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(prog="gpufleet sim-fleet", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    start = sub.add_parser("start", help="start simulated servers (default: 7, ports 30000+)")
    start.add_argument(
        "--profile", help=f"sim profile name or file (default {fleet.DEFAULT_PROFILE})"
    )
    start.add_argument("--gpus", type=_gpus, help="only these GPUs of the profile, e.g. 0,1")
    start.add_argument(
        "--wait", type=SECONDS_OR_ZERO, default=120.0, metavar="S",
        help="wait up to S seconds for GET /ready == 200 on every server (0: do not wait)",
    )  # fmt: skip
    stop = sub.add_parser("stop", help="stop the recorded servers and wait for GPU release")
    stop.add_argument("--gpus", type=_gpus)
    add_drain_timeout(stop, "--timeout")
    stop.add_argument(
        "--mode", choices=("drain", "terminate", "kill"), default="drain", help="how to stop"
    )
    st = sub.add_parser("status", help="list the recorded servers and their /ready")
    st.add_argument("--gpus", type=_gpus)
    return parser


def _start(args: argparse.Namespace) -> int:
    profile = fleet.sim_profile(args.profile)
    unknown = sorted(set(args.gpus or ()) - set(profile.gpus))
    if unknown:
        print(f"gpufleet sim-fleet: --gpus {unknown}: not in profile {profile.name!r} "
              f"(GPUs {list(profile.gpus)})", file=sys.stderr)  # fmt: skip
        return 2
    outcome = asyncio.run(FleetOps(by="cli").start(profile, args.gpus))
    records = read_records()
    for gpu, why in outcome.items():
        record = records.get(gpu)
        where = f"pid {record.pid} on port {record.port}" if record else "?"
        print(f"ok    GPU {gpu}: {where}" if why is None else f"FAILED {why}")
    ok = all(why is None for why in outcome.values())
    started = [records[g] for g, why in outcome.items() if why is None and g in records]
    if args.wait > 0 and started:
        for r in fleet.wait_ready(started, args.wait):
            ok &= r.ready
            print(f"{'ready ' if r.ready else 'NOT READY '}GPU {r.gpu}: {r.message}")
    return 0 if ok else 1


STATUS_WORD = {"done": "done   ", "refused": "REFUSED", "failed": "FAILED "}
"""How each GPU's outcome is printed (upper case: not done)."""


def _stop(args: argparse.Namespace) -> int:
    state = read_fleet()
    known = {g for g, s in state.items() if s.server is not None or s.port is not None}
    gpus = sorted(known if args.gpus is None else set(args.gpus) & known)
    if not gpus:
        print("no recorded simulated servers")
        return 0
    ops = FleetOps(options=OpsOptions(stop=stop_timeouts(args)), by="cli")
    try:
        outcomes = asyncio.run(ops.kill(gpus, mode=args.mode))
    except StopIncomplete as incomplete:
        outcomes = list(incomplete.outcomes)
    for outcome in outcomes:
        print(f"{STATUS_WORD[outcome.status]} {outcome.message}")
    return exit_status(
        all(o.ok for o in outcomes),
        any(o.drain_timed_out or o.client_still_sending for o in outcomes),
    )


def _status(args: argparse.Namespace) -> int:
    records = read_records()
    chosen = sorted(records if args.gpus is None else set(args.gpus) & set(records))
    if not chosen:
        print("no recorded simulated servers")
    for gpu in chosen:
        r = records[gpu]
        try:
            alive = verify(r).alive
            state = "alive" if alive else "exited"
        except IdentityMismatch as mismatch:
            alive, state = False, f"not verified ({str(mismatch).split(': ', 1)[-1]})"
        code = fleet.health(r) if alive else None
        print(f"GPU {r.gpu}  port {r.port}  pid {r.pid}  {state}  /ready={code}  "
              f"profile={r.profile}  log={r.log_path}")  # fmt: skip
    return 0


def main(argv: Sequence[str]) -> int:
    """Run ``gpufleet sim-fleet``; non-zero when any GPU failed."""
    args = _parser().parse_args(list(argv))
    commands = {"start": _start, "stop": _stop, "status": _status}
    status, code = run_refusing("gpufleet sim-fleet", lambda: commands[args.command](args))
    return status or int(code)

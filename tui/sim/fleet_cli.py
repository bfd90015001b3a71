"""``gpufleet sim-fleet start|stop|status [--profile NAME] [--gpus 0,1]``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from tui.profiles import ProfileError
from tui.sim import fleet


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
    parser = argparse.ArgumentParser(prog="gpufleet sim-fleet", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    start = sub.add_parser("start", help="start simulated servers (default: 7, ports 30000+)")
    start.add_argument(
        "--profile", help=f"sim profile name or file (default {fleet.DEFAULT_PROFILE})"
    )
    start.add_argument("--gpus", type=_gpus, help="only these GPUs of the profile, e.g. 0,1")
    start.add_argument(
        "--wait", type=float, default=120.0, metavar="S",
        help="wait up to S seconds for GET /ready == 200 on every server (0: do not wait)",
    )  # fmt: skip
    stop = sub.add_parser("stop", help="stop the recorded servers and wait for GPU release")
    stop.add_argument("--gpus", type=_gpus)
    stop.add_argument("--timeout", type=float, default=30.0, help="SIGTERM deadline, seconds")
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
    outcomes = fleet.start(profile, args.gpus)
    for outcome in outcomes:
        print(("ok    " if outcome.ok else "FAILED ") + outcome.message)
    started = [o.process.record for o in outcomes if o.process is not None]
    ok = all(o.ok for o in outcomes)
    if args.wait > 0 and started:
        for r in fleet.wait_ready(started, args.wait):
            ok &= r.ready
            print(f"{'ready ' if r.ready else 'NOT READY '}GPU {r.gpu}: {r.message}")
    return 0 if ok else 1


def _stop(args: argparse.Namespace) -> int:
    outcomes = fleet.stop(args.gpus, term_timeout=args.timeout)
    if not outcomes:
        print("no recorded simulated servers")
    for outcome in outcomes:
        print(("ok    " if outcome.ok else "FAILED ") + outcome.message)
    return 0 if all(o.ok for o in outcomes) else 1


def _status(args: argparse.Namespace) -> int:
    rows = fleet.status(args.gpus)
    if not rows:
        print("no recorded simulated servers")
    for s, code in rows:
        r = s.record
        state = "alive" if s.alive else s.note
        print(f"GPU {r.gpu}  port {r.port}  pid {r.pid}  {state}  /ready={code}  "
              f"profile={r.profile}  log={r.log_path}")  # fmt: skip
    return 0


def main(argv: Sequence[str]) -> int:
    """Run ``gpufleet sim-fleet``; non-zero when any GPU failed."""
    args = _parser().parse_args(list(argv))
    try:
        return {"start": _start, "stop": _stop, "status": _status}[args.command](args)
    except ProfileError as exc:
        print(f"gpufleet sim-fleet: {exc}", file=sys.stderr)
        return 1

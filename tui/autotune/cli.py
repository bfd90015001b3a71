"""``gpufleet autotune start|status|pause|resume|stop``: the online knob search, headless.

``start`` runs the search in the foreground (``--detach``: in its own session, like ``gpufleet
generate --detach``; its output goes to ``<state>/autotune/search.log``); ``status`` prints the
status document (``--json`` as is); ``pause``, ``resume`` and ``stop`` write the request the
search obeys between steps (stop also cancels a running canary and rolls its GPU back).

Exit codes: 0 done, 1 the search failed, 2 refused before anything ran (bad input, another
search running, a fleet that cannot be searched).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tui.autotune.budget import Budget
from tui.autotune.detach import search_log, start_detached
from tui.autotune.options import (
    AutotuneOptions,
    OptionsError,
    SearchRefused,
    SearchResult,
    budget_of,
    load_config,
    parse_knob,
    parse_ttft_limit,
    space_of,
)
from tui.autotune.search import Autotuner
from tui.autotune.space import SearchSpace
from tui.autotune.status import describe_status, holder_alive, read_status, request
from tui.cli_args import GPU_INDEX, SECONDS, SECONDS_OR_ZERO, ArgumentParser, number
from tui.ops.cli.common import REFUSALS, add_drain_timeout, print_event, stop_timeouts
from tui.ops.service import FleetOps, OpsOptions
from tui.retune.options import ApplyOptions
from tui.rollout.canary import CanaryOptions
from tui.rollout.fleet_verdict import VerdictWindows
from tui.rollout.rollout import RolloutOptions
from tui.state.files import StateFileError

PROG = "gpufleet autotune"


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (one subcommand per action)."""
    p = ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="action", required=True)
    s = sub.add_parser("start", help="start a search (foreground, or --detach)")
    s.add_argument(
        "--knob",
        action="append",
        default=[],
        help="NAME=V1,V2,... or NAME=LOW:HIGH[:STEP]: a knob and its values (repeat; only the "
        "knobs named are searched; default: the six default knobs)",
    )
    s.add_argument(
        "--config",
        type=Path,
        help="a TOML file with [knobs.NAME] (low/high/step or values, enabled) and [budget] "
        "(wall, explore_gpu_seconds, max_regression); flags win over it",
    )
    s.add_argument("--gpu", type=GPU_INDEX, help="the canary GPU (default: the lowest running)")
    s.add_argument("--wall", help="wall-time budget: seconds, or with s/m/h (default 4h)")
    s.add_argument(
        "--explore-gpu-seconds",
        help="GPU-seconds of job throughput it may spend exploring (default 1800)",
    )
    s.add_argument(
        "--max-regression",
        help="largest relative drop of the canary GPU it may risk: 0.25 or 25%% (default 25%%)",
    )
    s.add_argument(
        "--max-ttft-p90",
        help="reject a candidate whose canary window's TTFT p90 exceeds this many seconds "
        "(default: no limit)",
    )
    s.add_argument("--window", type=SECONDS, default=60.0, help="canary window, seconds")
    s.add_argument("--max-window", type=SECONDS, default=180.0, help="longest canary window")
    s.add_argument("--warmup", type=SECONDS_OR_ZERO, default=20.0, help="canary warm-up seconds")
    s.add_argument("--interval", type=SECONDS, default=5.0, help="seconds per paired sample")
    s.add_argument(
        "--min-intervals", type=number(int, 3, 10**6), default=5, help="samples before a look"
    )
    s.add_argument(
        "--margin",
        type=number(float, 0, 1, low_open=True, high_open=True),
        default=0.03,
        help="canary: 'no measurable difference' bound (relative)",
    )
    s.add_argument("--baseline", type=SECONDS_OR_ZERO, default=10.0, help="pre-restart sampling")
    s.add_argument("--settle", type=SECONDS_OR_ZERO, default=30.0, help="cost: seconds after ready")
    s.add_argument("--timeout", type=SECONDS, default=600.0, help="seconds to ready per launch")
    s.add_argument("--release-timeout", type=SECONDS, default=120.0, help="GPU release wait")
    add_drain_timeout(s, "--term-timeout")
    s.add_argument(
        "--lock-wait",
        type=SECONDS,
        default=900.0,
        help="longest a step waits for another operation holding the fleet, seconds",
    )
    s.add_argument("--detach", action="store_true", help="run in its own session and return")
    st = sub.add_parser("status", help="print the search's status")
    st.add_argument("--json", action="store_true", help="the status document as is")
    for name, what in (("pause", "pause"), ("resume", "resume"), ("stop", "stop")):
        sub.add_parser(name, help=f"ask the running search to {what}")
    return p


def options_from(args: argparse.Namespace) -> tuple[AutotuneOptions, OpsOptions]:
    """The search's and the operations' options from ``start``'s arguments.

    Raises:
        OptionsError: a bad --knob, --config or budget value (naming it and what is allowed).
    """
    space, budget_fields = load_config(args.config) if args.config else (None, {})
    if args.knob:
        space = space_of([parse_knob(k) for k in args.knob])
    defaults = {
        "wall": Budget().wall_s,
        "explore_gpu_seconds": Budget().explore_gpu_s,
        "max_regression": Budget().max_regression,
    }

    def pick(flag: str | None, key: str) -> object:
        return flag if flag is not None else budget_fields.get(key, defaults[key])

    budget = budget_of(
        pick(args.wall, "wall"),
        pick(args.explore_gpu_seconds, "explore_gpu_seconds"),
        pick(args.max_regression, "max_regression"),
    )
    apply = ApplyOptions(
        timeout_s=args.timeout, release_timeout_s=args.release_timeout, measure=False
    )
    canary = CanaryOptions(
        window_s=args.window,
        warmup_s=args.warmup,
        max_window_s=max(args.max_window, args.window),
        interval_s=args.interval,
        min_intervals=args.min_intervals,
        margin=args.margin,
        baseline_s=args.baseline,
        settle_s=args.settle,
        apply=apply,
    )
    options = AutotuneOptions(
        space=space or SearchSpace.default(),
        budget=budget,
        lock_wait_s=args.lock_wait,
        gpu=args.gpu,
        max_ttft_p90_s=None if args.max_ttft_p90 is None else parse_ttft_limit(args.max_ttft_p90),
        canary=canary,
        # The winner's rollout ends with the fleet's verdict over the canary's windows.
        rollout=RolloutOptions(
            apply=apply,
            verdict=VerdictWindows(canary.window_s, canary.warmup_s, canary.interval_s),
        ),
    )
    stop = stop_timeouts(args, args.release_timeout)
    return options, OpsOptions(apply=apply, stop=stop, canary=canary)


def _start(args: argparse.Namespace, argv: Sequence[str]) -> int:
    try:
        options, ops_options = options_from(args)
    except OptionsError as exc:
        print(f"{PROG} start: {exc}", file=sys.stderr)
        return 2
    errors = options.budget.errors() + options.canary.errors()
    if errors:
        print(f"{PROG} start: {'; '.join(errors)}", file=sys.stderr)
        return 2
    if args.detach:
        return _detach([a for a in list(argv)[1:] if a != "--detach"])  # argv[0] is 'start'
    tuner = Autotuner(FleetOps(options=ops_options, by="autotune"), options, print_event)

    async def run() -> SearchResult:
        # SIGTERM (a detached search's stop signal) and Ctrl-C stop the search cleanly: the
        # canary GPU goes back to the incumbent before the process exits.
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, tuner.request_stop)
        return await tuner.run()

    try:
        result = asyncio.run(run())
    except (SearchRefused, *REFUSALS) as exc:
        print(f"{PROG} start: {exc}", file=sys.stderr)
        return 2
    if result.stale:
        print(f"an earlier search had died: {result.stale}")
    for r in result.records:
        print(f"#{r.index} {r.key}: {r.decision}: {r.why}")
    print(f"{result.phase}: {result.reason}; the fleet runs {result.incumbent}")
    return 1 if result.phase == "failed" else 0


def _detach(argv: Sequence[str]) -> int:
    """Start the search in its own session; wait until it reports (or exits)."""
    since = time.time()
    proc = start_detached(argv)
    log = search_log()
    deadline = time.monotonic() + 30.0
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            print(f"{PROG} start: the search exited {proc.returncode}; see {log}", file=sys.stderr)
            return 2 if proc.returncode == 2 else 1
        doc = _status_or_none()
        if doc and doc.get("pid") == proc.pid and float(doc.get("started_at", 0)) >= since - 1:
            print(f"autotune search started (pid {proc.pid}); output in {log}")
            return 0
        time.sleep(0.1)
    print(f"autotune search pid {proc.pid} has not reported yet; output in {log}")
    return 0


def _status_or_none() -> dict[str, Any] | None:
    try:
        return read_status()
    except StateFileError:
        return None


def main(argv: Sequence[str]) -> int:
    """Run ``gpufleet autotune``; returns the exit status."""
    args = build_parser().parse_args(list(argv))
    if args.action == "start":
        return _start(args, argv)
    try:
        doc = read_status()
    except StateFileError as exc:
        print(f"{PROG} {args.action}: {exc}", file=sys.stderr)
        return 2
    if args.action == "status":
        if doc is None:
            print("autotune: no search has run on this fleet")
        elif args.json:
            print(json.dumps(doc, indent=1))
        else:
            print(describe_status(doc))
        return 0
    if doc is None or not holder_alive(doc):
        print(f"{PROG} {args.action}: no search is running", file=sys.stderr)
        return 2
    request(args.action)
    print(f"asked the search (pid {doc.get('pid')}) to {args.action}")
    return 0

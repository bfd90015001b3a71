"""``gpufleet alerts [--watch [S]] [--count N] [--json]``: the node's alert rules, and a headless
watcher that fires them.

Without ``--watch`` it prints the rules in force (``[alerts]`` of settings.toml, every rule's
defaults where it says nothing) and the webhook. With ``--watch`` it polls the fleet (the one
the state directory records, else ``--ports/--gpus``) and the job every S seconds (default 1),
prints each alert as it fires and clears (one line, or the webhook's JSON body with ``--json``),
and, when no other process does (the agent), journals and posts them (``tui.ops.alerts.runner``).

Exit status: 0 (after ``--count`` polls), 2 bad input (an option, the ``[alerts]`` settings, a
damaged state file), 130 interrupted (SIGINT, Ctrl-C), 143 stopped (SIGTERM).

Both signals are the watcher's own (``loop.add_signal_handler``): ``asyncio.run`` acts on SIGINT
only where it found SIGINT's default handler, and a watcher started in the background of a
script (or of ``make test``) inherits SIGINT ignored, so ``kill -INT`` never ended it. On either
it ends within ``STOP_GRACE_S`` and a second: what the webhook still holds gets that long, and
what it could not send is said on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import socket
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from tui import paths
from tui.cli_args import ArgumentParser, number, numbers_list
from tui.fleet.monitor import FleetMonitor
from tui.fleet.spec import FleetSpec
from tui.gpu.source import open_gpu_source
from tui.ops.alerts.engine import AlertEvent, AlertFired
from tui.ops.alerts.rules import KINDS, AlertConfig, AlertConfigError, load_alert_config
from tui.ops.alerts.runner import AlertRunner
from tui.ops.alerts.webhook import body
from tui.ops.cli.status import fleet_spec
from tui.pipeline.status import check_status_path, read_status
from tui.state.files import StateFileError

PROG = "gpufleet alerts"

STOP_GRACE_S = 1.0
"""Seconds an interrupted watcher gives the webhook to send what it holds (an operator's
Ctrl-C ends it within a second or two, never after the webhook's tries)."""


def build_parser() -> argparse.ArgumentParser:
    """The command's options."""
    parser = ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--watch",
        type=number(float, 0.2, 3600),
        nargs="?",
        const=1.0,
        default=None,
        metavar="S",
        help="poll every S seconds (0.2..3600, default 1) and fire the rules until interrupted",
    )
    parser.add_argument(
        "--count", type=number(int, 1, 10**7), default=None, metavar="N", help="stop after N polls"
    )
    parser.add_argument("--json", action="store_true", help="each alert as its webhook body")
    parser.add_argument("--ports", default=None, help="server ports (default: the fleet state's)")
    parser.add_argument("--gpus", default=None, help="GPU of each port (default 0, 1, ...)")
    parser.add_argument(
        "--status", type=Path, default=None, metavar="PATH", help="the job's status document"
    )
    return parser


def rules_lines(config: AlertConfig) -> list[str]:
    """The rules in force, one a line, then the webhook."""
    on = {rule.name: rule for rule in config.rules}
    lines = []
    for kind in KINDS:
        rule = on.get(kind.name)
        if rule is None:
            lines.append(f"{kind.name:<15} off")
            continue
        limit = f"{kind.key} {rule.threshold:g}, " if kind.key else ""
        lines.append(
            f"{kind.name:<15} {limit}for {rule.for_s:g} s, clear after {rule.clear_s:g} s: "
            f"{kind.says}"
        )
    hook = config.webhook or "none"
    lines.append(
        f"webhook: {hook}" + (f" ({config.webhook_timeout_s:g} s)" if config.webhook else "")
    )
    return lines


def event_line(event: AlertEvent) -> str:
    """One alert for a terminal: when, FIRING or RESOLVED, the rule, what is wrong."""
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(event.at))
    state = "FIRING  " if isinstance(event, AlertFired) else "RESOLVED"
    return f"{when}  {state}  {event.rule}: {event.message}"


def _say(events: Sequence[AlertEvent], args: argparse.Namespace, node: str) -> None:
    """Print each alert fired or resolved: a line, or its webhook body with ``--json``."""
    for event in events:
        text = json.dumps(body(event, node)) if args.json else event_line(event)
        print(text, flush=True)


async def _watch(spec: FleetSpec, config: AlertConfig, args: argparse.Namespace) -> int:
    monitor = FleetMonitor(spec, open_gpu_source())
    runner = AlertRunner(config, by="cli")
    status = paths.pipeline_status_file() if args.status is None else args.status
    node = socket.gethostname()
    if not runner.publishing:
        print(f"{PROG}: another process publishes this node's alerts; showing them only",
              file=sys.stderr)  # fmt: skip
    stopped: list[signal.Signals] = []
    loop, main_task = asyncio.get_running_loop(), asyncio.current_task()
    assert main_task is not None

    def stop(sig: signal.Signals) -> None:
        stopped.append(sig)
        main_task.cancel()  # a poll under way is not waited for

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop, sig)
    polls = 0
    try:
        while True:
            started = time.monotonic()
            snapshot = await monitor.poll()
            job = await asyncio.to_thread(read_status, status)
            # Shielded: a signal that ends the watch mid-feed waits for the feed (its thread
            # journals the alert and hands it to the webhook whatever happens here) and says
            # what it fired; cancelled unshielded, an alert was journalled and never printed.
            feed = asyncio.ensure_future(asyncio.to_thread(runner.feed, snapshot, job))
            try:
                events = await asyncio.shield(feed)
            except asyncio.CancelledError:
                _say(await feed, args, node)
                raise
            _say(events, args, node)
            polls += 1
            if args.count is not None and polls >= args.count:
                return 0
            await asyncio.sleep(max(args.watch - (time.monotonic() - started), 0.0))
    except asyncio.CancelledError:
        if not stopped:
            raise
        return 128 + stopped[0]
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        unsent = await asyncio.to_thread(runner.close, STOP_GRACE_S if stopped else None)
        if unsent:
            print(f"{PROG}: {unsent} alert(s) not posted to the webhook", file=sys.stderr)
        await monitor.aclose()


def main(argv: Sequence[str]) -> int:
    """Print the rules, or watch the fleet and fire them; returns the exit status."""
    args = build_parser().parse_args(list(argv))
    try:
        config = load_alert_config()
        ports = numbers_list(args.ports, "--ports", 1, 65535) if args.ports else None
        gpus = numbers_list(args.gpus, "--gpus", 0, 255) if args.gpus else None
        if args.count is not None and args.watch is None:
            raise ValueError("--count: only with --watch")
        if args.status is not None:
            check_status_path(args.status)  # a FIFO or /dev/zero: refused now, never read
        if args.watch is None:
            print("\n".join(rules_lines(config)))
            return 0
        spec = fleet_spec(ports, gpus)
    except (argparse.ArgumentTypeError, ValueError, StateFileError, AlertConfigError) as error:
        print(f"{PROG}: {error}", file=sys.stderr)
        return 2
    try:
        return asyncio.run(_watch(spec, config, args))
    except KeyboardInterrupt:
        return 130

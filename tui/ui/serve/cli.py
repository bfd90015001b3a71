"""``gpufleet serve``: the console in a browser, read-only unless ``--writable``.

Every option that is not the server's is the console's (``--profile NAME``, ``--ports``, ...):
each browser session runs ``gpufleet console`` with them. The server listens on 127.0.0.1 by
default; reach it from a laptop through an SSH tunnel (``ssh -L 8000:127.0.0.1:8000 HOST``) and
open the URL it prints, which carries the token.
"""

from __future__ import annotations

import argparse
import ipaddress
import sys
from collections.abc import Sequence
from pathlib import Path

from tui.cli_args import ArgumentParser, number
from tui.ui.serve.limits import MAX_SESSIONS, MAX_SESSIONS_RANGE

HOST_DEFAULT = "127.0.0.1"
PORT_DEFAULT = 8000
PORT_RANGE = (1, 65535)


def build_parser() -> argparse.ArgumentParser:
    """The server's own options (the rest go to the console)."""
    parser = ArgumentParser(
        prog="gpufleet serve",
        description="The console in a browser (textual-serve), read-only unless --writable.",
        epilog="Any other option is the console's: see 'gpufleet console --help'. With no "
        "--ports, --gpus, --profile, --agents or --fleet, each browser session watches the fleet "
        "the state records as it opens (its ports and hosts, as 'gpufleet status' reads them), "
        "else ports 30000-30006; the startup line says which.",
    )
    parser.add_argument(
        "--host", default=HOST_DEFAULT, help=f"address to listen on (default {HOST_DEFAULT})"
    )
    parser.add_argument(
        "--port", type=int, default=PORT_DEFAULT, help=f"port (default {PORT_DEFAULT})"
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--readonly",
        dest="writable",
        action="store_false",
        help="watch only: every key that changes the fleet or the job is disabled (the default)",
    )
    mode.add_argument(
        "--writable",
        dest="writable",
        action="store_true",
        help="let the browser operate the fleet (kill, relaunch, apply, ...)",
    )
    parser.add_argument(
        "--token-file",
        type=Path,
        default=None,
        help="file whose first line is the token (default: $GPUFLEET_SERVE_TOKEN, else a new "
        "random token, printed once)",
    )
    parser.add_argument(
        "--max-sessions",
        type=number(int, *MAX_SESSIONS_RANGE),
        default=MAX_SESSIONS,
        metavar="N",
        help=f"browser sessions (each a console) at once; past it a page is answered 503 "
        f"(default {MAX_SESSIONS})",
    )
    parser.set_defaults(writable=False)
    return parser


def _check_console_args(console_args: list[str]) -> tuple[str | None, str]:
    """Parse the console's options as the console will (exits 2 on a bad one); load its
    profile. Returns the problem in one line (or None) and the fleet the consoles watch."""
    from tui.ops.types import StateFileError
    from tui.profiles import ProfileError, load_named
    from tui.ui.cli import build_parser as console_parser
    from tui.ui.watch_cli import watched_fleet

    args = console_parser().parse_args(console_args)
    if args.profile is not None:
        try:
            load_named(args.profile)
        except ProfileError as error:
            return f"--profile: {error}", ""
    if args.fleet is not None:
        from tui.console_wiring import fleet_file_problem

        problem = fleet_file_problem(args.fleet)  # a FIFO or /dev/zero: refused here
        if problem is not None:
            return f"--fleet: {problem}", ""
        return None, f"the nodes of the fleet file {args.fleet}"
    if args.agents is not None:
        return None, f"the agents {args.agents}"
    if args.profile is not None:
        return None, f"profile {args.profile}'s fleet"
    try:
        return None, watched_fleet(args)[1]
    except (ValueError, StateFileError) as error:
        return str(error), ""


def main(argv: Sequence[str]) -> int:
    """Check the options, then serve the console until interrupted.

    Args:
        argv: Arguments after ``serve``.

    Returns:
        0 after Ctrl+C or SIGTERM; 1 when the address cannot be listened on; 2 on bad options.
    """
    args, console_args = build_parser().parse_known_args(list(argv))
    low, high = PORT_RANGE
    if not low <= args.port <= high:
        print(f"gpufleet serve: --port: {args.port} is outside {low}-{high}", file=sys.stderr)
        return 2
    problem, watching = _check_console_args(console_args)
    if problem is not None:
        print(f"gpufleet serve: {problem}", file=sys.stderr)
        return 2
    from tui.ui.serve.auth import TokenError, load_token

    try:
        token = load_token(args.token_file)
    except TokenError as error:
        print(f"gpufleet serve: {error}", file=sys.stderr)
        return 2
    if not _loopback(args.host):
        print(
            f"gpufleet serve: listening on {args.host}: reachable from the network, the token "
            "is all that guards it (an SSH tunnel to 127.0.0.1 is safer)",
            file=sys.stderr,
        )
    from tui.ui.serve.server import ConsoleServer, console_argv

    readonly = not args.writable
    argv_ = console_argv(console_args, readonly)
    title = "gpufleet" + (" (read-only)" if readonly else "")
    server = ConsoleServer(
        argv_,
        host=args.host,
        port=args.port,
        token=token,
        title=title,
        watching=watching,
        max_sessions=args.max_sessions,
    )
    try:
        server.serve()
    except OSError as error:
        print(
            f"gpufleet serve: --host {args.host} --port {args.port}: cannot listen ({error})",
            file=sys.stderr,
        )
        return 1
    return 0


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False

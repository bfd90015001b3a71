"""``gpufleet replay [--at TIME] [--history PATH]``: the console, read-only, on the recorded
history at a past moment (``tui.ops.replay``), with a time cursor.

TIME is an ISO time (``2026-12-07 18:42:10``, local unless it carries an offset), an offset
from the history's last moment (``-15m``) or from its first (``+5m``; units s, m, h, d), or
seconds since the epoch; default: the last moment. Exit status: 0, 1 the history cannot be
read, 2 bad input or no history.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from tui import paths
from tui.cli_args import ArgumentParser

PROG = "gpufleet replay"


def build_parser() -> ArgumentParser:
    """The command's options."""
    parser = ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--at",
        default=None,
        metavar="TIME",
        help="the moment to open at: 2026-12-07 18:42:10, -15m (before the history's last "
        "moment), +5m (after its first) or epoch seconds (default: the last moment)",
    )
    parser.add_argument(
        "--history",
        type=Path,
        default=None,
        metavar="PATH",
        help="the history file (default: the state directory's history.sqlite3; "
        "GPUFLEET_STATE_DIR names another state directory)",
    )
    return parser


def joined_at(argv: Sequence[str]) -> list[str]:
    """``--at -15m`` as ``--at=-15m``: argparse reads a value that starts with '-' and is not a
    number as an option, and said '--at: expected one argument' to the form the help offers."""
    out = list(argv)
    for i, arg in enumerate(out[:-1]):
        if arg == "--at" and out[i + 1].startswith("-"):
            out[i : i + 2] = [f"--at={out[i + 1]}"]
            break
    return out


def main(argv: Sequence[str]) -> int:
    """Open the replay; returns the exit status."""
    from tui.history import HistoryError
    from tui.history.cli import NoHistory, open_existing
    from tui.ops.marks import JournalMarks
    from tui.ops.replay import ReplayFleet, moment

    args = build_parser().parse_args(joined_at(argv))
    path = args.history or paths.history_file()
    try:
        store = open_existing(path)
    except HistoryError as error:
        print(f"{PROG}: {error}", file=sys.stderr)
        return 2 if isinstance(error, NoHistory) else 1
    try:
        found = store.time_range()
        if found is None:
            print(f"{PROG}: the history at {path} holds nothing yet", file=sys.stderr)
            return 2
        first, last = found
        try:
            at = last if args.at is None else moment(args.at, first, last)
        except ValueError as error:
            print(f"{PROG}: {error}", file=sys.stderr)
            return 2
        # The journal's markers on the chart: only the state directory's history is its own.
        marks = JournalMarks() if args.history is None else None
        from tui.ui.replay.app import ReplayApp

        ReplayApp(ReplayFleet(store, at, marks)).run()
    finally:
        store.close()
    return 0

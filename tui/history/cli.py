"""``gpufleet history export --since WHEN [--until WHEN] [--format csv|ndjson]``: the recorded
history (``tui.history``) as rows, for a spreadsheet, pandas or jq.

WHEN is an age (``90s``, ``30m``, ``2h``, ``2d``: that long ago), a local date and time
(``2026-12-07 14:00``, ``2026-12-07T14:00:00``, optionally with a UTC offset) or seconds since
the epoch. Each series is read from the finest tier that reaches back to ``--since`` (5 s buckets
for 2 hours, 1 minute for 2 days, 15 minutes after), one row a bucket, oldest first:

    t, time, gpu, metric, value, bucket_s

``t`` is the bucket's start in seconds since the epoch, ``time`` the same in local ISO 8601,
``gpu`` the GPU (empty in CSV, null in NDJSON: the fleet's series), ``value`` the mean of the
bucket's readings, ``bucket_s`` its width. ``--gpu`` and ``--metric`` keep some series only.

Exit status: 0, 1 the history cannot be read, 2 bad input.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import re
import sys
import time
from collections.abc import Iterator, Sequence
from datetime import datetime
from pathlib import Path

from tui import paths
from tui.cli_args import ArgumentParser
from tui.history.store import HistoryError, HistoryStore

PROG = "gpufleet history"
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
"""An age's units."""
COLUMNS = ("t", "time", "gpu", "metric", "value", "bucket_s")


def when(text: str, now: float) -> float:
    """A moment: an age ('2h' ago), a local ISO date and time, or epoch seconds.

    Raises:
        argparse.ArgumentTypeError: none of those (the message says what is allowed).
    """
    age = re.fullmatch(r"(\d+(?:\.\d+)?)([smhd])", text.strip())
    if age:
        return now - float(age.group(1)) * UNITS[age.group(2)]
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(text.strip()).timestamp()
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an age (90s, 30m, 2h, 2d), a date and time (2026-12-07 14:00) "
            "or seconds since the epoch"
        ) from None


class NoHistory(HistoryError):
    """No history file where one was looked for (nothing was created by looking)."""


def open_existing(path: Path) -> HistoryStore:
    """The history at ``path`` to read, never created by looking. Blocking.

    Raises:
        NoHistory: no file there (the message says a console records one).
        HistoryError: a file that is not a history.
    """
    if not path.is_file():
        raise NoHistory(f"no history at {path} (a console records it while it runs)")
    return HistoryStore(path)


def build_parser() -> argparse.ArgumentParser:
    """The command's options."""
    parser = ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    export = commands.add_parser("export", help="the history's buckets as CSV or NDJSON rows")
    export.add_argument("--since", required=True, help="from (an age, a date and time, or epoch)")
    export.add_argument("--until", default=None, help="to (default: now)")
    export.add_argument("--format", choices=("csv", "ndjson"), default="csv")
    export.add_argument("--gpu", default=None, help="one GPU's series (a number), or 'fleet'")
    export.add_argument("--metric", default=None, help="these metrics only (comma-separated)")
    export.add_argument(
        "--history", type=Path, default=None, help="the history file (default: the state dir's)"
    )
    return parser


def rows(
    store: HistoryStore,
    since: float,
    until: float,
    gpu: str | None = None,
    metrics: frozenset[str] | None = None,
) -> Iterator[dict[str, object]]:
    """Every bucket of the chosen series between ``since`` and ``until``, series by series."""
    for index, metric in store.series_keys():
        if metrics is not None and metric not in metrics:
            continue
        if gpu is not None and gpu != ("fleet" if index is None else str(index)):
            continue
        points = store.series(index, metric, since, until)
        width = _width(points)
        for t, value in points:
            yield {
                "t": t,
                "time": datetime.fromtimestamp(t).astimezone().isoformat(timespec="seconds"),
                "gpu": index,
                "metric": metric,
                "value": value,
                "bucket_s": width,
            }


def _width(points: list[tuple[float, float]]) -> int | None:
    """The buckets' width: the smallest gap between two (None with fewer than two)."""
    gaps = [b[0] - a[0] for a, b in itertools.pairwise(points)]
    return int(min(gaps)) if gaps else None


def main(argv: Sequence[str]) -> int:
    """Export the history; returns the exit status."""
    args = build_parser().parse_args(list(argv))
    now = time.time()
    try:
        since = when(args.since, now)
        until = when(args.until, now) if args.until is not None else now
        if until < since:
            raise argparse.ArgumentTypeError("--until is before --since")
        if args.gpu is not None and args.gpu != "fleet" and not args.gpu.isdigit():
            raise argparse.ArgumentTypeError(f"--gpu={args.gpu!r}: a GPU number or 'fleet'")
    except argparse.ArgumentTypeError as error:
        print(f"{PROG}: {error}", file=sys.stderr)
        return 2
    metrics = frozenset(args.metric.split(",")) if args.metric else None
    try:
        store = open_existing(args.history or paths.history_file())
    except HistoryError as error:  # none there too
        print(f"{PROG}: {error}", file=sys.stderr)
        return 1
    try:
        found = rows(store, since, until, args.gpu, metrics)
        if args.format == "ndjson":
            for row in found:
                sys.stdout.write(json.dumps(row) + "\n")
        else:
            writer = csv.DictWriter(sys.stdout, COLUMNS, lineterminator="\n")
            writer.writeheader()
            writer.writerows(found)
    finally:
        store.close()
    return 0

"""``gpufleet journal [--json] [--last N] [--alerts]``: every operation that changed the fleet,
or (``--alerts``) every alert that fired or resolved (``tui.ops.alerts``)."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from tui import paths
from tui.cli_args import ArgumentParser
from tui.ops.cli.common import format_report
from tui.ops.journal import JournalEntry, read_journal
from tui.words import counted


def _when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


def format_entry(entry: JournalEntry) -> list[str]:
    """Readable lines of one journal entry (the detail read defensively)."""
    status = "ok" if entry.ok else ("REFUSED" if entry.refused else "FAILED")
    if entry.lost_in_flight:
        status += f", {counted(entry.lost_in_flight, 'in-flight request')} LOST"
    if entry.client_still_sending:
        status += ", requests may have been LOST (a drain ended while a client was still sending)"
    if entry.type == "alert":  # an alert's entry says what it observed: firing or resolved
        status = entry.verdict or "alert"
    took = f" in {entry.finished_at - entry.started_at:.0f} s"
    gpus = f" on GPUs {','.join(str(g) for g in entry.gpus)}" if entry.gpus else ""
    if entry.target is None:
        change = entry.source or ""
    elif entry.source is None or entry.source == entry.target:
        change = entry.target  # a start, or what ran before is not recorded: never '? ->'
    else:
        change = f"{entry.source} -> {entry.target}"
    lines = [
        f"{_when(entry.started_at)}  {entry.type}{' ' if change else ''}{change}{gpus}: "
        f"{status}{took}" + (f" ({entry.by})" if entry.by else "")
    ]
    if entry.summary:
        lines.append(f"  {entry.summary}")
    detail: Mapping[str, Any] = entry.detail
    diff = detail.get("diff")
    if isinstance(diff, list):
        lines += [f"  diff: {d}" for d in diff]
    lines += [f"  refused: {e}" for e in entry.refused]
    reports = detail.get("reports")
    for rep in reports if isinstance(reports, list) else []:
        if isinstance(rep, dict):
            lines.append("  " + format_report(rep))
    return lines


def main(argv: Sequence[str]) -> int:
    """Print the journal; returns 0 (2 on bad arguments)."""
    parser = ArgumentParser(prog="gpufleet journal", description=__doc__)
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
    parser.add_argument("--last", type=int, default=None, metavar="N", help="only the last N")
    parser.add_argument(
        "--alerts", action="store_true", help="the alerts' journal instead of the operations'"
    )
    args = parser.parse_args(list(argv))
    if args.last is not None and args.last < 1:
        print(f"gpufleet journal: --last={args.last}: must be >= 1", file=sys.stderr)
        return 2
    path = paths.alerts_journal_file() if args.alerts else paths.journal_file()
    read = read_journal(path)
    if read.unreadable:
        print(f"gpufleet journal: {read.unreadable}", file=sys.stderr)
        return 1
    entries = read.entries[-args.last :] if args.last else read.entries
    if args.json:
        for entry in entries:
            print(json.dumps(entry.to_json(), default=str))
    else:
        if not entries:
            print(f"journal is empty ({path})")
        for entry in entries:
            print("\n".join(format_entry(entry)))
    if read.skipped:
        print(
            f"({read.skipped} unreadable line(s) skipped; first: {read.first_problem})",
            file=sys.stderr,
        )
    if read.partial:
        print(f"gpufleet journal: {read.partial}", file=sys.stderr)
    return 0

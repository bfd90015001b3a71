"""``gpufleet journal [--json] [--last N]``: print the journal of applies, canaries, rollouts."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from typing import Any

from tui import paths
from tui.cli_args import ArgumentParser
from tui.retune.journal import read_journal


def _when(ts: object) -> str:
    if not isinstance(ts, int | float):
        return "?"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


def _gb(n: object) -> str:
    return f"{n / 1e9:.1f} GB" if isinstance(n, int | float) else "?"


def format_entry(entry: dict[str, Any]) -> list[str]:
    """Readable lines of one journal entry (any type; applies in detail)."""
    kind = entry.get("type", "?")
    status = "ok" if entry.get("ok") else ("REFUSED" if entry.get("refused") else "FAILED")
    took = ""
    if isinstance(entry.get("finished_at"), int | float) and isinstance(
        entry.get("started_at"), int | float
    ):
        took = f" in {entry['finished_at'] - entry['started_at']:.0f} s"
    gpus = ",".join(str(g) for g in entry.get("gpus", []))
    lines = [
        f"{_when(entry.get('started_at'))}  {kind} {entry.get('profile', '?')} "
        f"on GPUs {gpus}: {status}{took}"
    ]
    prev = {v for v in entry.get("previous_profiles", {}).values() if v}
    if prev:
        lines.append(f"  previous: {', '.join(sorted(prev))}")
    lines += [f"  diff: {d}" for d in entry.get("diff", [])]
    lines += [f"  refused: {e}" for e in entry.get("refused", [])]
    for rep in entry.get("reports", []):
        lines.append("  " + format_report(rep))
    tp = entry.get("throughput") or {}
    if tp.get("summary"):
        lines.append(f"  throughput: {tp['summary']}")
    return lines


def format_report(rep: dict[str, Any]) -> str:
    """One GPU's line: requested vs effective, KV, Mamba, free memory, time to ready or why not."""
    req = rep.get("requested") or {}
    eff = rep.get("effective") or {}
    head = f"GPU {rep.get('gpu')}: "
    if not rep.get("ok"):
        return head + f"FAILED {rep.get('failure') or ''}".rstrip()
    cap = " (CAPPED)" if rep.get("capped") else ""
    return head + (
        f"ready in {rep.get('time_to_ready_s')} s; max_running requested "
        f"{req.get('max_running_requests') or 'auto'} -> effective "
        f"{eff.get('max_running_requests') or '?'}{cap}; "
        f"mamba slots {eff.get('mamba_slots') or '?'}"
        f"; KV tokens {eff.get('kv_tokens') or '?'}; free {_gb(rep.get('free_memory_bytes'))}"
    )


def main(argv: Sequence[str]) -> int:
    """Print the journal; returns 0 (2 on bad arguments)."""
    parser = ArgumentParser(prog="gpufleet journal", description=__doc__)
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
    parser.add_argument("--last", type=int, default=None, metavar="N", help="only the last N")
    args = parser.parse_args(list(argv))
    if args.last is not None and args.last < 1:
        print(f"gpufleet journal: --last={args.last}: must be >= 1", file=sys.stderr)
        return 2
    try:
        read = read_journal()
    except OSError as exc:
        print(f"gpufleet journal: {exc}", file=sys.stderr)
        return 1
    entries = read.entries[-args.last :] if args.last else read.entries
    skipped = read.skipped
    if args.json:
        for entry in entries:
            print(json.dumps(entry))
    else:
        if not entries:
            print(f"journal is empty ({paths.journal_file()})")
        for entry in entries:
            try:
                print("\n".join(format_entry(entry)))
            except (TypeError, AttributeError, ValueError, KeyError):
                skipped += 1  # an object whose fields have the wrong types
    if skipped:
        print(f"({skipped} unreadable line(s) skipped in {paths.journal_file()})", file=sys.stderr)
    return 0

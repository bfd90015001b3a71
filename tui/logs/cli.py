"""``gpufleet logs``: parse SGLang logs into typed JSON events, or summarise a log."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Sequence
from typing import BinaryIO

from tui.logs.ingest import ingest_file
from tui.logs.parser import parse_line
from tui.logs.state import LogState


def _lines(stream: BinaryIO) -> Iterator[str]:
    # Split on b"\n" only, as the tailer and the ingest path do (not str.splitlines' extras).
    for raw in stream:
        yield raw.rstrip(b"\n").decode("utf-8", errors="replace")


def _parse(path: str) -> int:
    out = sys.stdout
    if path == "-":
        stream: BinaryIO = sys.stdin.buffer
        close = False
    else:
        stream = open(path, "rb")  # noqa: SIM115 - closed below, stdin is not ours to close
        close = True
    try:
        for number, text in enumerate(_lines(stream), start=1):
            event = parse_line(text, number)
            if event is not None:
                out.write(event.to_json() + "\n")
    finally:
        if close:
            stream.close()
    return 0


def _summary(path: str) -> int:
    summary = ingest_file(path)
    state = LogState()
    state.apply_summary(summary)
    view = state.view()
    doc = {
        "lines": summary.lines,
        "decode_lines": summary.decode_lines,
        "prefill_lines": summary.prefill_lines,
        "phase": view.phase,
        "ready": view.ready,
        "failed": view.failed,
        "kv_tokens": view.kv_tokens,
        "mamba_slots": view.mamba_slots,
        "max_running_effective": view.max_running_effective,
        "max_running_requested": view.max_running_requested,
        "capped": view.capped,
        "available_gpu_mem_gb": view.available_gpu_mem_gb,
        "allocation_lines": list(view.allocation_lines),
        "errors": [e.to_dict() for e in summary.rare if e.kind == "error"],
        "last_error": view.last_error,
        "error_reason": view.error_reason,
        "latest_decode": summary.latest_decode.to_dict() if summary.latest_decode else None,
        "latest_prefill": summary.latest_prefill.to_dict() if summary.latest_prefill else None,
    }
    print(json.dumps(doc, indent=2))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``gpufleet logs``.

    Args:
        argv: Arguments after ``logs`` (``parse FILE`` or ``summary FILE``; ``-`` is stdin).

    Returns:
        0 on success, 2 on a usage error or a missing/unreadable file.
    """
    parser = argparse.ArgumentParser(prog="gpufleet logs", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    parse_cmd = sub.add_parser("parse", help="print one JSON object per recognised line")
    parse_cmd.add_argument("file", help="log file, or - for stdin")
    summary_cmd = sub.add_parser(
        "summary", help="allocation lines, caps, errors and the last batch stats, as JSON"
    )
    summary_cmd.add_argument("file", help="log file")
    try:
        args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        if args.command == "parse":
            return _parse(args.file)
        if args.file == "-":
            print("gpufleet logs summary: FILE must be a file, not stdin (-)", file=sys.stderr)
            return 2
        return _summary(args.file)
    except FileNotFoundError:
        print(f"gpufleet logs {args.command}: no such file: {args.file}", file=sys.stderr)
        return 2
    except IsADirectoryError:
        print(f"gpufleet logs {args.command}: FILE is a directory: {args.file}", file=sys.stderr)
        return 2
    except PermissionError:
        print(f"gpufleet logs {args.command}: cannot read {args.file}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0

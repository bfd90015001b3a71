"""``gpufleet logs``: parse SGLang logs into typed JSON events, or summarise a log."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Sequence
from typing import BinaryIO

from tui.cli_args import ArgumentParser
from tui.inputs import InputError, open_stream
from tui.logs.blocks import read_records
from tui.logs.ingest import MAX_LINE_BYTES, ingest_file
from tui.logs.state import LogState


def _lines(stream: BinaryIO) -> Iterator[str]:
    # Split on b"\n" only, as the tailer and the ingest path do (not str.splitlines' extras).
    # Bounded: a line longer than MAX_LINE_BYTES (no SGLang line is) is skipped to its end.
    while raw := stream.readline(MAX_LINE_BYTES + 1):
        if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
            while (rest := stream.readline(MAX_LINE_BYTES)) and not rest.endswith(b"\n"):
                pass
            yield ""
            continue
        yield raw.rstrip(b"\n").decode("utf-8", errors="replace")


class _NotALog(Exception):
    """FILE is something a log cannot be (a directory, a device)."""


def _open_log(path: str) -> BinaryIO:
    """The log FILE, through the one door (``tui.inputs.open_stream``): a regular file, opened
    without blocking. A FIFO (whose open waits for a writer, for ever) or a device (``/dev/zero``
    never ends) is refused; a pipe is read from stdin (``-``)."""
    try:
        return open_stream(path, "a log file")
    except InputError as error:
        if not error.problem.startswith("is "):
            raise _NotALog(f"cannot read {path}: {error.problem}") from None
        kind = error.problem.removeprefix("is ").split(",")[0]
        hint = " (give a pipe as - on stdin)" if kind == "a FIFO" else ""
        raise _NotALog(f"FILE is {kind}, not a log file: {path}{hint}") from None


def _parse(path: str) -> int:
    out = sys.stdout
    if path == "-":
        stream: BinaryIO = sys.stdin.buffer
        close = False
    else:
        stream = _open_log(path)  # closed below; stdin is not ours to close
        close = True
    try:
        # Records, not lines: a traceback is one error event (its exception line's), a Python
        # warning one event with its continuation lines (``tui.logs.blocks``).
        for record in read_records(_lines(stream)):
            if record.event is not None:
                out.write(record.event.to_json() + "\n")
    finally:
        if close:
            stream.close()
    return 0


def _summary(path: str) -> int:
    _open_log(path).close()
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
    parser = ArgumentParser(prog="gpufleet logs", description=__doc__)
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
    except _NotALog as exc:
        print(f"gpufleet logs {args.command}: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(
            f"gpufleet logs {args.command}: cannot read {args.file}: {exc.strerror}",
            file=sys.stderr,
        )
        return 2
    except BrokenPipeError:
        return 0

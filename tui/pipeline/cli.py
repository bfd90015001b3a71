"""``gpufleet generate``: the resumable generation pipeline, headless.

Exit status: 0 every prompt done (and uploaded with --s3-bucket); 1 the run failed (no server
answered in time, or S3 unreachable for --s3-wait); 2 bad input (missing prompts file, malformed
lines refused, missing bucket, bad option); 3 finished but some prompts failed after their
retries (rerun to retry them); 143 stopped by SIGTERM/SIGINT (durable shards kept; run again
to resume).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from pathlib import Path

from tui import paths
from tui.pipeline.detach import start_detached
from tui.pipeline.fleet_urls import server_urls
from tui.pipeline.prompts import PromptFile, PromptFileError
from tui.pipeline.runner import EXIT_BAD_INPUT, GenerateConfig, Pipeline
from tui.pipeline.s3_sink import S3Sink
from tui.profiles import ProfileError, load_named


def _positive(name: str, low: int = 1, high: int = 10**9) -> type[int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name}={text!r}: not an integer") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{name}={value}: allowed range {low}..{high}")
        return value

    return parse  # type: ignore[return-value]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (also used by the console to validate what it launches)."""
    parser = argparse.ArgumentParser(
        prog="gpufleet generate", description="Resumable generation over a fleet of servers."
    )
    parser.add_argument("--prompts", type=Path, required=True, help="JSONL prompt file")
    parser.add_argument("--out", type=Path, required=True, help="local output directory")
    fleet = parser.add_mutually_exclusive_group()
    fleet.add_argument(
        "--server", action="append", default=[], metavar="URL", help="server base URL (repeat)"
    )
    fleet.add_argument(
        "--profile",
        metavar="NAME",
        help="servers from this tuning profile (name or file): its GPUs' ports on its host",
    )
    parser.add_argument("--s3-bucket", help="upload shards to this bucket")
    parser.add_argument("--s3-prefix", default="", help="key prefix in the bucket")
    parser.add_argument("--s3-endpoint-url", help="endpoint of an S3-compatible store")
    parser.add_argument("--status", type=Path, default=None, help="status document path")
    parser.add_argument(
        "--s3-wait",
        type=float,
        default=3600.0,
        help="seconds to keep retrying an unreachable S3 at start while generating (exit 1 after)",
    )
    parser.add_argument(
        "--per-server-inflight", type=_positive("--per-server-inflight", 1, 4096), default=48
    )
    parser.add_argument("--shard-size", type=_positive("--shard-size", 1, 10**7), default=1000)
    parser.add_argument("--max-tokens", type=_positive("--max-tokens", 1, 10**7), default=2048)
    parser.add_argument("--model", default="default", help="model name sent in requests")
    parser.add_argument("--max-retries", type=_positive("--max-retries", 0, 1000), default=3)
    parser.add_argument("--on-bad-line", choices=("skip", "refuse"), default="skip")
    parser.add_argument(
        "--fleet-timeout", type=float, default=60.0, help="seconds to wait for a ready server"
    )
    parser.add_argument("--request-timeout", type=float, default=600.0)
    parser.add_argument(
        "--flush-interval", type=float, default=60.0, help="write a partial shard this often (s)"
    )
    parser.add_argument(
        "--detach", action="store_true", help="run in its own session; print its pid and return"
    )
    parser.add_argument("--log", type=Path, default=None, help="log file when detached")
    return parser


def main(argv: Sequence[str]) -> int:
    """Run ``gpufleet generate``; returns the exit status (see the module docstring)."""
    parser = build_parser()
    try:
        args = parser.parse_args(list(argv))
    except SystemExit as exc:
        return int(exc.code or 0)
    servers = list(args.server)
    if args.profile is not None:
        try:
            servers = server_urls(load_named(args.profile))
        except ProfileError as exc:
            print(f"gpufleet generate: --profile={args.profile}: {exc}", file=sys.stderr)
            return EXIT_BAD_INPUT
        if not servers:
            print(f"gpufleet generate: --profile={args.profile}: it has no GPUs", file=sys.stderr)
            return EXIT_BAD_INPUT
    if not servers:
        print(
            "gpufleet generate: give --profile NAME or at least one --server URL", file=sys.stderr
        )
        return EXIT_BAD_INPUT
    for name in ("fleet_timeout", "request_timeout", "flush_interval", "s3_wait"):
        if getattr(args, name) <= 0:
            flag = "--" + name.replace("_", "-")
            print(f"gpufleet generate: {flag}={getattr(args, name)}: must be > 0", file=sys.stderr)
            return EXIT_BAD_INPUT
    if args.detach:
        rest = [a for a in argv if a != "--detach"]
        log = args.log or paths.pipeline_dir() / "pipeline.log"
        pid = start_detached(rest, log)
        print(pid)
        return 0
    try:
        prompts = PromptFile.open(args.prompts, args.on_bad_line)
    except PromptFileError as exc:
        print(f"gpufleet generate: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    for bad in prompts.bad_lines[:20]:
        print(f"gpufleet generate: skipping line {bad.line}: {bad.reason}", file=sys.stderr)
    if len(prompts.bad_lines) > 20:
        print(
            f"gpufleet generate: ... {len(prompts.bad_lines)} malformed lines skipped",
            file=sys.stderr,
        )
    s3 = S3Sink(args.s3_bucket, args.s3_prefix, args.s3_endpoint_url) if args.s3_bucket else None
    config = GenerateConfig(
        prompts=prompts,
        out_dir=args.out,
        servers=tuple(servers),
        status_path=args.status or paths.pipeline_status_file(),
        s3=s3,
        per_server_inflight=args.per_server_inflight,
        shard_size=args.shard_size,
        max_tokens=args.max_tokens,
        model=args.model,
        max_retries=args.max_retries,
        fleet_timeout_s=args.fleet_timeout,
        request_timeout_s=args.request_timeout,
        flush_interval_s=args.flush_interval,
        s3_wait_s=args.s3_wait,
    )
    return asyncio.run(Pipeline(config).run())

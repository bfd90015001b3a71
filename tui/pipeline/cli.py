"""``gpufleet generate``: the resumable generation pipeline, headless.

Reads OpenAI Batch JSONL (``custom_id``, ``method``, ``url``, ``body``; the older bare
``{"messages": ...}`` / ``{"prompt": ...}`` lines too) and writes OpenAI Batch output records.

Exit status: 0 every prompt done (and uploaded with --s3-bucket); 1 the run failed (no server
answered in time, S3 unreachable for --s3-wait, a write failed: a full disk); 2 bad input,
checked before anything is generated (a missing or unusable prompts file, no valid prompt, bad
lines refused, a bad option, URL, bucket name or path, an output directory another user could
write or held by another pipeline or without room to start, a prompts file whose ids changed
without --resume-by-id, a missing bucket); 3 finished but some prompts failed after
their retries (rerun to retry them); 143 stopped by SIGTERM/SIGINT (durable shards kept; run
again to resume).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlsplit

from tui import paths
from tui.cli_args import ArgumentParser, number
from tui.outputs import write_problem
from tui.pipeline import inputs
from tui.pipeline.detach import start_detached
from tui.pipeline.fleet_urls import connect_host, server_urls
from tui.pipeline.inputs import InputError
from tui.pipeline.job import JobRefused
from tui.pipeline.out_lock import LOCK_NAME, OutDirBusy, OutDirLock
from tui.pipeline.prompts import (
    DEFAULT_MAX_LINE_BYTES,
    MAX_LINE_BYTES_RANGE,
    PromptFile,
    PromptFileError,
)
from tui.pipeline.run_config import S3_LEASE_TTL_RANGE, S3_LEASE_TTL_S, GenerateConfig
from tui.pipeline.runner import EXIT_BAD_INPUT, Pipeline
from tui.profiles import ProfileError, load_named

_SECONDS = 10.0**6
"""Upper bound of every seconds option (11.6 days)."""
_BAD_LINES_SHOWN = 20


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (also used by the console to validate what it launches)."""
    parser = ArgumentParser(
        prog="gpufleet generate", description="Resumable generation over a fleet of servers."
    )
    parser.add_argument("--prompts", type=Path, required=True, help="OpenAI Batch JSONL file")
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
    parser.add_argument(
        "--router",
        metavar="URL",
        help="send every request through this SGLang router (sglang-router/smg), keeping its "
        "workers registered: the --server URLs that answer /health, or the --agents' ready servers",
    )
    parser.add_argument(
        "--agents",
        metavar="HOST:PORT,...",
        help="with --router: take the workers from these nodes' agents (gpufleet agent)",
    )
    parser.add_argument(
        "--token-file", type=Path, default=None, help="the agents' bearer token file"
    )
    parser.add_argument(
        "--resume-by-id",
        action="store_true",
        help="resume even though the prompts file changed: done ids are skipped, new ones "
        "generated, removed ones reported",
    )
    parser.add_argument("--s3-bucket", help="upload shards to this bucket")
    parser.add_argument("--s3-prefix", default="", help="key prefix in the bucket")
    parser.add_argument("--s3-endpoint-url", help="endpoint of an S3-compatible store")
    parser.add_argument("--status", type=Path, default=None, help="status document path")
    parser.add_argument(
        "--s3-wait",
        type=number(float, 0, _SECONDS, low_open=True),
        default=3600.0,
        help="seconds to keep retrying an unreachable S3 at start while generating (exit 1 after)",
    )
    parser.add_argument(
        "--s3-lease-ttl",
        type=number(float, *S3_LEASE_TTL_RANGE),
        default=S3_LEASE_TTL_S,
        help="seconds the prefix's lease lasts unless renewed (renewed every quarter of it); "
        "another job may take the prefix once it has run out",
    )
    parser.add_argument("--per-server-inflight", type=number(int, 1, 4096), default=48)
    parser.add_argument("--shard-size", type=number(int, 1, 10**7), default=1000)
    parser.add_argument("--max-tokens", type=number(int, 1, 10**7), default=2048)
    parser.add_argument("--model", default="default", help="model name for bodies that name none")
    parser.add_argument("--max-retries", type=number(int, 0, 1000), default=3)
    parser.add_argument("--on-bad-line", choices=("skip", "refuse"), default="skip")
    parser.add_argument(
        "--max-line-bytes",
        type=number(int, *MAX_LINE_BYTES_RANGE),
        default=DEFAULT_MAX_LINE_BYTES,
        help="longest prompt line accepted; longer lines are skipped as bad lines",
    )
    parser.add_argument(
        "--fleet-timeout",
        type=number(float, 0, _SECONDS, low_open=True),
        default=60.0,
        help="seconds to wait for a ready server",
    )
    parser.add_argument(
        "--request-timeout", type=number(float, 0, _SECONDS, low_open=True), default=600.0
    )
    parser.add_argument(
        "--flush-interval",
        type=number(float, 0, _SECONDS, low_open=True),
        default=60.0,
        help="write a partial shard this often (s)",
    )
    parser.add_argument(
        "--detach", action="store_true", help="run in its own session; print its pid and return"
    )
    parser.add_argument("--log", type=Path, default=None, help="log file when detached")
    return parser


def _agents(args: argparse.Namespace) -> tuple[tuple[tuple[str, str], ...], str]:
    """The agents of ``--agents`` (base URL, host of its servers) and their token."""
    if args.agents is None:
        if args.token_file is not None:
            raise InputError("--token-file goes with --agents")
        return (), ""
    if args.router is None:
        raise InputError("--agents needs --router (the router's workers come from the agents)")
    from tui.servers.tokens import TokenError, read_token

    agents = []
    for raw in args.agents.split(","):
        entry = raw.strip()
        if not entry:
            continue
        url = inputs.http_url("--agents", entry if "://" in entry else f"http://{entry}")
        agents.append((url.rstrip("/"), connect_host(urlsplit(url).hostname or "")))
    if not agents:
        raise InputError("--agents: give at least one HOST:PORT")
    token_file = args.token_file or paths.state_dir() / "agent.token"
    try:
        return tuple(agents), read_token(token_file)
    except TokenError as exc:
        raise InputError(str(exc)) from None


def _servers(args: argparse.Namespace) -> list[str]:
    if args.agents is not None and not args.server and args.profile is None:
        return []
    if args.profile is not None:
        try:
            servers = server_urls(load_named(args.profile))
        except ProfileError as exc:
            problems = "; ".join(p.message if p.field == "file" else str(p) for p in exc.problems)
            raise InputError(f"--profile={args.profile}: {problems}") from None
        if not servers:
            raise InputError(f"--profile={args.profile}: it has no GPUs")
        return servers
    if not args.server:
        raise InputError("give --profile NAME or at least one --server URL")
    return [inputs.http_url("--server", url) for url in args.server]


def _check(args: argparse.Namespace) -> list[str]:
    """Every input that can be checked without touching the output: servers, S3, paths."""
    servers = _servers(args)
    if args.router is not None:
        inputs.http_url("--router", args.router)
    _agents(args)
    inputs.text_value("--model", args.model)
    if args.s3_bucket is not None:
        inputs.bucket_name(args.s3_bucket)
        inputs.key_prefix(args.s3_prefix)
        if args.s3_endpoint_url is not None:
            inputs.http_url("--s3-endpoint-url", args.s3_endpoint_url)
    elif args.s3_endpoint_url is not None or args.s3_prefix:
        raise InputError("--s3-prefix and --s3-endpoint-url need --s3-bucket")
    return servers


def _report_bad_lines(prompts: PromptFile) -> None:
    for bad in prompts.bad_lines[:_BAD_LINES_SHOWN]:
        print(f"gpufleet generate: skipping line {bad.line}: {bad.reason}", file=sys.stderr)
    if prompts.bad_count > _BAD_LINES_SHOWN:
        print(
            f"gpufleet generate: ... {prompts.bad_count} bad lines skipped in all",
            file=sys.stderr,
        )


def _open_prompts(args: argparse.Namespace) -> PromptFile:
    """The prompts file, its bad lines reported; refused when it holds no valid prompt."""
    prompts = PromptFile.open(args.prompts, args.on_bad_line, args.max_line_bytes)
    _report_bad_lines(prompts)
    if not len(prompts):
        prompts.close()
        raise InputError(
            f"--prompts={args.prompts}: no valid prompt in {prompts.lines} line(s) "
            f"({prompts.bad_count} bad)"
        )
    return prompts


def _detach(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """Check what the detached run will need, then start it and print its pid."""
    _open_prompts(args).close()
    inputs.output_file("--status", args.status or paths.pipeline_status_file())
    log = args.log or paths.pipeline_dir() / "pipeline.log"
    inputs.output_file("--log", log)
    inputs.output_dir(args.out)
    try:  # refuse now, where the user sees it, rather than in the detached log
        OutDirLock.acquire(args.out).release()
    except OutDirBusy as exc:
        raise InputError(f"--out={args.out}: {exc}") from None
    except OSError as exc:  # a link in the lock's place, a full disk
        raise InputError(f"--out={args.out}: {write_problem(args.out / LOCK_NAME, exc)}") from None
    status = args.status or paths.pipeline_status_file()
    pid = start_detached([a for a in argv if a != "--detach"], log, status)
    print(pid)
    return 0


def _run(args: argparse.Namespace, argv: Sequence[str]) -> int:
    servers = _check(args)
    if args.detach:
        return _detach(args, argv)
    prompts = _open_prompts(args)
    try:
        inputs.output_file("--status", args.status or paths.pipeline_status_file())
    except InputError:
        prompts.close()
        raise
    s3 = None
    if args.s3_bucket:
        from tui.pipeline.s3_sink import S3Sink  # boto3: only for runs that upload

        s3 = S3Sink(args.s3_bucket, args.s3_prefix, args.s3_endpoint_url)
    agents, token = _agents(args)
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
        s3_lease_ttl_s=args.s3_lease_ttl,
        by_id=args.resume_by_id,
        router=args.router.rstrip("/") if args.router else None,
        router_agents=agents,
        agent_token=token,
    )
    return asyncio.run(Pipeline(config).run())


def main(argv: Sequence[str]) -> int:
    """Run ``gpufleet generate``; returns the exit status (see the module docstring)."""
    parser = build_parser()
    try:
        args = parser.parse_args(list(argv))
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        return _run(args, argv)
    except (InputError, PromptFileError, JobRefused) as exc:
        print(f"gpufleet generate: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT

"""``gpufleet agent``: serve one node's monitor and operations to Prometheus and to consoles.

    gpufleet agent [--host 127.0.0.1] [--port 9400] [--profile NAME] [--token-file F]
                   [--readonly] [--node NAME] [--open-metrics] [--ssl-certfile C --ssl-keyfile K]

It binds loopback by default: reach it from elsewhere through an SSH tunnel
(``ssh -N -L 9400:127.0.0.1:9400 node1``), or bind another address with TLS
(``--ssl-certfile/--ssl-keyfile``, passed to uvicorn). The token file is made (0600) on the first
start; give consoles and Prometheus a copy. Exit status: 0 stopped by SIGTERM/SIGINT, 2 bad input
(a bad option, an unusable token file, a profile that cannot be loaded, a port in use).
"""

from __future__ import annotations

import argparse
import ipaddress
import socket
import sys
from collections.abc import Sequence
from pathlib import Path

from tui import paths
from tui.cli_args import ArgumentParser, number
from tui.ops.windows import MEASURE_WINDOW_DEFAULT_S, MEASURE_WINDOW_RANGE_S

DEFAULT_PORT = 9400
"""The agent's default port (beside node_exporter's 9100 and dcgm-exporter's 9400 family)."""


def default_token_file() -> Path:
    """Where the agent keeps its token unless told otherwise."""
    return paths.state_dir() / "agent.token"


def build_parser() -> argparse.ArgumentParser:
    """The agent's options."""
    parser = ArgumentParser(prog="gpufleet agent", description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default loopback)")
    parser.add_argument(
        "--port", type=number(int, 1, 65535), default=DEFAULT_PORT, help="port (default 9400)"
    )
    parser.add_argument(
        "--profile", default=None, help="the fleet's profile (default: what the GPUs run)"
    )
    parser.add_argument(
        "--token-file", type=Path, default=None, help="bearer token file (made 0600 if missing)"
    )
    parser.add_argument("--readonly", action="store_true", help="refuse every operation (403)")
    parser.add_argument("--node", default=None, help="the node's name (default: the hostname)")
    parser.add_argument(
        "--open-metrics", action="store_true", help="serve /metrics without the token"
    )
    parser.add_argument("--status", type=Path, default=None, help="the job's status document")
    parser.add_argument("--ssl-certfile", type=Path, default=None, help="TLS certificate (PEM)")
    parser.add_argument("--ssl-keyfile", type=Path, default=None, help="TLS private key (PEM)")
    parser.add_argument(
        "--measure-window",
        type=number(float, *MEASURE_WINDOW_RANGE_S),
        default=MEASURE_WINDOW_DEFAULT_S,
        metavar="S",
        help="throughput window of applies and canaries asked through the agent",
    )
    parser.add_argument(
        "--poll-interval",
        type=number(float, 0.1, 60.0),
        default=1.0,
        metavar="S",
        help="seconds between the agent's views of the node (default 1)",
    )
    return parser


class AgentRefused(ValueError):
    """The agent cannot start (the message names the option)."""


def _check_bind(host: str, port: int) -> None:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as error:
        raise AgentRefused(f"--host={host}: cannot be resolved ({error})") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as error:
            raise AgentRefused(f"--port={port}: cannot bind {host}:{port} ({error})") from None


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def _load_profile(name: str | None) -> object:
    from tui.profiles import ProfileError, load_named
    from tui.state.files import StateFileError
    from tui.state.fleet_state import profile_of, read_running

    try:
        if name is not None:
            return load_named(name)
        running = read_running()
    except ProfileError as error:
        raise AgentRefused(f"--profile: {error}") from None
    except StateFileError as error:
        raise AgentRefused(str(error)) from None
    docs = [s.current for _, s in sorted(running.items()) if s.current is not None]
    if not docs:
        raise AgentRefused("--profile: give the fleet's profile (the fleet state records none)")
    try:
        return profile_of(docs[0])
    except ProfileError as error:
        raise AgentRefused(f"the fleet state's profile: {error}") from None


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from tui.agent.app import build_app
    from tui.agent.server import Agent, AgentConfig
    from tui.fleet.monitor import FleetMonitor
    from tui.gpu.simulated import SimulatedSource
    from tui.gpu.source import open_gpu_source
    from tui.ops.demo import spec_for_profile
    from tui.ops.service import FleetOps, OpsOptions
    from tui.ops.windows import console_windows
    from tui.profiles import Profile
    from tui.servers.tokens import TokenError, load_or_create

    if (args.ssl_certfile is None) != (args.ssl_keyfile is None):
        raise AgentRefused("--ssl-certfile and --ssl-keyfile go together")
    for option, path in (
        ("--ssl-certfile", args.ssl_certfile),
        ("--ssl-keyfile", args.ssl_keyfile),
    ):
        if path is not None and not path.is_file():
            raise AgentRefused(f"{option}={path}: not a file")
    token_file = args.token_file or default_token_file()
    try:
        token = load_or_create(token_file)
    except TokenError as error:
        raise AgentRefused(str(error)) from None
    profile = _load_profile(args.profile)
    assert isinstance(profile, Profile)
    _check_bind(args.host, args.port)
    node = args.node or socket.gethostname()
    gpus = SimulatedSource() if profile.engine.kind == "sim" else open_gpu_source()
    monitor = FleetMonitor(spec_for_profile(profile), gpus)
    windows = console_windows(args.measure_window)
    ops = FleetOps(
        profile, options=OpsOptions(apply=windows.apply, canary=windows.canary), by=f"agent:{node}"
    )
    config = AgentConfig(
        node=node,
        token=token,
        readonly=args.readonly,
        open_metrics=args.open_metrics,
        status_path=args.status or paths.pipeline_status_file(),
        poll_interval_s=args.poll_interval,
    )
    agent = Agent(config, monitor, ops)
    tls = args.ssl_certfile is not None
    if not tls and not _is_loopback(args.host):
        print(
            f"gpufleet agent: warning: serving {args.host} without TLS; the token crosses the "
            "network in clear (use --ssl-certfile/--ssl-keyfile or an SSH tunnel)",
            file=sys.stderr,
        )
    scheme = "https" if tls else "http"
    mode = " read-only" if args.readonly else ""
    print(
        f"gpufleet agent: node {node}{mode} on {scheme}://{args.host}:{args.port} "
        f"(profile {profile.name}, token in {token_file})",
        file=sys.stderr,
        flush=True,
    )
    server = uvicorn.Server(
        uvicorn.Config(
            build_app(agent),
            host=args.host,
            port=args.port,
            log_level="warning",
            access_log=False,
            ssl_certfile=str(args.ssl_certfile) if tls else None,
            ssl_keyfile=str(args.ssl_keyfile) if tls else None,
        )
    )
    server.run()
    return 0


def main(argv: Sequence[str]) -> int:
    """Run the agent until SIGTERM/SIGINT; returns the exit status."""
    args = build_parser().parse_args(list(argv))
    try:
        return _serve(args)
    except AgentRefused as error:
        print(f"gpufleet agent: {error}", file=sys.stderr)
        return 2

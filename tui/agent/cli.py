"""``gpufleet agent``: serve one node's monitor and operations to Prometheus and to consoles.

    gpufleet agent [--host 127.0.0.1] [--port 9400] [--profile NAME] [--token-file F]
                   [--readonly] [--node NAME] [--open-metrics] [--ssl-certfile C --ssl-keyfile K]
                   [--detach [--start-timeout S] | --stop [--stop-timeout S] | --running]
    gpufleet agent start|stop|status HOST [HOST...] [--ssh-option OPT] [-- agent options]
    gpufleet agent token read|operate|admin [--token-file F]

It binds loopback by default: reach it from elsewhere through an SSH tunnel
(``ssh -N -L 9400:127.0.0.1:9400 node1``), or bind another address with TLS
(``--ssl-certfile/--ssl-keyfile``, passed to uvicorn). The token file is made (0600) on the first
start; give consoles and Prometheus a copy. Exit status: 0 stopped by SIGTERM/SIGINT, 2 bad input
(a bad option, an unusable token file, a profile that cannot be loaded, a port in use).

``--detach`` starts it in its own session and returns once it answers (one line: node, address,
pid, token file; ``already running (pid N)`` when one runs); ``--stop`` stops that agent (its
identity verified first), ``--running`` says whether it runs (exit 3 when not). ``start``,
``stop`` and ``status`` run those on many nodes over the system's ``ssh`` (``tui.agent.ssh``).
``token SCOPE`` adds a token of that scope to the token file and prints it (docs/security.md).
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import socket
import sys
from collections.abc import Sequence
from pathlib import Path

from tui import paths
from tui.agent.detached import START_TIMEOUT_S, STOP_TIMEOUT_S, Launch, Outcome
from tui.cli_args import ArgumentParser, number
from tui.ops.windows import MEASURE_WINDOW_DEFAULT_S, MEASURE_WINDOW_RANGE_S
from tui.servers.tokens import AgentToken

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
    parser.add_argument(
        "--no-alerts",
        action="store_true",
        help="do not fire the alert rules ([alerts] of settings.toml; journal, webhook)",
    )
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
    detach = parser.add_argument_group(
        "one detached agent per node (its pid file in the state dir)"
    )
    mode = detach.add_mutually_exclusive_group()
    mode.add_argument(
        "--detach",
        action="store_true",
        help="start in its own session, return once it answers (or say it already runs)",
    )
    mode.add_argument("--stop", action="store_true", help="stop the detached agent (SIGTERM)")
    mode.add_argument(
        "--running", action="store_true", help="say whether the detached agent runs (exit 3 if not)"
    )
    detach.add_argument(
        "--start-timeout",
        type=number(float, 1, 600),
        default=START_TIMEOUT_S,
        metavar="S",
        help="--detach: seconds for the agent to answer (default 60)",
    )
    detach.add_argument(
        "--stop-timeout",
        type=number(float, 1, 300),
        default=STOP_TIMEOUT_S,
        metavar="S",
        help="--stop: seconds from SIGTERM to SIGKILL (default 15)",
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


def _tokens(token_file: Path, readonly: bool) -> tuple[AgentToken, ...]:
    """The agent's tokens (a first start makes the file: a read token for a read-only agent).

    Raises:
        AgentRefused: the file is unusable, or a read-only agent's file holds no read token.
    """
    from tui.servers.tokens import TokenError, load_or_create

    try:
        tokens = load_or_create(token_file, "read" if readonly else "admin")
    except TokenError as error:
        raise AgentRefused(str(error)) from None
    if readonly and not any(t.scope == "read" for t in tokens):
        raise AgentRefused(
            f"--readonly: {token_file} holds no read token (a bare token is an admin token); "
            f"add one with: gpufleet agent token read --token-file {token_file}"
        )
    return tokens


def _check_state(args: argparse.Namespace) -> None:
    """Read what the agent will read before it serves, through the checked path: a damaged
    fleet state or a status document that is a FIFO is one line and exit 2, never uvicorn's
    traceback from the app's start."""
    from tui.inputs import InputError, check_readable
    from tui.state.files import StateFileError
    from tui.state.fleet_state import read_fleet

    try:
        read_fleet()
    except StateFileError as error:
        raise AgentRefused(str(error)) from None
    if args.status is not None:
        try:
            check_readable(args.status, "a status document")
        except InputError as error:
            raise AgentRefused(f"--status={error}") from None


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from tui.agent.app import build_app
    from tui.agent.http_limits import IDLE_TIMEOUT_S, guarded_h11
    from tui.agent.policy import PolicyError, load_policy
    from tui.agent.server import Agent, AgentConfig
    from tui.fleet.monitor import FleetMonitor
    from tui.gpu.simulated import SimulatedSource
    from tui.gpu.source import open_gpu_source
    from tui.ops.demo import spec_for_profile
    from tui.ops.service import FleetOps, OpsOptions
    from tui.ops.windows import console_windows
    from tui.profiles import Profile
    from tui.servers.connections import ConnectionTable, raise_open_file_limit

    if (args.ssl_certfile is None) != (args.ssl_keyfile is None):
        raise AgentRefused("--ssl-certfile and --ssl-keyfile go together")
    for option, path in (
        ("--ssl-certfile", args.ssl_certfile),
        ("--ssl-keyfile", args.ssl_keyfile),
    ):
        if path is not None and not path.is_file():
            raise AgentRefused(f"{option}={path}: not a file")
    _check_state(args)
    token_file = args.token_file or default_token_file()
    tokens = _tokens(token_file, args.readonly)
    profile = _load_profile(args.profile)
    assert isinstance(profile, Profile)
    try:
        policy = load_policy([profile])
    except PolicyError as error:
        raise AgentRefused(str(error)) from None
    _check_bind(args.host, args.port)
    node = args.node or socket.gethostname()
    alerts = None
    if not args.no_alerts:
        from tui.ops.alerts.rules import AlertConfigError, load_alert_config

        try:
            alerts = load_alert_config()
        except AlertConfigError as error:
            raise AgentRefused(str(error)) from None
    gpus = SimulatedSource() if profile.engine.kind == "sim" else open_gpu_source()
    monitor = FleetMonitor(spec_for_profile(profile), gpus)
    windows = console_windows(args.measure_window)
    ops = FleetOps(
        profile,
        options=OpsOptions(apply=windows.apply, canary=windows.canary, rollout=windows.rollout),
        by=f"agent:{node}",
    )
    config = AgentConfig(
        node=node,
        tokens=tokens,
        readonly=args.readonly,
        open_metrics=args.open_metrics,
        status_path=args.status or paths.pipeline_status_file(),
        poll_interval_s=args.poll_interval,
        alerts=alerts,
    )
    agent = Agent(config, monitor, ops, policy)
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
    raise_open_file_limit()
    server = uvicorn.Server(
        uvicorn.Config(
            build_app(agent),
            host=args.host,
            port=args.port,
            log_level="warning",
            access_log=False,
            ssl_certfile=str(args.ssl_certfile) if tls else None,
            ssl_keyfile=str(args.ssl_keyfile) if tls else None,
            # No token is needed to hold a connection: its headers have a deadline and each
            # client address a number of connections (tui.agent.http_limits).
            http=guarded_h11(ConnectionTable()),
            timeout_keep_alive=IDLE_TIMEOUT_S,
        )
    )
    server.run()
    return 0


def serve_options(args: argparse.Namespace, node: str, token_file: Path) -> list[str]:
    """The options that serve the agent as ``args`` asks, in the foreground (for ``--detach``).

    The node and the token file are given explicitly, so the agent and its pid file agree.
    """
    options = ["--host", args.host, "--port", str(args.port), "--node", node]
    options += ["--token-file", str(token_file)]
    options += ["--measure-window", repr(args.measure_window)]
    options += ["--poll-interval", repr(args.poll_interval)]
    for flag, value in (
        ("--profile", args.profile),
        ("--status", args.status),
        ("--ssl-certfile", args.ssl_certfile),
        ("--ssl-keyfile", args.ssl_keyfile),
    ):
        if value is not None:
            options += [flag, str(value)]
    options += [
        flag
        for flag, on in (
            ("--readonly", args.readonly),
            ("--open-metrics", args.open_metrics),
            ("--no-alerts", args.no_alerts),
        )
        if on
    ]
    return options


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _launch(args: argparse.Namespace) -> Launch:
    """What ``--detach`` starts; the token file is made here, so the probe can present it."""
    from tui.agent.detached import served_argv

    _check_state(args)
    token_file = Path(os.path.abspath(args.token_file or default_token_file()))
    tokens = _tokens(token_file, args.readonly)
    # The probe presents a token this agent accepts: a read token does for GET /api/v1/agent.
    token = next((t.value for t in tokens if t.scope == "read"), tokens[0].value)
    node = args.node or socket.gethostname()
    scheme = "https" if args.ssl_certfile is not None else "http"
    # An agent bound to every address answers on loopback too; the probe stays on the node.
    probe = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(args.host, args.host)
    return Launch(
        argv=served_argv(sys.executable, serve_options(args, node, token_file)),
        node=node,
        url=f"{scheme}://{_url_host(args.host)}:{args.port}",
        probe_url=f"{scheme}://{_url_host(probe)}:{args.port}",
        token=token,
        token_file=token_file,
        timeout_s=args.start_timeout,
    )


def _report(outcome: Outcome) -> int:
    print(outcome.line, file=sys.stdout if outcome.status == 0 else sys.stderr, flush=True)
    return outcome.status


def _token_main(argv: list[str]) -> int:
    """``gpufleet agent token SCOPE [--token-file F]``: a new token of SCOPE added to the agent's
    token file, printed on stdout (the agent reads its file at start: restart it)."""
    from tui.servers.tokens import SCOPES, TokenError, add_token

    parser = ArgumentParser(
        prog="gpufleet agent token",
        description="Add a token of SCOPE to the agent's token file and print it.",
    )
    parser.add_argument("scope", choices=SCOPES, help="read, operate or admin")
    parser.add_argument("--token-file", type=Path, default=None, help="the agent's token file")
    args = parser.parse_args(argv)
    token_file = args.token_file or default_token_file()
    try:
        token = add_token(token_file, args.scope)
    except TokenError as error:
        print(f"gpufleet agent token: {error}", file=sys.stderr)
        return 2
    print(token)
    print(
        f"gpufleet agent token: a {args.scope} token added to {token_file} (restart the agent "
        "to accept it)",
        file=sys.stderr,
    )
    return 0


def main(argv: Sequence[str]) -> int:
    """Run the agent until SIGTERM/SIGINT (or start, stop, look at a detached one, here or over
    ssh; or add a token); returns the exit status."""
    argv = list(argv)
    if argv and argv[0] in ("start", "stop", "status"):
        from tui.agent.ssh_cli import main as over_ssh

        return over_ssh(argv[0], argv[1:])
    if argv and argv[0] == "token":
        return _token_main(argv[1:])
    args = build_parser().parse_args(argv)
    from tui.agent import detached

    try:
        if args.stop:
            return _report(detached.stop(args.stop_timeout))
        if args.running:
            return _report(detached.running())
        if args.detach:
            return _report(detached.start(_launch(args)))
        return _serve(args)
    except AgentRefused as error:
        print(f"gpufleet agent: {error}", file=sys.stderr)
        return 2

"""``gpufleet agent start|stop|status HOST...``: the agents of many nodes, over ssh.

    gpufleet agent start HOST [HOST...] [--ssh-option OPT ...] [--remote-command gpufleet]
                         [--parallel 16] [--timeout 120] [-- agent options]
    gpufleet agent stop HOST [HOST...] [...]
    gpufleet agent status HOST [HOST...] [...]

Each host runs ``gpufleet agent --detach`` (start), ``--stop`` or ``--running`` (status) through
the system's ``ssh`` with BatchMode; the options after ``--`` go to the node's ``gpufleet agent``
(``--port``, ``--profile``, ``--token-file``, ...). One line per host as it finishes. Exit status:
0 every host did it; when every failed host agrees, its status (2 a refused option or a port in
use, 3 not running, 255 unreachable, 124 no answer in time); 1 otherwise.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Callable, Sequence

from tui.agent.ssh import HostOutcome, overall_status, remote_argv, run_hosts, ssh_argv
from tui.cli_args import ArgumentParser, number, plain_text

ACTIONS = ("start", "stop", "status")
"""The actions, as ``gpufleet agent ACTION``."""


def _words(option: str) -> Callable[[str], list[str]]:
    def parse(text: str) -> list[str]:
        try:
            words = shlex.split(text)
        except ValueError as error:
            raise argparse.ArgumentTypeError(f"{text!r}: {error}") from None
        if not words:
            raise argparse.ArgumentTypeError(f"{text!r}: empty")
        return words

    parse.__name__ = option
    return parse


def build_parser(action: str) -> argparse.ArgumentParser:
    """The options of ``gpufleet agent ACTION`` (those before ``--``)."""
    paragraphs = __doc__.split("\n\n")
    parser = ArgumentParser(
        prog=f"gpufleet agent {action}",
        usage=f"gpufleet agent {action} HOST [HOST...] [options] [-- agent options]",
        description=paragraphs[0],
        epilog=plain_text(" ".join(paragraphs[2:])),
    )
    parser.add_argument("hosts", nargs="+", metavar="HOST", help="hosts as ssh knows them")
    parser.add_argument(
        "--ssh-option",
        type=_words("--ssh-option"),
        action="append",
        default=[],
        metavar="OPT",
        help="options for ssh, split like a shell would ('-p 2222', '-i KEY', "
        "'-o ProxyJump=bastion'); write --ssh-option=-v for one that starts with a dash",
    )
    parser.add_argument(
        "--remote-command",
        type=_words("--remote-command"),
        default=["gpufleet"],
        metavar="CMD",
        help="how gpufleet runs on the nodes (default gpufleet; or a venv's, an absolute path)",
    )
    parser.add_argument(
        "--parallel",
        type=number(int, 1, 256),
        default=16,
        metavar="N",
        help="hosts at once (default 16)",
    )
    parser.add_argument(
        "--timeout",
        type=number(float, 1, 3600),
        default=120.0,
        metavar="S",
        help="seconds for each host, connection included (default 120)",
    )
    return parser


def main(action: str, argv: Sequence[str]) -> int:
    """Run ``action`` on every host; returns the exit status (see the module)."""
    argv = list(argv)
    ours, remote_options = argv, []
    if "--" in argv:
        cut = argv.index("--")
        ours, remote_options = argv[:cut], argv[cut + 1 :]
    parser = build_parser(action)
    args = parser.parse_args(ours)
    for host in args.hosts:
        if not host or host.startswith("-"):
            # ssh would read it as one of its own options (-oProxyCommand=...), not a host.
            parser.error(f"HOST: {host!r} is not a host name (it may not start with '-')")
    ssh_options = [word for words in args.ssh_option for word in words]
    remote = remote_argv(args.remote_command, action, remote_options)

    def report(outcome: HostOutcome) -> None:
        out = sys.stdout if outcome.ok else sys.stderr
        print(f"{outcome.host}: {outcome.line}", file=out, flush=True)

    outcomes = run_hosts(
        args.hosts,
        lambda host: ssh_argv(host, ssh_options, remote),
        parallel=args.parallel,
        timeout_s=args.timeout,
        report=report,
    )
    return overall_status(outcomes)

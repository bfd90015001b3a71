"""Run ``gpufleet agent --detach|--stop|--running`` on many nodes through the system's ``ssh``.

The system's own client, as ansible and pssh use it: the operator's ``~/.ssh/config``, keys,
agent, jump hosts and known_hosts all apply, and nothing here holds a secret. Each host runs
``ssh -o BatchMode=yes [OPTIONS] HOST -- 'REMOTE COMMAND'`` (BatchMode: a host that would ask for
a password or a host key confirmation fails at once instead of waiting on a prompt nobody sees),
a bounded number at a time, each bounded in time; each host's outcome is one line.
"""

from __future__ import annotations

import shlex
import subprocess
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

REMOTE_FLAGS = {"start": "--detach", "stop": "--stop", "status": "--running"}
"""The node-side option each action runs."""
SSH_FAILED = 255
"""ssh's own exit status when it could not connect or authenticate (the remote's is passed on)."""
TIMED_OUT = 124
"""A host's status when ssh did not finish within the deadline (as timeout(1))."""
NO_SSH = 127
"""A host's status when there is no ``ssh`` to run."""
_SSH_NOISE = ("Warning: Permanently added",)
"""ssh's notes on stderr that are not a host's outcome (a first connection's known_hosts)."""


def remote_argv(command: Sequence[str], action: str, options: Sequence[str]) -> list[str]:
    """The gpufleet argv run on the node.

    Args:
        command: How gpufleet is run there (``["gpufleet"]``, or a venv's absolute path).
        action: ``start``, ``stop`` or ``status``.
        options: More options for the node's ``gpufleet agent`` (the agent's, for a start).

    Returns:
        ``[*command, "agent", FLAG, *options]``.
    """
    return [*command, "agent", REMOTE_FLAGS[action], *options]


def ssh_argv(host: str, ssh_options: Sequence[str], remote: Sequence[str]) -> list[str]:
    """The ssh argv that runs ``remote`` on ``host``.

    ssh sends the remote command to the node as one string, which the node's login shell parses
    again. ``shlex.join`` quotes each word for a POSIX shell, so every word (a node name with a
    space or a quote, a path) arrives there as the one argument it is here: the one correct
    quoting for that shell, and no shell string is ever built from pieces on this side.

    Args:
        host: The host as ssh knows it (an alias of ``~/.ssh/config``, ``user@name``).
        ssh_options: Options for ssh itself, before the host (``-p 2222``, ``-i KEY``).
        remote: The node's argv.

    Returns:
        ``["ssh", "-o", "BatchMode=yes", *ssh_options, host, "--", shlex.join(remote)]``.
    """
    return ["ssh", "-o", "BatchMode=yes", *ssh_options, host, "--", shlex.join(remote)]


@dataclass(frozen=True, slots=True)
class HostOutcome:
    """What one host answered."""

    host: str
    """The host as given."""
    status: int
    """The node's exit status; ``SSH_FAILED`` when ssh could not reach it, ``TIMED_OUT``."""
    line: str
    """One line: the node's own, or ssh's message."""

    @property
    def ok(self) -> bool:
        """Whether the host did what was asked."""
        return self.status == 0


def outcome_line(status: int, stdout: str, stderr: str) -> str:
    """The one line that says a host's outcome.

    A success is the node's last line on stdout; a failure its (or ssh's) last line on stderr,
    ssh's own notes (a host key added to known_hosts) left out.
    """
    out = [line.strip() for line in stdout.splitlines() if line.strip()]
    err = [
        line.strip()
        for line in stderr.splitlines()
        if line.strip() and not line.strip().startswith(_SSH_NOISE)
    ]
    first, second = (out, err) if status == 0 else (err, out)
    if first:
        return first[-1]
    if second:
        return second[-1]
    return "ssh failed, saying nothing" if status == SSH_FAILED else f"exit status {status}"


def run_host(host: str, argv: Sequence[str], timeout_s: float) -> HostOutcome:
    """Run one host's ssh argv to its end or its deadline.

    Args:
        host: The host (for the outcome).
        argv: Its ssh argv.
        timeout_s: Deadline; past it ssh (our own child) is killed.

    Returns:
        The host's outcome.
    """
    try:
        done = subprocess.run(
            list(argv),
            stdin=subprocess.DEVNULL,  # many at once: none may read the operator's terminal
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout_s,
        )
    except FileNotFoundError:
        return HostOutcome(host, NO_SSH, f"no {argv[0]!r} to run (install openssh-client)")
    except subprocess.TimeoutExpired:
        return HostOutcome(host, TIMED_OUT, f"no answer within {timeout_s:g} s (ssh stopped)")
    return HostOutcome(
        host, done.returncode, outcome_line(done.returncode, done.stdout, done.stderr)
    )


def run_hosts(
    hosts: Sequence[str],
    argv_for: Callable[[str], list[str]],
    *,
    parallel: int,
    timeout_s: float,
    report: Callable[[HostOutcome], None],
) -> list[HostOutcome]:
    """Run every host's ssh, ``parallel`` at a time; report each outcome as it comes.

    Args:
        hosts: The hosts.
        argv_for: A host's ssh argv.
        parallel: Most ssh processes at once.
        timeout_s: Each host's deadline.
        report: Called once per host with its outcome (one at a time).

    Returns:
        The outcomes in the order of ``hosts``.
    """
    said = threading.Lock()

    def one(host: str) -> HostOutcome:
        outcome = run_host(host, argv_for(host), timeout_s)
        with said:
            report(outcome)
        return outcome

    with ThreadPoolExecutor(max_workers=max(1, min(parallel, len(hosts)))) as pool:
        return list(pool.map(one, hosts))


def overall_status(outcomes: Sequence[HostOutcome]) -> int:
    """The command's exit status: 0 when every host did it, the failed hosts' status when they
    agree (2 every failure a refused option, 255 every one unreachable, 3 none running), else 1."""
    failed = {o.status for o in outcomes if not o.ok}
    if not failed:
        return 0
    return failed.pop() if len(failed) == 1 else 1

"""What ``gpufleet agent start|stop|status`` runs: the ssh argv, the node's argv, exit statuses."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

from repo_paths import ROOT

from tui.agent.cli import build_parser, serve_options
from tui.agent.ssh import HostOutcome, outcome_line, overall_status, remote_argv, ssh_argv


def test_ssh_argv_is_the_system_client_with_one_quoted_remote_command() -> None:
    remote = remote_argv(
        ["/opt/g fleet/bin/gpufleet"], "start", ["--node", "rack 1's node", "--profile", "$(id)"]
    )
    argv = ssh_argv("node1", ["-p", "2222", "-i", "/k"], remote)
    assert argv[:-1] == ["ssh", "-o", "BatchMode=yes", "-p", "2222", "-i", "/k", "node1", "--"]
    # The node's shell splits the one string back into exactly these words, nothing expanded.
    assert shlex.split(argv[-1]) == [
        "/opt/g fleet/bin/gpufleet", "agent", "--detach",
        "--node", "rack 1's node", "--profile", "$(id)",
    ]  # fmt: skip
    assert remote_argv(["gpufleet"], "stop", []) == ["gpufleet", "agent", "--stop"]
    assert remote_argv(["gpufleet"], "status", []) == ["gpufleet", "agent", "--running"]


def test_outcome_line_and_overall_status() -> None:
    noted = "Warning: Permanently added '[127.0.0.1]:2222' (ED25519) to the list of known hosts.\n"
    assert outcome_line(0, "started: node n1\n", noted) == "started: node n1"
    assert outcome_line(255, "", noted + "ssh: connect to host x port 22: No route\n") == (
        "ssh: connect to host x port 22: No route"
    )
    assert outcome_line(2, "", "gpufleet agent: --port=1: cannot bind\n") == (
        "gpufleet agent: --port=1: cannot bind"
    )
    assert outcome_line(1, "", "") == "exit status 1"

    def outcomes(*codes: int) -> list[HostOutcome]:
        return [HostOutcome(f"h{i}", code, "x") for i, code in enumerate(codes)]

    assert overall_status(outcomes(0, 0)) == 0
    assert overall_status(outcomes(0, 255, 255)) == 255
    assert overall_status(outcomes(2, 0)) == 2
    assert overall_status(outcomes(3, 255)) == 1


def test_detach_serves_with_every_option_it_was_given() -> None:
    parser = build_parser()
    given = parser.parse_args(
        [
            "--host", "0.0.0.0", "--port", "9500", "--profile", "p", "--token-file", "/t",
            "--readonly", "--node", "n 1", "--open-metrics", "--status", "/s.json",
            "--ssl-certfile", "/c", "--ssl-keyfile", "/k", "--measure-window", "33.5",
            "--poll-interval", "0.25", "--no-alerts", "--detach",
        ]
    )  # fmt: skip
    served = parser.parse_args(serve_options(given, "n 1", Path("/t")))
    modes = {"detach", "stop", "running", "start_timeout", "stop_timeout"}
    for name, value in vars(given).items():
        if name not in modes:
            assert getattr(served, name) == value, name
    assert not served.detach
    # a new option of the agent must be passed on by serve_options (and listed here)
    assert set(vars(given)) - modes == {
        "host", "port", "profile", "token_file", "readonly", "node", "open_metrics", "status",
        "ssl_certfile", "ssl_keyfile", "measure_window", "poll_interval", "no_alerts",
    }  # fmt: skip


def _agent(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tui", "agent", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_host_that_ssh_would_read_as_an_option_is_refused() -> None:
    for hosts, says in (
        (["node1", "-oProxyCommand=x"], "unrecognized arguments: -oProxyCommand=x"),
        (["node1", "-1"], "HOST: '-1' is not a host name (it may not start with '-')"),
        (["node1", ""], "HOST: '' is not a host name"),
    ):
        done = _agent("status", *hosts, "--", "--stop-timeout", "5")
        assert done.returncode == 2, done
        assert done.stdout == ""
        line = done.stderr.strip()
        assert line.startswith("gpufleet agent status: ") and says in line, line
        assert line.endswith("(see gpufleet agent status --help)") and "\n" not in line

"""``gpufleet agent start|stop|status HOST`` through the system's ssh against a real sshd.

The node is this machine, reached through a test sshd on a loopback port (``ssh_helpers``); the
node's gpufleet is this venv's (``--remote-command``) and its state directory the test's
(``SetEnv`` on the client, ``AcceptEnv`` on the server). Every agent started is stopped at the
end, found by its pid file and, failing that, by the test's state directory in its environment.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import httpx
import psutil
import pytest
from repo_paths import ROOT
from ssh_helpers import Sshd, SshdUnavailable, sshd

from bench.simfleet import BASELINE, free_ports, sim_profile_text
from tui import paths
from tui.agent import detached, pidfile

GPUFLEET = Path(sys.executable).parent / "gpufleet"
NODE = "rack 1's node"
"""A node name with a space and a quote: it reaches the node intact only if quoted right."""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    """One sshd for the module's tests."""
    try:
        with sshd(tmp_path_factory.mktemp("sshd")) as running:
            yield running
    except SshdUnavailable as why:
        pytest.skip(str(why))


@dataclass
class Node:
    """This machine as a node: its state directory and how to reach it over ssh."""

    state: Path
    """The node's GPUFLEET_STATE_DIR (the test's own)."""
    env: dict[str, str]
    """What the client's SetEnv sets on the node."""
    sshd: Sshd
    """The server."""

    def agent(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """``gpufleet agent ARGS`` run here (the operator's side)."""
        return subprocess.run(
            [sys.executable, "-m", "tui", "agent", *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def over_ssh(
        self,
        action: str,
        *agent_options: str,
        ssh: list[str] | None = None,
        hosts: tuple[str, ...] = ("127.0.0.1",),
    ) -> subprocess.CompletedProcess[str]:
        """``gpufleet agent ACTION HOSTS --ssh-option ... -- AGENT_OPTIONS``."""
        options = ssh if ssh is not None else self.sshd.client_options(self.env)
        argv = [action, *hosts, "--timeout", "100"]
        for option in options:
            argv.append(f"--ssh-option={option}")
        argv += ["--remote-command", str(GPUFLEET), "--", *agent_options]
        return self.agent(*argv)


def _agents_of(state: Path) -> list[psutil.Process]:
    """Running ``tui agent`` processes whose environment names ``state`` (started for the test)."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        with contextlib.suppress(psutil.Error):
            argv = proc.info["cmdline"] or []
            if (
                "agent" in argv
                and "tui" in argv
                and proc.status() != psutil.STATUS_ZOMBIE
                and proc.environ().get(paths.STATE_ENV) == str(state)
            ):
                found.append(proc)
    return found


@pytest.fixture
def node(server: Sshd, isolated_state: Path, tmp_path: Path) -> Iterator[Node]:
    """This machine as a node, with a simulated profile whose ports nobody serves."""
    if not GPUFLEET.is_file():
        pytest.skip(f"{GPUFLEET} missing: run the tests with the venv's python")
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    text = sim_profile_text("ssh-base", [0, 1], free_ports(2), str(tmp_path / "logs"), BASELINE, 50)
    (profiles / "ssh-base.toml").write_text(text)
    env = {
        paths.STATE_ENV: str(isolated_state),
        paths.CONFIG_ENV: str(isolated_state / "config"),
        paths.PROFILES_ENV: str(profiles),
    }
    try:
        yield Node(isolated_state, env, server)
    finally:
        detached.stop(timeout_s=10)  # the pid file's agent, verified
        for proc in _agents_of(isolated_state):  # anything else this test's node started
            with contextlib.suppress(psutil.Error):
                proc.send_signal(signal.SIGKILL)
                proc.wait(timeout=10)


def _port_free(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    return lines[0]


def test_start_status_stop_over_ssh(node: Node) -> None:
    port = free_ports(1)[0]
    options = [
        "--port",
        str(port),
        "--profile",
        "ssh-base",
        "--node",
        NODE,
        "--poll-interval",
        "0.5",
    ]
    started = node.over_ssh("start", *options)
    assert started.returncode == 0, started.stderr
    line = _one_line(started.stdout)
    token_file = node.state / "agent.token"
    assert line.startswith(f"127.0.0.1: started: node {NODE}, http://127.0.0.1:{port}, pid "), line
    assert f"token {token_file} " in line

    record = pidfile.read_record()
    assert record is not None and f"pid {record.pid}," in line and record.node == NODE
    agent = psutil.Process(record.pid)
    assert abs(agent.create_time() - record.create_time) < 0.05
    assert tuple(agent.cmdline()) == record.cmdline and "--detach" not in record.cmdline
    assert os.getsid(record.pid) == record.pid  # its own session: the ssh session's end misses it
    assert (
        f"gpufleet agent: node {NODE} on http://127.0.0.1:{port}"
        in (node.state / "agent.log").read_text()
    )

    token = token_file.read_text().strip()
    metrics = httpx.get(
        f"http://127.0.0.1:{port}/metrics", headers={"Authorization": f"Bearer {token}"}, timeout=5
    )
    assert metrics.status_code == 200
    assert f'gpufleet_agent_polls_total{{node="{NODE}"}}' in metrics.text  # its --node, intact
    assert httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).status_code == 401

    again = node.over_ssh("start", *options)
    assert again.returncode == 0, again.stderr
    assert _one_line(again.stdout).startswith(f"127.0.0.1: already running (pid {record.pid}):")
    assert pidfile.read_record() == record
    assert [p.pid for p in _agents_of(node.state)] == [record.pid]

    status = node.over_ssh("status")
    assert status.returncode == 0, status.stderr
    assert _one_line(status.stdout).startswith(
        f"127.0.0.1: running: node {NODE}, http://127.0.0.1:{port}, pid {record.pid}, up "
    )

    stopped = node.over_ssh("stop")
    assert stopped.returncode == 0, stopped.stderr
    assert _one_line(stopped.stdout).startswith(
        f"127.0.0.1: stopped: node {NODE}, pid {record.pid} (SIGTERM, "
    )
    assert pidfile.exited(agent)
    assert _port_free(port)
    assert not pidfile.pid_file().exists()

    after = node.over_ssh("status")
    assert after.returncode == detached.NOT_RUNNING
    assert _one_line(after.stderr) == f"127.0.0.1: not running (no {pidfile.pid_file()})"


def test_unreachable_host_is_one_line_from_ssh(node: Node, tmp_path: Path) -> None:
    dead = free_ports(1)[0]
    ssh = [o for o in node.sshd.client_options(node.env) if not o.startswith("-p ")]
    refused = node.over_ssh("start", "--port", "1", ssh=[*ssh, f"-p {dead}"])
    assert refused.returncode == 255, refused
    assert refused.stdout == ""
    assert _one_line(refused.stderr) == (
        f"127.0.0.1: ssh: connect to host 127.0.0.1 port {dead}: Connection refused"
    )

    # The operator's ssh config names the hosts; two at once, one line each, in any order.
    config = node.sshd.config_file(
        tmp_path / "ssh_config", {"good": node.sshd.port, "dead": dead}, node.env
    )
    both = node.over_ssh("status", ssh=[f"-F {config}"], hosts=("good", "dead"))
    assert both.returncode == 1, both  # one not running (3), one unreachable (255)
    assert both.stdout == ""
    assert sorted(both.stderr.strip().splitlines()) == [
        f"dead: ssh: connect to host 127.0.0.1 port {dead}: Connection refused",
        f"good: not running (no {pidfile.pid_file()})",
    ]


def test_refused_start_is_one_line_and_leaves_nothing(node: Node) -> None:
    bad = node.over_ssh("start", "--port", "0", "--profile", "ssh-base")
    assert bad.returncode == 2, bad
    assert _one_line(bad.stderr) == (
        "127.0.0.1: gpufleet agent: argument --port: 0: allowed range 1..65535 "
        "(see gpufleet agent --help)"
    )

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        busy = node.over_ssh("start", "--port", str(port), "--profile", "ssh-base")
    assert busy.returncode == 2, busy
    line = _one_line(busy.stderr)
    assert line.startswith(
        f"127.0.0.1: gpufleet agent: --port={port}: cannot bind 127.0.0.1:{port}"
    )

    unknown = node.over_ssh("start", "--port", str(port), "--profile", "no-such-profile")
    assert unknown.returncode == 2, unknown
    assert _one_line(unknown.stderr).startswith("127.0.0.1: gpufleet agent: --profile: ")

    assert not pidfile.pid_file().exists()
    assert _agents_of(node.state) == []


def test_stop_never_signals_an_unverified_pid(isolated_state: Path) -> None:
    stranger = subprocess.Popen(["sleep", "60"])
    try:
        born = psutil.Process(stranger.pid).create_time()
        mine = psutil.Process(os.getpid())
        cases = [
            # the pid now runs another process (another start time)
            (os.getpid(), mine.create_time() - 100, tuple(mine.cmdline()), "now runs another"),
            # same pid and start time, another command line
            (stranger.pid, born, (sys.executable, "-m", "tui", "agent"), "not the recorded agent"),
        ]
        for pid, create_time, cmdline, why in cases:
            record = pidfile.AgentRecord(
                pid, create_time, cmdline, "n1", "http://127.0.0.1:1", "t", "l", time.time()
            )
            pidfile.write_record(record)
            outcome = detached.stop(timeout_s=1)
            assert outcome.status == 0 and why in outcome.line, outcome
            assert "nothing signalled" in outcome.line
            assert not pidfile.pid_file().exists()
        assert stranger.poll() is None  # still running: it was never signalled
    finally:
        stranger.kill()
        stranger.wait(timeout=10)


def _sleeper() -> subprocess.Popen[bytes]:
    """``sleep 60`` in its own session, returned once it runs ``sleep`` (read right after the
    fork, its command line is still the test's Python: seen under load, the record then named a
    command line the process no longer had)."""
    child = subprocess.Popen(["sleep", "60"], start_new_session=True)
    deadline = time.monotonic() + 10
    while psutil.Process(child.pid).cmdline() != ["sleep", "60"]:
        assert time.monotonic() < deadline, "sleep never ran"
        time.sleep(0.01)
    return child


def test_a_clock_step_in_the_pid_file_leaves_the_agent_running_and_stoppable(
    isolated_state: Path,
) -> None:
    """The pid file's wall-clock start moved 24 s (a step of the host's clock): the agent is
    still the agent (its start ticks and boot are), so --running says it runs and --stop stops
    it. It used to say "not running" (exit 3) and remove the pid file while the agent served."""
    from tui.servers.procinfo import boot_id, start_ticks

    agent = _sleeper()
    try:
        proc = psutil.Process(agent.pid)
        record = pidfile.AgentRecord(
            agent.pid,
            proc.create_time() + 24,
            tuple(proc.cmdline()),
            "n1",
            "http://127.0.0.1:1",
            "t",
            "l",
            time.time(),
            start_ticks=start_ticks(agent.pid) or 0,
            boot_id=boot_id(),
        )
        pidfile.write_record(record)
        assert pidfile.read_record() == record
        running = detached.running()
        assert running.status == 0 and f"pid {agent.pid}" in running.line, running
        stopped = detached.stop(timeout_s=5)
        assert stopped.status == 0 and stopped.line.startswith("stopped: node n1"), stopped
        assert agent.wait(timeout=10) == -signal.SIGTERM
        assert not pidfile.pid_file().exists()
        # Other start ticks at the pid: another process, never signalled.
        other = _sleeper()
        try:
            ticks = start_ticks(other.pid) or 0
            stranger = psutil.Process(other.pid)
            pidfile.write_record(
                replace(
                    record,
                    pid=other.pid,
                    create_time=stranger.create_time(),
                    cmdline=tuple(stranger.cmdline()),
                    start_ticks=ticks - 1,
                )
            )
            refused = detached.stop(timeout_s=1)
            assert "now runs another process" in refused.line, refused
            assert "nothing signalled" in refused.line
            assert other.poll() is None
        finally:
            other.kill()
            other.wait(timeout=10)
    finally:
        if agent.poll() is None:
            agent.kill()
        agent.wait(timeout=10)


def test_two_starts_at_once_start_one_agent(node: Node) -> None:
    port = free_ports(1)[0]
    both = node.over_ssh(
        "start", "--port", str(port), "--profile", "ssh-base", hosts=("127.0.0.1", "localhost")
    )
    assert both.returncode == 0, both.stderr
    lines = sorted(both.stdout.strip().splitlines(), key=lambda line: "already" in line)
    record = pidfile.read_record()
    assert record is not None and len(lines) == 2, both.stdout
    assert f"started: node {record.node}, http://127.0.0.1:{port}, pid {record.pid}," in lines[0]
    assert f"already running (pid {record.pid}):" in lines[1]
    assert [p.pid for p in _agents_of(node.state)] == [record.pid]

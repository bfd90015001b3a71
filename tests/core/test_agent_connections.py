"""No token is needed to open a connection, so none may take the agent offline (issue 36): 1,100
connections that never finish their headers, past the agent's open-file limit of 1,024, made
every real request time out for as long as they were held. A real agent on loopback, real
sockets: its open-file limit pinned at 1,024 (soft and hard, as systemd's default), the stalled
connections held by this test; the real requests are answered, the agent holds a bounded number
of connections, and a stalled one is closed by the agent itself."""

from __future__ import annotations

import contextlib
import os
import resource
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest
from repo_paths import ROOT

from bench.ports import free_port
from tui import paths
from tui.servers.connections import HEADER_TIMEOUT_S, PER_ADDRESS, ConnectionTable

pytestmark = [pytest.mark.timeout(180)]

TOKEN = "connections-token-0123456789abcdef"
STALLED = 1100
PARTIAL = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n"
"""A request whose headers never end (no blank line)."""


def _pinned_files() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))


@contextlib.contextmanager
def agent(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """An agent of the shipped simulated profile (no servers run: it serves its views)."""
    port = free_port()
    token = tmp_path / "agent.token"
    token.write_text(TOKEN + "\n")
    token.chmod(0o600)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUFLEET_")}
    env[paths.STATE_ENV] = str(tmp_path / "state")
    env[paths.CONFIG_ENV] = str(tmp_path / "config")
    env[paths.SIM_GPU_ENV] = str(tmp_path / "simgpu")
    env[paths.PROFILES_ENV] = str(ROOT / "profiles")
    argv = [sys.executable, "-m", "tui", "agent", "--profile", "sim-baseline"]
    argv += ["--port", str(port), "--token-file", str(token)]
    log = (tmp_path / "agent.log").open("wb")
    proc = subprocess.Popen(
        argv, env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, preexec_fn=_pinned_files
    )
    try:
        deadline = time.monotonic() + 60
        while not _answers(port, 2):
            assert proc.poll() is None, (tmp_path / "agent.log").read_text()
            assert time.monotonic() < deadline, "the agent did not answer within 60 s"
            time.sleep(0.1)
        yield proc, port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        log.close()


def _answers(port: int, timeout: float) -> bool:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with contextlib.suppress(httpx.HTTPError):
        url = f"http://127.0.0.1:{port}/metrics"
        return httpx.get(url, headers=headers, timeout=timeout).status_code == 200
    return False


def _held_by(pid: int, port: int) -> int:
    """Connections the agent holds on its port."""
    return sum(
        1
        for c in psutil.Process(pid).net_connections("tcp")
        if c.laddr and c.laddr.port == port and c.status == psutil.CONN_ESTABLISHED
    )


@contextlib.contextmanager
def stalled(port: int, count: int) -> Iterator[list[socket.socket]]:
    """``count`` connections, each with a request whose headers never end."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if min(hard, 8192) < count + 200:
        pytest.skip(f"the open-file limit ({hard}) is below {count + 200}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 8192), hard))
    held: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.create_connection(("127.0.0.1", port), timeout=10)
            with contextlib.suppress(OSError):  # the agent may have closed it already
                sock.sendall(PARTIAL)
            held.append(sock)
        yield held
    finally:
        for sock in held:
            sock.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_connections_that_never_finish_their_headers_take_nothing_offline(
    tmp_path: Path,
) -> None:
    with agent(tmp_path) as (proc, port), stalled(port, STALLED):
        # Every real request is answered while the stalled ones are held (they used to time
        # out, each of them, for the 36-45 s the connections were held).
        for _ in range(5):
            assert _answers(port, 15)
        deadline = time.monotonic() + 30
        while _held_by(proc.pid, port) > PER_ADDRESS + 8:
            assert time.monotonic() < deadline, _held_by(proc.pid, port)
            time.sleep(0.2)
        assert proc.poll() is None


def test_a_connection_whose_headers_do_not_come_is_closed_by_the_agent(tmp_path: Path) -> None:
    with agent(tmp_path) as (_, port):
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        with sock:
            sock.sendall(PARTIAL)
            sock.settimeout(HEADER_TIMEOUT_S + 30)
            assert sock.recv(1024) == b""  # closed by the agent, no answer
        # An idle connection after an answer is closed as well (uvicorn's keep-alive timeout).
        with socket.create_connection(("127.0.0.1", port), timeout=10) as again:
            again.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            again.settimeout(HEADER_TIMEOUT_S + 30)
            answer = b""
            while chunk := again.recv(65536):
                answer += chunk
            assert answer.startswith(b"HTTP/1.1 401 ")


class _Conn:
    def __init__(self, busy: bool = False) -> None:
        self.is_busy = busy
        self.dropped = False

    def busy(self) -> bool:
        return self.is_busy

    def drop(self) -> None:
        self.dropped = True


def test_past_the_limit_the_oldest_idle_connection_gives_way() -> None:
    table = ConnectionTable(per_address=3)
    first, second, third = _Conn(busy=True), _Conn(), _Conn()
    for conn in (first, second, third):
        assert table.admit("10.0.0.1", conn)
    newcomer = _Conn()
    assert table.admit("10.0.0.1", newcomer)  # the oldest idle one (second) made room
    assert second.dropped and not first.dropped and not third.dropped
    assert table.count("10.0.0.1") == 3 and table.admit("10.0.0.2", _Conn())
    for conn in (third, newcomer):
        conn.is_busy = True
    assert not table.admit("10.0.0.1", _Conn())  # every one busy: the new one is refused
    table.release("10.0.0.1", first)
    assert table.count("10.0.0.1") == 2 and table.dropped == 2

"""Issue 36's attacks on the agent and ``gpufleet serve`` (no token needed for a connection, a
read token for a huge preflight), on the agent's job and environment, its pid file and token
file, and a log line without bound. Part of ``bench.attacks`` (``--only network``); each
function takes a workspace (``Workspace(..., broken=NAME)`` in ``tests/core/test_bench_attack_rows``
shows the row fails on a build without the check) and returns table rows.

Everything is on loopback, every process started is stopped at the end (ours: started here),
and the stalled connections are this process's own sockets.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import psutil

from bench.attack_kit import ROOT, Row, Run, Workspace, alive, poll, started
from bench.ports import free_ports
from tui.servers.connections import HEADER_TIMEOUT_S

ADMIN = "network-admin-token-0123456789"
STALLED = 1100
"""Connections that never finish their headers (past systemd's open-file limit of 1,024)."""
PARTIAL = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n"
"""A request whose headers never end."""
LONG_LINE = 50_000_000
"""The log line of the issue: 50 MB."""


def _bearer() -> dict[str, str]:
    return {"authorization": f"Bearer {ADMIN}"}


def _answered(url: str, headers: dict[str, str], timeout: float = 15) -> bool:
    """A GET of ``url`` answered 200 within ``timeout``."""
    with contextlib.suppress(httpx.HTTPError):
        return httpx.get(url, headers=headers, timeout=timeout).status_code == 200
    return False


def _token_file(ws: Workspace, mode: int = 0o600) -> Path:
    path = ws.root / "agent.token"
    path.write_text(ADMIN + "\n")
    path.chmod(mode)
    return path


def _pinned_files() -> None:
    """The agent's open-file limit at systemd's default, soft and hard."""
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))


@contextlib.contextmanager
def _gpufleet(
    ws: Workspace, args: list[str], ready: Callable[[], bool], log_name: str
) -> Iterator[subprocess.Popen[bytes] | None]:
    """``gpufleet ARGS`` of the workspace, its open files pinned at 1,024, stopped at the end;
    None when ``ready()`` did not hold within 60 s."""
    argv = [sys.executable, "-m", "tui", *args]
    log = (ws.root / log_name).open("ab")
    with (
        log,
        started(
            argv,
            env=ws.env(),
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=_pinned_files,
        ) as proc,
    ):
        yield proc if poll(ready, 60, 0.25) else None


@contextlib.contextmanager
def _agent(ws: Workspace, *extra: str) -> Iterator[tuple[subprocess.Popen[bytes], str] | None]:
    """The workspace's agent (profile atk-base, the admin token); None when it never answered."""
    port = free_ports(1)[0]
    args = ["agent", "--profile", "atk-base", "--port", str(port)]
    args += ["--token-file", str(_token_file(ws)), "--node", "atk", *extra]
    base = f"http://127.0.0.1:{port}"

    def answers() -> bool:
        return _answered(f"{base}/metrics", _bearer(), 2)

    with _gpufleet(ws, args, answers, "agent.log") as agent:
        yield None if agent is None else (agent, base)


def _listens(port: int) -> bool:
    """Something accepts connections on ``port`` (loopback)."""
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 2):
        return True
    return False


def _raise_own_files(count: int) -> bool:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = count + 256
    if hard != resource.RLIM_INFINITY and hard < want:
        return False
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    return True


@contextlib.contextmanager
def _stalled(port: int, count: int) -> Iterator[int]:
    """``count`` connections to ``port``, each with headers that never end; yields how many
    were opened (the server may close some as they come: that is its defence)."""
    held: list[socket.socket] = []
    try:
        for _ in range(count):
            try:
                sock = socket.create_connection(("127.0.0.1", port), timeout=10)
            except OSError:
                continue
            with contextlib.suppress(OSError):
                sock.sendall(PARTIAL)
            held.append(sock)
        yield len(held)
    finally:
        for sock in held:
            sock.close()


def _closed_by_server(port: int, within: float) -> bool:
    """One stalled connection: closed by the server, without an answer, within ``within`` s."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(PARTIAL)
        sock.settimeout(within)
        try:
            return sock.recv(1024) == b""
        except TimeoutError:
            return False
        except OSError:
            return True  # reset by the server: closed as well


def _held_by(pid: int, port: int) -> int:
    return sum(
        1
        for c in psutil.Process(pid).net_connections("tcp")
        if c.laddr and c.laddr.port == port and c.status == psutil.CONN_ESTABLISHED
    )


def _stall_row(attack: str, port: int, pid: int, real: Callable[[], bool]) -> Row:
    """1,100 stalled connections while ``real()`` requests are made; then one stalled alone."""
    if not _raise_own_files(STALLED):
        return Row(attack, None, "-", False, note="this process may not open 1,100 sockets")
    start = time.monotonic()
    with _stalled(port, STALLED) as opened:
        answered = 0
        while answered < 5 and real():  # the first that is not answered ends the count
            answered += 1
        held = _held_by(pid, port)
    limited = answered == 5 and held <= 256 + 8
    # A build that already failed the limits is not waited on for the header timeout too
    # (20 s: the row fails either way, and a build without limits has no timeout either).
    closed = _closed_by_server(port, HEADER_TIMEOUT_S + 10) if limited else None
    ok = limited and closed is True
    run = Run([f"{STALLED} x {PARTIAL[:14]!r}..."], 0, "", "", time.monotonic() - start)
    said = f"real requests answered {answered}/5; connections held {held}"
    note = {
        True: "a stalled one closed by the server",
        False: "a stalled one NOT closed in 20 s",
        None: "the header timeout not tried (the limits failed)",
    }[closed]
    return Row(attack, run, said, ok, f"{opened} opened", note)


def agent_connection_row(ws: Workspace) -> Row:
    """The agent (open files pinned at 1,024) under 1,100 connections that never finish."""
    attack = f"agent: {STALLED} connections that never finish their headers (no token)"
    with _agent(ws) as agent:
        if agent is None:
            return Row(attack, None, "-", False, note="the agent did not answer")
        proc, base = agent
        port = int(base.rsplit(":", 1)[1])

        def real() -> bool:
            return _answered(f"{base}/metrics", _bearer())

        return _stall_row(attack, port, proc.pid, real)


@contextlib.contextmanager
def _serve(ws: Workspace, *extra: str) -> Iterator[tuple[subprocess.Popen[bytes], int] | None]:
    """``gpufleet serve`` of profile atk-base (the admin token as its token); None when it never
    listened."""
    port = free_ports(1)[0]
    token = ws.root / "serve.token"
    token.write_text(ADMIN + "\n")
    token.chmod(0o600)
    args = ["serve", "--port", str(port), "--token-file", str(token), "--profile", "atk-base"]

    with _gpufleet(ws, [*args, *extra], lambda: _listens(port), "serve.log") as serve:
        yield None if serve is None else (serve, port)


def _cookie(port: int) -> dict[str, str]:
    from tui.ui.serve.auth import cookie_name

    return {"Cookie": f"{cookie_name(port)}={ADMIN}"}


def serve_connection_row(ws: Workspace) -> Row:
    """``gpufleet serve`` (open files pinned at 1,024) under 1,100 stalled connections."""
    attack = f"serve: {STALLED} connections that never finish their headers (no token)"
    with _serve(ws) as serving:
        if serving is None:
            return Row(attack, None, "-", False, note="serve did not listen")
        proc, port = serving

        def real() -> bool:
            return _answered(f"http://127.0.0.1:{port}/", _cookie(port))

        return _stall_row(attack, port, proc.pid, real)


def serve_sessions_row(ws: Workspace) -> Row:
    """Five browser sessions at ``--max-sessions 2``: two consoles, three 503s in one line."""
    attack = "serve: 5 websockets at --max-sessions 2"
    with _serve(ws, "--max-sessions", "2") as serving:
        if serving is None:
            return Row(attack, None, "-", False, note="serve did not listen")
        proc, port = serving

        def consoles() -> int:
            with contextlib.suppress(psutil.Error):
                children = psutil.Process(proc.pid).children()
                return sum(1 for c in children if "console" in _cmdline(c.pid))
            return 0

        codes, consoles_held = _websockets(port, 5, consoles)
        page = httpx.get(f"http://127.0.0.1:{port}/", headers=_cookie(port), timeout=15)
        line = page.text.strip()
        ok = sorted(codes) == [101, 101, 503, 503, 503] and consoles_held <= 2
        ok = ok and page.status_code == 503 and "\n" not in line and "--max-sessions 2" in line
        run = Run(["5 x GET /ws"], 0, "", "", 0.0)
        said = f"consoles running {consoles_held}"
        return Row(attack, run, said, ok, line, f"answers {codes}")


def _websockets(port: int, count: int, consoles: Callable[[], int]) -> tuple[list[int], int]:
    """Open ``count`` websockets, hold them until the consoles of those accepted run (20 s at
    most); their status codes and the consoles counted while they were held."""
    import asyncio

    import aiohttp

    async def run() -> tuple[list[int], int]:
        codes: list[int] = []
        async with aiohttp.ClientSession() as session:
            held = []
            for _ in range(count):
                try:
                    ws = await session.ws_connect(
                        f"http://127.0.0.1:{port}/ws", headers=_cookie(port)
                    )
                    held.append(ws)
                    codes.append(101)
                except aiohttp.WSServerHandshakeError as refused:
                    codes.append(refused.status)
            deadline = asyncio.get_running_loop().time() + 20
            running = consoles()
            while running < len(held) and asyncio.get_running_loop().time() < deadline:
                await asyncio.sleep(0.1)  # a poll with a deadline: the consoles start
                running = consoles()
            for ws in held:
                await ws.close()
        return codes, running

    return asyncio.run(run())


def _profile_doc(base: str, gpus: int) -> dict[str, object]:
    doc = httpx.get(f"{base}/api/v1/profiles/atk-base", headers=_bearer(), timeout=10).json()
    profile = dict(doc["profile"])
    profile["fleet"] = {**profile["fleet"], "gpus": list(range(gpus))}
    profile["fleet"].pop("ports", None)
    profile.pop("gpu", None)
    return profile


def preflight_row(ws: Workspace) -> Row:
    """Four preflights of a 10,000-GPU profile (59 KB) at once, ``/metrics`` asked meanwhile."""
    attack = "agent: 4 preflights of a 10,000-GPU profile (read token)"
    with _agent(ws) as agent:
        if agent is None:
            return Row(attack, None, "-", False, note="the agent did not answer")
        _, base = agent
        body = {"profile": _profile_doc(base, 10_000), "gpus": [0]}
        size = len(json.dumps(body))
        start = time.monotonic()

        def ask(method: str, path: str, doc: object = None) -> tuple[int, str, float]:
            """Status, error line and seconds of one request (0: no answer in 30 s)."""
            t0 = time.monotonic()
            try:
                got = httpx.request(
                    method, f"{base}{path}", json=doc, headers=_bearer(), timeout=30
                )
            except httpx.HTTPError:
                return 0, "no answer in 30 s", time.monotonic() - t0
            line = str(got.json().get("error", "")) if got.status_code == 400 else ""
            return got.status_code, line, time.monotonic() - t0

        with ThreadPoolExecutor(5) as pool:
            asks = [pool.submit(ask, "POST", "/api/v1/preflight", body) for _ in range(4)]
            metrics = pool.submit(ask, "GET", "/metrics")
            answers = [a.result() for a in asks]
            scrape = metrics.result()
        codes = sorted({code for code, _, _ in answers})
        line = answers[0][1]
        ok = codes == [400] and "at most 256" in line and scrape[0] == 200
        run = Run(["4 x POST /preflight", f"{size // 1000} KB"], codes[0], "", line, 0.0)
        said = f"/metrics {scrape[0]} in {scrape[2]:.2f} s"
        return Row(attack, run, said, ok, line, f"{time.monotonic() - start:.1f} s in all")


def env_row(ws: Workspace) -> Row:
    """A profile with ``OPENSSL_CONF`` saved through the agent (admin token)."""
    attack = "agent: save a profile with env OPENSSL_CONF (admin token)"
    with _agent(ws) as agent:
        if agent is None:
            return Row(attack, None, "-", False, note="the agent did not answer")
        _, base = agent
        doc = _profile_doc(base, 1)
        doc["name"] = "atk-ssl"
        doc["env"] = {"OPENSSL_CONF": "/tmp/evil.cnf"}
        answer = httpx.put(
            f"{base}/api/v1/profiles/atk-ssl", json={"profile": doc}, headers=_bearer(), timeout=10
        )
        line = str(answer.json().get("error", "")) if answer.status_code == 400 else answer.text
        saved = (ws.profiles / "atk-ssl.toml").exists()
        ok = answer.status_code == 400 and "[agent] env" in line and not saved
        run = Run(["PUT", "/profiles/atk-ssl"], answer.status_code, "", line, 0.0)
        return Row(attack, run, "not saved" if not saved else "SAVED", ok, line)


def job_row(ws: Workspace) -> Row:
    """Another user's process whose command line claims the agent's job: stop, then start."""
    attack = "agent: another user's 'tui generate ... --status S' (operate token)"
    with _agent(ws) as agent:
        if agent is None:
            return Row(attack, None, "-", False, note="the agent did not answer")
        _, base = agent
        status = ws.state / "pipeline" / "status.json"
        claim = ["tui", "generate", "--prompts", "/tmp/x", "--out", str(ws.root / "theirs")]
        claim += ["--status", str(status)]
        # bash, not sleep: its command line carries the claim (and it runs as any user).
        sleeper = ["bash", "-c", "sleep 300; :", *claim]
        nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        foreign = os.geteuid() == 0 and shutil.which("setpriv") is not None
        with started([*nobody, *sleeper] if foreign else sleeper, cwd="/tmp") as stranger:
            poll(lambda: "generate" in _cmdline(stranger.pid), 10)
            # Reaped the moment it exits, as its parent (a shell) would: a build that signals
            # it otherwise waited its 30 s stop grace on our unreaped zombie.
            threading.Thread(target=stranger.wait, name="reap-stranger", daemon=True).start()
            answers = []
            for action in ("stop", "start"):
                answers.append(
                    httpx.post(
                        f"{base}/api/v1/pipeline",
                        json={"action": action},
                        headers=_bearer(),
                        timeout=60,
                    )
                )
            spared = alive(stranger.pid)
            if not spared:  # its sleep, left in its session (ours: we made it)
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(stranger.pid, signal.SIGKILL)
            launched = [p for p in ws.ours() if "generate" in _cmdline(p.pid)]
            for proc in launched:  # the broken build's: started by our agent, ours to stop
                with contextlib.suppress(psutil.Error):
                    proc.kill()
        codes = [a.status_code for a in answers]
        line = str(answers[0].json().get("error", "")) if codes[0] == 409 else answers[0].text
        ok = codes == [409, 409] and spared and not launched
        run = Run(["POST /pipeline stop, start"], codes[-1], "", line, 0.0)
        who = "uid 65534" if foreign else "this user, in the foreground"
        said = f"stranger ({who}) {'alive' if spared else 'KILLED'}; launched {len(launched)}"
        return Row(attack, run, said, ok, line, f"answers {codes}")


def _cmdline(pid: int) -> list[str]:
    with contextlib.suppress(psutil.Error):
        return psutil.Process(pid).cmdline()
    return []


def pidfile_row(ws: Workspace) -> Row:
    """A detached agent whose pid file's ``create_time`` moved +24 s: running, then stopped."""
    attack = "agent --detach: create_time +24 s in agent.pid.json"
    port = free_ports(1)[0]
    token = _token_file(ws)
    common = ["--profile", "atk-base", "--port", str(port), "--token-file", str(token)]
    up = ws.cli(["agent", "--detach", *common], timeout=90)
    pid_file = ws.state / "agent.pid.json"
    if up.rc != 0 or not pid_file.exists():
        return Row(attack, up, "-", False, note="the agent did not start")
    doc = json.loads(pid_file.read_text())
    agent_pid = int(doc["pid"])
    doc["create_time"] += 24.0
    pid_file.write_text(json.dumps(doc))
    running = ws.cli(["agent", "--running"], timeout=30)
    stop = ws.cli(["agent", "--stop"], timeout=60)
    said_stopped = stop.rc == 0 and stop.line_with("stopped").startswith("st")
    # Its exit is waited for only when the stop said it stopped it: otherwise nothing will.
    gone = poll(lambda: not alive(agent_pid), 20 if said_stopped else 0)
    if not gone:
        with contextlib.suppress(ProcessLookupError):
            os.kill(agent_pid, signal.SIGKILL)  # the agent this row started
    ok = running.rc == 0 and said_stopped and gone
    said = f"--running exit {running.rc}; agent {'stopped' if gone else 'STILL SERVING'}"
    return Row(attack, stop, said, ok, stop.line_with("stopped", "not running"))


def token_row(ws: Workspace) -> Row:
    """The agent started on a 0644 token file of an admin token."""
    port = free_ports(1)[0]
    token = _token_file(ws, 0o644)
    argv = ["agent", "--profile", "atk-base", "--port", str(port), "--token-file", str(token)]
    # One that serves is a hang: the row fails, as soon as it answers (not at the deadline).
    run = ws.cli(argv, timeout=20, hangs=lambda: _listens(port))
    ok = run.rc == 2 and len(run.lines) == 1 and "readable by other users" in run.lines[0]
    return Row("agent: a 0644 token file of an admin token", run, "-", ok and not run.traceback)


def log_row(ws: Workspace) -> Row:
    """A 50 MB line appended to a running server's log, read through the agent's logs route."""
    attack = "agent: a 50 MB line in a server's log, GET /logs/0"
    up = ws.up()
    server = ws.server(0) or {}
    log = Path(str(server.get("log_path", "")))
    if up.rc != 0 or not log.is_file():
        return Row(attack, up, "-", False, note="the fleet did not come up")
    with _agent(ws) as agent:
        if agent is None:
            return Row(attack, None, "-", False, note="the agent did not answer")
        _, base = agent

        if not poll(lambda: _answered(f"{base}/api/v1/logs/0", _bearer(), 10), 30, 0.25):
            return Row(attack, None, "-", False, note="the agent does not serve GPU 0's log")
        with open(log, "ab") as handle:
            handle.write(b"z" * LONG_LINE + b"\n")
        answer = httpx.get(
            f"{base}/api/v1/logs/0", params={"lines": 20}, headers=_bearer(), timeout=60
        )
        lines = answer.json().get("lines", []) if answer.is_success else []
    cut = [line for line in lines if line.startswith("zzz")]
    before = [line for line in lines if not line.startswith("zzz")]
    ok = answer.is_success and len(cut) == 1 and len(cut[0]) < 70_000 and len(before) >= 5
    run = Run(["GET", "/logs/0?lines=20"], answer.status_code, "", "", 0.0)
    said = f"{len(before)} lines before it shown; the long line {len(cut[0]) if cut else 0} chars"
    return Row(attack, run, said, ok, (cut[0][-60:] if cut else ""))


ROWS: dict[str, Callable[[Workspace], Row]] = {
    "agent-connections": agent_connection_row,
    "serve-connections": serve_connection_row,
    "serve-sessions": serve_sessions_row,
    "preflight": preflight_row,
    "env": env_row,
    "job": job_row,
    "pidfile": pidfile_row,
    "token": token_row,
    "log": log_row,
}
"""Each row by name, with the broken build that must make it fail (``BROKEN_FOR``)."""

BROKEN_FOR: dict[str, str] = {
    "agent-connections": "no-connection-limits",
    "serve-connections": "no-connection-limits",
    "serve-sessions": "unlimited-sessions",
    "preflight": "unbounded-profile",
    "env": "env-denylist",
    "job": "job-by-cmdline",
    "pidfile": "pidfile-wallclock",
    "token": "any-token-mode",
    "log": "tail-last-mib",
}
"""The build without the check each row is about."""


def network_rows(space: Callable[[str], Workspace]) -> list[Row]:
    """Every row, each in a workspace of its own (``space(name)``: a 1-GPU fleet's)."""
    rows = []
    for name, row in ROWS.items():
        ws = space(f"network-{name}")
        try:
            rows.append(row(ws))
        except Exception as exc:  # a row that broke is a failed row; the others still run
            rows.append(Row(f"network {name}: broke off", None, "-", False, note=repr(exc)[:200]))
        finally:
            ws.cleanup()
    return rows

"""Shared test helper: run one real ``gpufleet sim`` process on a free loopback port.

Usage::

    with running_sim(["--sim-speed", "100"], tmp_path) as sim:
        httpx.get(sim.url + "/health")

The process runs in its own session with its log in ``sim.log_path``; the context waits for
``/ready`` = 200 (unless ``wait_healthy=False``; ``/health`` takes a second, as SGLang's does) and
always kills the whole group on exit. ``Clients`` sends concurrent long requests and records what
each got back.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
from repo_paths import ROOT

from bench.ports import free_port


@dataclass
class SimProcess:
    """A started simulated server."""

    proc: subprocess.Popen[bytes]
    """The server (session leader)."""
    port: int
    """Its HTTP port."""
    log_path: Path
    """Its stdout+stderr."""

    @property
    def url(self) -> str:
        """Base URL."""
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        """The log so far."""
        return self.log_path.read_text(errors="replace")

    def wait_exit(self, timeout: float) -> int:
        """Wait for the server to exit; returns its status."""
        return self.proc.wait(timeout)

    def wait_log(self, pattern: str, timeout: float) -> bool:
        """Poll the log (a real file the server appends to) until ``pattern`` is in it."""
        deadline = time.monotonic() + timeout
        regex = re.compile(pattern)
        while time.monotonic() < deadline:
            if regex.search(self.log()):
                return True
            if self.proc.poll() is not None:
                return bool(regex.search(self.log()))
            time.sleep(0.05)
        return False


def sim_env(state_dir: Path) -> dict[str, str]:
    """Environment for a sim process whose state lives under ``state_dir``."""
    env = dict(os.environ)
    env["GPUFLEET_STATE_DIR"] = str(state_dir)
    env.pop("GPUFLEET_SIM_GPU_DIR", None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


def active_requests(port: int) -> int:
    """The generation requests a server has in flight (its HTTP counters under
    ``--enable-metrics``); -1 when it does not answer."""
    from tui.servers.payloads import parse_request_counts

    try:
        body = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    except httpx.HTTPError:
        return -1
    return parse_request_counts(body).active or 0


def wait_until(predicate: Callable[[], object], timeout: float, interval: float = 0.05) -> bool:
    """Poll ``predicate()`` until true or the deadline; returns whether it became true."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return False


def _healthy(url: str) -> bool:
    try:
        return httpx.get(url + "/ready", timeout=2.0).status_code == 200
    except httpx.HTTPError:
        return False


def in_flight(url: str) -> int:
    """Requests running or queued on the server (``/v1/loads``), 0 when it does not answer."""
    try:
        load = httpx.get(url + "/v1/loads", timeout=2.0).json()["loads"][0]
    except (httpx.HTTPError, ValueError, KeyError, IndexError):
        return 0
    return int(load["num_running_reqs"]) + int(load["num_waiting_reqs"])


class Clients:
    """``count`` concurrent completions of ``max_tokens`` tokens each, one thread per request.

    ``results`` gets, per request, the HTTP status or the name of the exception the client saw
    (a dropped connection is ``RemoteProtocolError`` or ``ReadError``).
    """

    def __init__(
        self,
        url: str,
        count: int,
        max_tokens: int,
        timeout: float = 60.0,
        ignore_eos: bool = True,
    ) -> None:
        self.url, self.max_tokens, self.timeout = url, max_tokens, timeout
        self.ignore_eos = ignore_eos
        self.results: list[int | str] = []
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self.add(count)

    def _one(self) -> None:
        try:
            reply = httpx.post(
                self.url + "/v1/completions",
                json={"prompt": "p", "max_tokens": self.max_tokens, "ignore_eos": self.ignore_eos},
                timeout=self.timeout,
            )
            outcome: int | str = reply.status_code
        except httpx.HTTPError as exc:
            outcome = type(exc).__name__
        with self._lock:
            self.results.append(outcome)

    def add(self, count: int) -> None:
        """Send ``count`` more requests."""
        for _ in range(count):
            thread = threading.Thread(target=self._one, daemon=True)
            thread.start()
            self._threads.append(thread)

    def join(self, timeout: float = 60.0) -> list[int | str]:
        """Wait for every request's outcome; returns the outcomes."""
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(deadline - time.monotonic(), 0.0))
        return list(self.results)


@contextlib.contextmanager
def running_sim(
    args: list[str],
    state_dir: Path,
    *,
    port: int | None = None,
    wait_healthy: bool = True,
    timeout: float = 30.0,
    env: dict[str, str] | None = None,
) -> Iterator[SimProcess]:
    """Start ``python -m tui sim --host 127.0.0.1 --port P ARGS`` and clean it up.

    Args:
        args: extra sim/SGLang flags (add ``--sim-speed`` to make it fast).
        state_dir: GPUFLEET_STATE_DIR for the process (the simulated GPUs live under it).
        port: fixed port, else a free one.
        wait_healthy: wait for /ready = 200 before yielding.
        timeout: deadline for becoming ready.
        env: extra environment variables (``SGLANG_HEALTH_CHECK_TIMEOUT``...).

    Yields:
        The running server.
    """
    port = port or free_port()
    argv = ["--host", "127.0.0.1", "--port", str(port), *args]
    with sim_process(argv, state_dir, port, state_dir / f"sim-{port}.log", env) as sim:
        if wait_healthy:
            proc = sim.proc
            ok = wait_until(lambda: _healthy(sim.url) or proc.poll() is not None, timeout)
            if not ok or proc.poll() is not None:
                raise AssertionError(f"sim did not become healthy:\n{sim.log()[-3000:]}")
        yield sim


@contextlib.contextmanager
def sim_process(
    args: list[str],
    state_dir: Path,
    port: int,
    log_path: Path,
    env: dict[str, str] | None = None,
) -> Iterator[SimProcess]:
    """Start ``python -m tui sim ARGS`` in its own session; always kill its whole group on exit.

    Args:
        args: every sim/SGLang flag, its ``--port`` included.
        state_dir: GPUFLEET_STATE_DIR for the process (the simulated GPUs live under it).
        port: the port ``args`` names.
        log_path: where its stdout and stderr go.
        env: extra environment variables.

    Yields:
        The started server (not yet ready).
    """
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tui", "sim", *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**sim_env(state_dir), **(env or {})},
            start_new_session=True,
            cwd=ROOT,
        )
    try:
        yield SimProcess(proc, port, log_path)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)

"""Shared test helper: run one real ``gpufleet sim`` process on a free loopback port.

Usage::

    with running_sim(["--sim-speed", "100"], tmp_path) as sim:
        httpx.get(sim.url + "/health")

The process runs in its own session with its log in ``sim.log_path``; the context waits for
``/health`` = 200 (unless ``wait_healthy=False``) and always kills the whole group on exit.
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
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    """A currently free TCP port on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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


def sim_env(state_dir: Path) -> dict[str, str]:
    """Environment for a sim process whose state lives under ``state_dir``."""
    env = dict(os.environ)
    env["GPUFLEET_STATE_DIR"] = str(state_dir)
    env.pop("GPUFLEET_SIM_GPU_DIR", None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


def wait_until(predicate: object, timeout: float, interval: float = 0.05) -> bool:
    """Poll ``predicate()`` until true or the deadline; returns whether it became true."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(interval)
    return False


def _healthy(url: str) -> bool:
    try:
        return httpx.get(url + "/health", timeout=2.0).status_code == 200
    except httpx.HTTPError:
        return False


@contextlib.contextmanager
def running_sim(
    args: list[str],
    state_dir: Path,
    *,
    port: int | None = None,
    wait_healthy: bool = True,
    timeout: float = 30.0,
) -> Iterator[SimProcess]:
    """Start ``python -m tui sim --host 127.0.0.1 --port P ARGS`` and clean it up.

    Args:
        args: extra sim/SGLang flags (add ``--sim-speed`` to make it fast).
        state_dir: GPUFLEET_STATE_DIR for the process (the simulated GPUs live under it).
        port: fixed port, else a free one.
        wait_healthy: wait for /health = 200 before yielding.
        timeout: deadline for becoming healthy.

    Yields:
        The running server.
    """
    port = port or free_port()
    log_path = state_dir / f"sim-{port}.log"
    argv = [sys.executable, "-m", "tui", "sim", "--host", "127.0.0.1", "--port", str(port), *args]
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=sim_env(state_dir),
            start_new_session=True,
            cwd=ROOT,
        )
    sim = SimProcess(proc, port, log_path)
    try:
        if wait_healthy:
            ok = wait_until(lambda: _healthy(sim.url) or proc.poll() is not None, timeout)
            if not ok or proc.poll() is not None:
                raise AssertionError(f"sim did not become healthy:\n{sim.log()[-3000:]}")
        yield sim
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)

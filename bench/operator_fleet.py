"""A fleet started the way the seed's operator starts it, not by gpufleet (the tests and the
real-server harness share it; ``gpufleet adopt`` takes such a fleet over).

The operator's script runs under ``setsid`` and starts every server in the background with its
own ``CUDA_VISIBLE_DEVICES`` and its own log file, then ends: the servers share the script's
session and process group, carry no launch id of gpufleet's, and are nobody's children. The
launcher here is that script, in Python (no shell string is built): one process in a new
session that starts each server and exits.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

LAUNCHER = """\
import json, os, subprocess, sys, time, urllib.request
for server in json.loads(sys.argv[1]):
    env = dict(os.environ, **server["env"])
    with open(server["log"], "ab") as log:
        proc = subprocess.Popen(
            server["argv"], env=env, stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    print(proc.pid, flush=True)
    deadline = time.monotonic() + float(sys.argv[2])
    while server["wait"] and proc.poll() is None and time.monotonic() < deadline:
        try:
            urllib.request.urlopen(server["wait"], timeout=5).close()
            break
        except Exception:
            time.sleep(0.5)
"""
"""The operator's script: each server in the background, its own log, then the script ends.
With one card for several servers it waits until each answers before it starts the next (the
seed's own loop polls /model_info): SGLang sizes its pools from the free memory it finds, so
the next one must find the previous one's memory already taken."""


@dataclass(frozen=True)
class OperatorServer:
    """One server of the operator's script."""

    gpu: int
    """Its ``CUDA_VISIBLE_DEVICES``."""
    port: int
    """Its ``--port``."""
    argv: tuple[str, ...]
    """Its whole command line."""
    log: Path
    """Its stdout and stderr."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Variables set for it besides ``CUDA_VISIBLE_DEVICES``."""
    wait: bool = False
    """The script waits until it answers before it starts the next server (servers sharing
    one card)."""

    @property
    def url(self) -> str:
        """Its base URL."""
        return f"http://127.0.0.1:{self.port}"


@dataclass(frozen=True)
class OperatorFleet:
    """The started fleet."""

    servers: tuple[OperatorServer, ...]
    """Its servers."""
    pids: tuple[int, ...]
    """Each server's pid, in order."""
    group: int
    """The process group they share (the script's)."""

    @property
    def ports(self) -> list[int]:
        """The ports, in order."""
        return [s.port for s in self.servers]

    @property
    def urls(self) -> list[str]:
        """The base URLs, in order."""
        return [s.url for s in self.servers]


def sim_server(
    gpu: int,
    port: int,
    logs: Path,
    flags: Sequence[str],
    speed: float = 20.0,
    log_name: str = "sglang_gpu{gpu}.log",
    wait: bool = False,
) -> OperatorServer:
    """A simulated server (``python -m tui sim``, a drop-in for SGLang) as the script runs it.

    Args:
        gpu: Its GPU (its ``CUDA_VISIBLE_DEVICES``).
        port: Its port.
        logs: The log directory.
        flags: Its SGLang flags (the knobs).
        speed: ``--sim-speed``.
        log_name: Its log file's name (``{gpu}``, ``{port}``; servers sharing a card need
            ``{port}``).
        wait: The script waits until it answers before starting the next one.
    """
    argv = (sys.executable, "-m", "tui", "sim", "--port", str(port), *flags)
    log = logs / log_name.format(gpu=gpu, port=port)
    return OperatorServer(gpu, port, (*argv, "--sim-speed", f"{speed:g}"), log, wait=wait)


def start(
    servers: Sequence[OperatorServer],
    env: Mapping[str, str] | None = None,
    timeout: float = 60,
) -> OperatorFleet:
    """Run the script (in a session of its own) and wait until it ended.

    Args:
        servers: What it starts.
        env: The script's environment (default: this process's, without gpufleet's launch id).
        timeout: How long it may wait for each server it waits for (``OperatorServer.wait``).
    """
    base = dict(os.environ if env is None else env)
    base.pop("GPUFLEET_LAUNCH_ID", None)
    spec = [
        {
            "argv": list(s.argv),
            "env": {"CUDA_VISIBLE_DEVICES": str(s.gpu), **s.env},
            "log": str(s.log),
            "wait": f"{s.url}/health" if s.wait else "",
        }
        for s in servers
    ]
    for server in servers:
        server.log.parent.mkdir(parents=True, exist_ok=True)
    script = subprocess.run(
        [sys.executable, "-c", LAUNCHER, json.dumps(spec), str(timeout)],
        env=base,
        capture_output=True,
        text=True,
        start_new_session=True,
        timeout=60 + timeout * sum(s.wait for s in servers),
        check=True,
    )
    pids = tuple(int(line) for line in script.stdout.split())
    return OperatorFleet(tuple(servers), pids, os.getpgid(pids[0]))


def answers(url: str, paths: Sequence[str] = ("/health", "/model_info")) -> bool:
    """Whether the server answers 200 on one of ``paths`` (the seed's poll asks /model_info)."""
    for path in paths:
        try:
            with urllib.request.urlopen(url + path, timeout=5) as reply:
                if reply.status == 200:
                    return True
        except (urllib.error.URLError, OSError, ValueError):
            continue
    return False


def wait_ready(fleet: OperatorFleet, timeout: float) -> None:
    """Poll every server until it answers, as the seed's loop does (raises at the deadline)."""
    deadline = time.monotonic() + timeout
    waiting = list(fleet.servers)
    while waiting:
        waiting = [s for s in waiting if not answers(s.url)]
        if waiting and time.monotonic() > deadline:
            tails = "\n".join(f"{s.log}: {_tail(s.log)}" for s in waiting)
            raise AssertionError(f"servers did not come up in {timeout:g} s:\n{tails}")
        if waiting:
            time.sleep(0.2)


def _tail(path: Path) -> str:
    with contextlib.suppress(OSError):
        return path.read_text(errors="replace")[-1500:]
    return "(no log)"


def kill_group(group: int) -> None:
    """SIGKILL what is left of the script's group (teardown; never a group of gpufleet's)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signal.SIGKILL)


@contextlib.contextmanager
def operator_fleet(
    servers: Sequence[OperatorServer], env: Mapping[str, str] | None = None, timeout: float = 60
) -> Iterator[OperatorFleet]:
    """The script's fleet, up; whatever is left of its group is killed afterwards."""
    fleet = start(servers, env, timeout)
    try:
        wait_ready(fleet, timeout)
        yield fleet
    finally:
        kill_group(fleet.group)

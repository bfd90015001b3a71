"""Several "nodes" on one machine for the many-node tests: each with its own state directory
(``GPUFLEET_STATE_DIR``), simulated GPUs (``GPUFLEET_SIM_GPU_DIR``), profiles, ports, servers
and ``gpufleet agent``; one token file shared by the agents. Everything a node started is stopped
when its context ends (agent by SIGTERM, servers through ``gpufleet sim-fleet stop``, strays
killed)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
from repo_paths import ROOT

from bench.simfleet import BASELINE, free_ports, kill_strays, sim_profile_text
from tui import paths

FAST_APPLY = ["--timeout", "60", "--term-timeout", "5", "--release-timeout", "20", "--no-measure"]


@dataclass
class Node:
    """One simulated node and its agent."""

    name: str
    """The agent's --node."""
    root: Path
    """Its directory (state, profiles, logs)."""
    ports: list[int]
    """Its servers' ports."""
    agent_port: int
    """Its agent's port."""
    token_file: Path
    """The agents' token."""
    agent: subprocess.Popen[bytes] | None = None
    """The agent process while it runs."""

    @property
    def env(self) -> dict[str, str]:
        """The environment of everything run for this node."""
        env = dict(os.environ)
        env[paths.STATE_ENV] = str(self.root / "state")
        env[paths.SIM_GPU_ENV] = str(self.root / "state" / "simgpu")
        env[paths.PROFILES_ENV] = str(self.root / "profiles")
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
        return env

    @property
    def agent_address(self) -> str:
        """``127.0.0.1:PORT``."""
        return f"127.0.0.1:{self.agent_port}"

    @property
    def urls(self) -> list[str]:
        """Its servers' base URLs."""
        return [f"http://127.0.0.1:{p}" for p in self.ports]

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """``gpufleet ARGS`` for this node."""
        return subprocess.run(
            [sys.executable, "-m", "tui", *args],
            env=self.env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def start_agent(self, *extra: str) -> None:
        """Start the node's agent and wait until it answers."""
        argv = [sys.executable, "-m", "tui", "agent", "--profile", "node-base", "--node"]
        argv += [self.name, "--port", str(self.agent_port), "--token-file", str(self.token_file)]
        argv += ["--poll-interval", "0.5", *extra]
        log = (self.root / "agent.log").open("ab")
        self.agent = subprocess.Popen(
            argv, env=self.env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.agent.poll() is not None:
                raise AssertionError((self.root / "agent.log").read_text())
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"http://{self.agent_address}/metrics", timeout=1).status_code:
                    return
            time.sleep(0.1)
        raise AssertionError(f"agent {self.name} did not answer within 30 s")

    def start_readonly_agent(self) -> None:
        """Start the node's agent read-only: it accepts read tokens only, so it gets a token
        file naming the shared secret ``read`` (the same secret is admin on the other agents)."""
        secret = self.token_file.read_text().strip()
        read_only = self.root / "read.token"
        read_only.write_text(f"read {secret}\n")
        read_only.chmod(0o600)
        self.start_agent("--readonly", "--token-file", str(read_only))

    def stop_agent(self, sig: int = signal.SIGTERM) -> None:
        """Stop the agent (SIGTERM, or SIGKILL to play a lost node)."""
        if self.agent is not None and self.agent.poll() is None:
            self.agent.send_signal(sig)
            try:
                self.agent.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.agent.kill()
                self.agent.wait(timeout=10)
        self.agent = None


def token_file(tmp: Path) -> Path:
    """A token file the agents share (what an operator copies to each node)."""
    path = tmp / "agent.token"
    path.write_text("test-token-" + os.urandom(8).hex() + "\n")
    path.chmod(0o600)
    return path


@contextlib.contextmanager
def nodes(
    tmp: Path,
    count: int,
    gpus: int,
    speed: float = 50.0,
    agents: bool = True,
    startup_s: float | None = None,
    agent_args: tuple[str, ...] = (),
) -> Iterator[list[Node]]:
    """``count`` nodes of ``gpus`` simulated GPUs each, their baseline running, agents started.

    ``startup_s`` fixes a server's startup time apart from ``speed`` (a slow job whose relaunch is
    still quick); ``agent_args`` are more options of every agent (``--measure-window 2``).

    Yields:
        The nodes; on exit every agent and server of them is stopped.
    """
    token = token_file(tmp)
    made: list[Node] = []
    try:
        for i in range(count):
            ports = free_ports(gpus + 1)
            node = Node(f"n{i + 1}", tmp / f"node{i + 1}", ports[:gpus], ports[gpus], token)
            (node.root / "profiles").mkdir(parents=True)
            text = sim_profile_text(
                "node-base",
                list(range(gpus)),
                node.ports,
                str(node.root / "logs"),
                BASELINE,
                speed,
                "" if startup_s is None else f"sim_startup_seconds = {startup_s}",
            )
            (node.root / "profiles" / "node-base.toml").write_text(text)
            made.append(node)
            done = node.run("apply", "node-base", *FAST_APPLY)
            if done.returncode != 0:
                raise AssertionError(f"node {node.name} did not come up:\n{done.stderr}")
            if agents:
                node.start_agent(*agent_args)
        yield made
    finally:
        for node in made:
            node.stop_agent()
            with contextlib.suppress(subprocess.TimeoutExpired):
                node.run("sim-fleet", "stop", "--mode", "terminate", timeout=60)
            kill_strays(node.ports)


def server_pid(node: Node, gpu: int = 0) -> int:
    """The pid the node's fleet state records for ``gpu``'s server."""
    records = json.loads((node.root / "state" / "fleet_state.json").read_text())
    return int(records["gpus"][str(gpu)]["server"]["pid"])

"""Shared fixtures of the operator and end-to-end tests: fast simulated fleets, leftovers scans."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil

from bench.simfleet import AGGRESSIVE, BASELINE, ROOT, free_ports, sim_profile_text, stop_all
from tui import paths
from tui.ops.pipeline import PipelineConfig
from tui.profiles import Profile, load_profile
from tui.state.fleet_state import read_records

SIM_SPEED = 200.0
"""Simulator speed of the tests' fleets: startup takes about a second."""


def free_port_run(count: int) -> int:
    """First of ``count`` consecutive free ports (the demo takes a base port)."""
    return free_ports(count, consecutive=True)[0]


def profile_text(name: str, gpus: list[int], ports: list[int], server: str) -> str:
    """A sim profile document with the seed's shared flags and ``server`` knobs."""
    return sim_profile_text(name, gpus, ports, "{state}/logs", server, SIM_SPEED)


@dataclass
class OpFleet:
    """Profiles of a small simulated fleet, written to a profiles directory."""

    baseline: Profile
    """The fleet's starting profile ('op-baseline')."""
    ports: list[int]
    """Its ports."""
    profiles_dir: Path
    """Where 'op-baseline' and 'op-aggressive' live (GPUFLEET_PROFILES_DIR)."""


def write_profiles(directory: Path, gpus: list[int]) -> OpFleet:
    """Write 'op-baseline' and 'op-aggressive' for ``gpus`` on free ports."""
    directory.mkdir(parents=True, exist_ok=True)
    ports = free_ports(len(gpus))
    (directory / "op-baseline.toml").write_text(profile_text("op-baseline", gpus, ports, BASELINE))
    (directory / "op-aggressive.toml").write_text(
        profile_text("op-aggressive", gpus, ports, AGGRESSIVE)
    )
    return OpFleet(load_profile(directory / "op-baseline.toml"), ports, directory)


def healthy(port: int) -> bool:
    """``GET /ready`` answers 200 (SGLang 0.5.23's ``/health`` takes a second: a generation)."""
    try:
        return httpx.get(f"http://127.0.0.1:{port}/ready", timeout=1.0).status_code == 200
    except httpx.HTTPError:
        return False


def pid_alive(pid: int) -> bool:
    """The pid runs (a zombie counts as gone)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def leftovers(state_dir: Path, ports: list[int] | None = None) -> list[str]:
    """Processes a test may have left: sim servers on ``ports`` or anything run for ``state_dir``.

    A process belongs to the test when its environment names the state directory, or its
    command line names a port of the test's fleet or a file under the state directory.
    """
    wanted = {str(p) for p in ports or []}
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        if proc.pid == os.getpid():
            continue
        argv = proc.info["cmdline"] or []
        if "tui" not in argv or not ("sim" in argv or "generate" in argv):
            continue
        try:
            mine = proc.environ().get(paths.STATE_ENV) == str(state_dir)
        except (psutil.AccessDenied, psutil.NoSuchProcess):
            mine = False
        mine = mine or any(str(state_dir) in a for a in argv)
        if "--port" in argv:
            i = argv.index("--port")
            mine = mine or (i + 1 < len(argv) and argv[i + 1] in wanted)
        if mine and pid_alive(proc.pid):
            found.append(f"{proc.pid}: {' '.join(argv)}")
    return found


def kill_leftovers(state_dir: Path, ports: list[int] | None = None) -> None:
    """Stop the recorded fleet, then SIGKILL whatever of the test still runs."""
    with contextlib.suppress(Exception):  # a damaged state file: the scan below still cleans up
        if read_records():
            stop_all()
    for line in leftovers(state_dir, ports):
        with contextlib.suppress(psutil.Error):
            proc = psutil.Process(int(line.split(":", 1)[0]))
            proc.kill()
            proc.wait(timeout=10)


@contextlib.contextmanager
def cleaned(state_dir: Path, ports: list[int] | None = None) -> Iterator[None]:
    """Whatever happens inside, nothing of the test keeps running afterwards."""
    try:
        yield
    finally:
        kill_leftovers(state_dir, ports)


def gpufleet_status(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``gpufleet status ARGS`` as a real process (its exit status and output, as text)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "tui", "status", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def job_in(
    tmp_path: Path, prompts: Path, url: str, *extra_args: str, fresh: bool = False
) -> PipelineConfig:
    """A pipeline of ``prompts`` against the one server at ``url``, its output directory,
    status document and log under ``tmp_path``.

    Args:
        tmp_path: where its files go (``out``, ``status.json``, ``pipeline.log``).
        prompts: the prompts file.
        url: the server.
        extra_args: ``gpufleet generate`` flags.
        fresh: start the job afresh when it finished (``fresh_when_finished``).
    """
    return PipelineConfig(
        prompts=prompts,
        out_dir=tmp_path / "out",
        status_path=tmp_path / "status.json",
        log_path=tmp_path / "pipeline.log",
        servers=(url,),
        extra_args=extra_args,
        fresh_when_finished=fresh,
    )

"""``gpufleet generate --profile NAME``: the fleet's server URLs come from a tuning profile."""

from __future__ import annotations

import os
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from pipeline_helpers import FAST_SIM_ARGS, PYTHON, REPO, read_shards, write_prompts
from sim_helpers import SimProcess, running_sim

from tui.paths import PROFILES_ENV
from tui.pipeline.fleet_urls import connect_host, server_urls
from tui.pipeline.status import read_status
from tui.profiles import profile_from_dict, save_profile


def _profile_doc(ports: list[int], host: str) -> dict[str, object]:
    return {
        "name": "pipe",
        "engine": {"kind": "sim", "sim_speed": 500},
        "fleet": {"gpus": [2, 5], "ports": ports, "host": host},
        "server": {},
    }


@pytest.mark.parametrize(
    ("bind", "connect"),
    [
        ("0.0.0.0", "127.0.0.1"),
        ("::", "[::1]"),
        ("", "127.0.0.1"),
        ("10.1.2.3", "10.1.2.3"),
        ("fd00::7", "[fd00::7]"),
        ("gpu-node-1", "gpu-node-1"),
    ],
)
def test_connect_host_maps_wildcards_to_loopback(bind: str, connect: str) -> None:
    assert connect_host(bind) == connect


def test_server_urls_follow_the_profile_gpus_and_ports() -> None:
    profile = profile_from_dict(_profile_doc([31005, 31002], "0.0.0.0"), "pipe")
    assert server_urls(profile) == ["http://127.0.0.1:31005", "http://127.0.0.1:31002"]


@pytest.fixture
def two_sims(tmp_path: Path) -> Iterator[tuple[SimProcess, SimProcess]]:
    with (
        running_sim(FAST_SIM_ARGS, tmp_path) as a,
        running_sim([*FAST_SIM_ARGS, "--sim-gpu-index", "1"], tmp_path) as b,
    ):
        yield a, b


def test_generate_with_profile_uses_every_server(
    tmp_path: Path, two_sims: tuple[SimProcess, SimProcess]
) -> None:
    profiles = tmp_path / "profiles"
    ports = [sim.port for sim in two_sims]
    save_profile(profile_from_dict(_profile_doc(ports, "0.0.0.0"), "pipe"), profiles / "pipe.toml")
    prompts = write_prompts(tmp_path / "p.jsonl", 400)
    status_path = tmp_path / "status.json"
    result = subprocess.run(
        [
            PYTHON,
            "-m",
            "tui",
            "generate",
            "--profile",
            "pipe",
            "--prompts",
            str(prompts),
            "--out",
            str(tmp_path / "out"),
            "--status",
            str(status_path),
            "--max-tokens",
            "8",
            "--per-server-inflight",
            "8",
        ],
        cwd=REPO,
        env={**os.environ, PROFILES_ENV: str(profiles)},
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert result.returncode == 0, result.stderr
    counts = Counter(int(r["index"]) for r in read_shards(tmp_path / "out"))
    assert sorted(counts) == list(range(400)) and max(counts.values()) == 1
    status = read_status(status_path)
    assert status is not None
    assert [s.url for s in status.servers] == [f"http://127.0.0.1:{p}" for p in ports]
    assert all(s.done > 0 for s in status.servers)
    assert sum(s.done for s in status.servers) == 400


def _generate(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    prompts = write_prompts(tmp_path / "p.jsonl", 3)
    return subprocess.run(
        [
            PYTHON,
            "-m",
            "tui",
            "generate",
            "--prompts",
            str(prompts),
            "--out",
            str(tmp_path / "o"),
            *extra,
        ],
        cwd=REPO,
        env={**os.environ, PROFILES_ENV: str(tmp_path / "profiles")},
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_unknown_profile_is_a_clear_error(tmp_path: Path) -> None:
    result = _generate(tmp_path, "--profile", "nope")
    assert result.returncode == 2
    assert "--profile=nope" in result.stderr and "no such file or profile" in result.stderr


def test_profile_and_server_are_exclusive(tmp_path: Path) -> None:
    result = _generate(tmp_path, "--profile", "x", "--server", "http://127.0.0.1:1")
    assert result.returncode == 2 and "not allowed with argument" in result.stderr


def test_no_fleet_named_is_a_clear_error(tmp_path: Path) -> None:
    result = _generate(tmp_path)
    assert result.returncode == 2
    assert "give --profile NAME or at least one --server URL" in result.stderr

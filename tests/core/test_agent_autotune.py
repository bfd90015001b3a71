"""Autotune through the agent's API, on a real agent with simulated GPUs: 401 without the token,
403 for every action of a read-only agent (nothing started), a bad option named in one line
(400, nothing started), then a search started detached through the API, seen running in its
status, refused a second start (409), stopped through the API, and ended."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from node_helpers import Node, nodes

from tui.autotune.status import holder_alive

pytestmark = [pytest.mark.timeout(150)]

OPTIONS: dict[str, Any] = {
    "knob": ["max_mamba_cache_size=80,120"],
    "gpu": 0,
    "window": 6,
    "max_window": 12,
    "warmup": 3.5,
    "interval": 0.5,
    "min_intervals": 6,
    "baseline": 2,
    "settle": 4,
    "timeout": 60,
    "release_timeout": 20,
    "term_timeout": 5,
    "wall": 300,
    "explore_gpu_seconds": 500,
    "max_regression": 0.9,
}
"""A short search (the CLI's options by their JSON names)."""


def api(node: Node) -> tuple[str, dict[str, str]]:
    token = node.token_file.read_text().strip()
    return f"http://{node.agent_address}/api/v1/autotune", {"authorization": f"Bearer {token}"}


def status_file(node: Node) -> Path:
    return node.root / "state" / "autotune" / "status.json"


def poll(
    get: Callable[[], dict[str, Any]], check: Callable[[dict[str, Any]], bool], timeout: float
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    doc: dict[str, Any] = {}
    while time.monotonic() < deadline:
        doc = get()
        if check(doc):
            return doc
        time.sleep(0.2)
    raise AssertionError(f"not reached in {timeout} s: {doc}")


def kill_search(node: Node) -> None:
    """Teardown: a search still alive (verified by pid and start time) is killed."""
    with contextlib.suppress(OSError, ValueError):
        doc = json.loads(status_file(node).read_text())
        if holder_alive(doc):
            os.kill(int(doc["pid"]), signal.SIGKILL)


def test_autotune_is_refused_without_token_and_read_only(tmp_path: Path) -> None:
    with nodes(tmp_path, count=1, gpus=2, agents=False) as (node,):
        node.start_readonly_agent()
        url, good = api(node)
        assert httpx.get(url, timeout=5).status_code == 401
        assert httpx.post(url, json={"action": "start"}, timeout=5).status_code == 401
        status = httpx.get(url, headers=good, timeout=5)
        assert status.status_code == 200 and status.json()["running"] is False
        for action in ("start", "pause", "resume", "stop"):
            answer = httpx.post(url, json={"action": action}, headers=good, timeout=5)
            assert answer.status_code == 403, action
            assert "read-only" in answer.json()["error"]
        assert not status_file(node).exists(), "a refused start ran"


def test_autotune_started_and_stopped_through_the_agent(tmp_path: Path) -> None:
    with nodes(tmp_path, count=1, gpus=2) as (node,):
        url, good = api(node)
        bad = httpx.post(
            url, json={"action": "start", "options": {"window": -1}}, headers=good, timeout=5
        )
        assert bad.status_code == 400 and "--window" in bad.json()["error"]
        assert "\n" not in bad.json()["error"]
        unknown = {"action": "start", "options": {"colour": "red"}}
        bad = httpx.post(url, json=unknown, headers=good, timeout=5)
        assert bad.status_code == 400 and bad.json()["error"].startswith("options.colour:")
        nothing = httpx.post(url, json={"action": "stop"}, headers=good, timeout=5)
        assert nothing.status_code == 409 and nothing.json()["error"] == "no search is running"
        assert not status_file(node).exists(), "a refused start ran"

        def get() -> dict[str, Any]:
            answer = httpx.get(url, headers=good, timeout=5)
            assert answer.status_code == 200
            doc: dict[str, Any] = answer.json()
            return doc

        try:
            started = httpx.post(
                url, json={"action": "start", "options": OPTIONS}, headers=good, timeout=45
            )
            assert started.status_code == 202, started.text
            pid = started.json()["pid"]
            doc = poll(get, lambda d: d["running"] and d["status"]["pid"] == pid, 20)
            again = httpx.post(url, json={"action": "start"}, headers=good, timeout=5)
            assert again.status_code == 409 and f"pid {pid}" in again.json()["error"]
            stop = httpx.post(url, json={"action": "stop"}, headers=good, timeout=5)
            assert stop.status_code == 200 and stop.json() == {"action": "stop", "pid": pid}
            doc = poll(get, lambda d: not d["running"], 90)
        finally:
            kill_search(node)
        assert doc["status"]["phase"] == "stopped", doc["status"]
        # The node's fleet is back on its profile: the search stopped cleanly.
        states = json.loads((node.root / "state" / "fleet_state.json").read_text())
        assert {s["current"]["name"] for s in states["gpus"].values()} == {"node-base"}

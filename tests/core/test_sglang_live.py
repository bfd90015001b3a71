"""``tui.sglang.releases`` and ``auto`` against a live SGLang server (GPU machine only).

Marked ``gpu`` and skipped unless ``GPUFLEET_LIVE_SGLANG`` names the server (``127.0.0.1:30000``;
loopback only). Optional: ``GPUFLEET_LIVE_SGLANG_LOG`` (its log file), and
``GPUFLEET_LIVE_SGLANG_PYTHON`` with ``GPUFLEET_LIVE_SGLANG_PYTHONPATH`` (the interpreter and path
it was launched with, for ``auto``). Against the bundle's SGLang 0.5.17 (``serve.sh``)::

    GPUFLEET_LIVE_SGLANG=127.0.0.1:30000 GPUFLEET_LIVE_SGLANG_LOG=/tmp/sgl.log \\
    GPUFLEET_LIVE_SGLANG_PYTHON=/opt/torch/.venv/bin/python3 \\
    GPUFLEET_LIVE_SGLANG_PYTHONPATH=/tmp/site \\
    python -m pytest -q -p no:xdist -m gpu tests/core/test_sglang_live.py
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import httpx
import pytest

from tui.logs import events as ev
from tui.logs.parser import parse_line
from tui.profiles.sglang_release import installed_release, served_release
from tui.servers.payloads import parse_server_info
from tui.sglang import releases
from tui.sglang.flagtable.table import known_versions

pytestmark = pytest.mark.gpu

LIVE = os.environ.get("GPUFLEET_LIVE_SGLANG", "")


@pytest.fixture(scope="module")
def server() -> tuple[str, int]:
    if not LIVE:
        pytest.skip("GPUFLEET_LIVE_SGLANG is not set (a live SGLang server, host:port)")
    host, _, port = LIVE.rpartition(":")
    assert host in ("127.0.0.1", "localhost"), "loopback servers only"
    return "127.0.0.1", int(port)


@pytest.fixture(scope="module")
def facts(server: tuple[str, int]) -> releases.Release:
    found = served_release(server[0], [server[1]], budget_s=30.0)
    assert found is not None, "the server reports no version on /server_info"
    assert found[1] in known_versions(), found
    return releases.release(found[1])


def _get(server: tuple[str, int], path: str, timeout: float = 30.0) -> httpx.Response:
    return httpx.get(f"http://{server[0]}:{server[1]}{path}", timeout=timeout)


def test_auto_reads_the_interpreter_the_server_runs(facts: releases.Release) -> None:
    python = os.environ.get("GPUFLEET_LIVE_SGLANG_PYTHON")
    if not python:
        pytest.skip("GPUFLEET_LIVE_SGLANG_PYTHON is not set")
    env = dict(os.environ)
    if os.environ.get("GPUFLEET_LIVE_SGLANG_PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["GPUFLEET_LIVE_SGLANG_PYTHONPATH"]
    started = time.monotonic()
    assert installed_release(python, env) == facts.version
    assert time.monotonic() - started < 10  # SGLang's __init__ (PyTorch) was not run


def test_endpoints_are_as_claimed(server: tuple[str, int], facts: releases.Release) -> None:
    assert (_get(server, "/ready").status_code != 404) is facts.ready_endpoint
    assert (_get(server, "/get_load").status_code != 404) is facts.get_load_endpoint
    assert _get(server, "/v1/loads").status_code == 200
    body = _get(server, "/server_info").json()
    assert body["version"] == facts.version and isinstance(body["internal_states"], list)
    assert ("frontend" in body) is facts.server_info_frontend
    info = parse_server_info(body)
    assert info.max_running_effective is not None  # effective_max_running_requests_per_dp
    started = time.monotonic()
    assert _get(server, "/health").status_code == 200
    if facts.health_generates and not os.environ.get("SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION"):
        assert time.monotonic() - started >= 0.9  # it generated a token


def test_log_lines_are_as_claimed(facts: releases.Release) -> None:
    path = os.environ.get("GPUFLEET_LIVE_SGLANG_LOG")
    if not path:
        pytest.skip("GPUFLEET_LIVE_SGLANG_LOG is not set")
    events = [
        e
        for n, line in enumerate(Path(path).read_text().splitlines())
        if (e := parse_line(line, n + 1))
    ]
    kinds = {e.kind for e in events}
    assert ev.READY in kinds and ev.POOL in kinds
    kv = [e for e in events if e.kind == ev.KV_CACHE]
    assert kv and all(("dtype" in e.fields) is facts.kv_line_dtype for e in kv)
    for event in (e for e in events if e.kind == ev.GRAPH_CAPTURE):
        claimed = facts.graph_begin_bs if event.get("stage") == "begin" else facts.graph_end_bs
        assert ("num_bs" in event.fields) is claimed, event.text

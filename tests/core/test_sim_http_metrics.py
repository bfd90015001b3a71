"""The simulator's HTTP request counters (``--enable-metrics``), as SGLang 0.5.17 and 0.5.23 keep
them: a request counts when it arrives, a draining server's too (both builds keep accepting
``/generate`` after a SIGTERM to the main pid: only ``/health`` and ``/ready`` answer 503)."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import httpx
import pytest
from real0517_helpers import REAL, running_0517
from sim_helpers import running_sim, wait_until

from tui.servers.payloads import parse_request_counts


def _long_request(url: str, outcomes: list[int | str], tokens: int = 400) -> threading.Thread:
    def one() -> None:
        body = {"text": "x", "sampling_params": {"max_new_tokens": tokens, "ignore_eos": True}}
        try:
            outcomes.append(httpx.post(url + "/generate", json=body, timeout=60).status_code)
        except httpx.HTTPError as exc:
            outcomes.append(type(exc).__name__)

    thread = threading.Thread(target=one)
    thread.start()
    return thread


def _health(url: str) -> int:
    try:
        return httpx.get(url + "/health", timeout=5).status_code
    except httpx.HTTPError:
        return 0


def test_the_real_0517_exposition_is_read_by_endpoint() -> None:
    """The recorded server: 14 /generate arrived, 12 active (the /metrics read itself is 1)."""
    counts = parse_request_counts((REAL / "base" / "metrics.txt").read_text())
    assert counts.arrived == 15  # 14 /generate + 1 /v1/chat/completions
    assert counts.active == 12


@pytest.mark.parametrize("build", ["0.5.17", "0.5.23"])
def test_requests_arriving_during_a_drain_are_accepted_and_counted(
    tmp_path: Path, build: str
) -> None:
    outcomes: list[int | str] = []
    if build == "0.5.17":
        context = running_0517("base", tmp_path, speed=5.0)
    else:
        context = running_sim(
            ["--sim-speed", "5", "--sim-startup-seconds", "1", "--enable-metrics"], tmp_path
        )
    with context as sim:
        assert wait_until(lambda: _health(sim.url) == 200, 60), sim.log()[-2000:]
        before = parse_request_counts(httpx.get(sim.url + "/metrics").text)
        # ~10 s at speed 5 (400 tokens took 1.4 s): it must still run when the late one
        # arrives, however slow the loaded machine is between the SIGTERM and that request
        # (0.5.17's watchdog ends a drain with nothing in flight at its next look)
        first = _long_request(sim.url, outcomes, tokens=3000)
        assert wait_until(
            lambda: parse_request_counts(httpx.get(sim.url + "/metrics").text).active == 1, 20
        )
        os.kill(sim.proc.pid, signal.SIGTERM)  # the main pid: a drain
        assert sim.wait_log("SIGTERM received", 20), sim.log()[-2000:]
        assert _health(sim.url) == 503
        late = _long_request(sim.url, outcomes)  # a client that does not read /health
        assert wait_until(
            lambda: parse_request_counts(httpx.get(sim.url + "/metrics").text).active == 2, 20
        ), sim.log()[-2000:]
        during = parse_request_counts(httpx.get(sim.url + "/metrics").text)
        assert during.arrived == (before.arrived or 0) + 2
        first.join(60)
        late.join(60)
        assert sim.proc.wait(60) is not None
    assert outcomes == [200, 200]  # the drain waited for the late one too

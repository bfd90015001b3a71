"""The probe and the monitor on a server shaped like the real SGLang 0.5.17 (``gpufleet sim
--sim-build 0.5.17``, the recorded ``base`` scenario's flags; its ``/server_info``, ``/metrics``
and ``/get_load`` shaped as the real one's): no ``/ready``, so readiness is
``/health`` (a one-token generation, >= 1 s); a drain answers 503 at once and reads as STOPPING;
its exit -9 after the drain reads as STOPPED, not FAILED; the children die with the main
process, its multiprocessing resource tracker included."""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import threading
from pathlib import Path

import httpx
import psutil
import pytest
from fleet_helpers import first_state, poll_until, sim_monitor
from real0517_helpers import REAL, running_0517
from sim_helpers import SimProcess

from tui import paths
from tui.fleet.snapshot import ServerState
from tui.fleet.spec import ServerSpec
from tui.servers.probe import ProbeStatus, ServerProbe


def _long_requests(
    sim: SimProcess, count: int, outcomes: list[int | str]
) -> list[threading.Thread]:
    def one() -> None:
        body = {"text": "x", "sampling_params": {"max_new_tokens": 500, "ignore_eos": True}}
        try:
            outcomes.append(httpx.post(sim.url + "/generate", json=body, timeout=60).status_code)
        except httpx.HTTPError as exc:
            outcomes.append(type(exc).__name__)

    threads = [threading.Thread(target=one) for _ in range(count)]
    for thread in threads:
        thread.start()
    return threads


def _summary_value(log: str, key: str) -> int:
    line = re.search(r"^.*\bmax_total_num_tokens=\d+.*$", log, re.M)
    found = re.search(rf"\b{key}=(\d+)", line.group(0)) if line else None
    assert found, log[-2000:]
    return int(found.group(1))


async def test_the_probe_reads_a_0517_server(tmp_path: Path) -> None:
    # --sim-speed 5: 500 tokens take ~2 s, the drain's 5 s checks 1 s.
    with running_0517("base", tmp_path, speed=5.0) as sim:
        assert sim.wait_log("fired up and ready to roll", 30), sim.log()[-2000:]
        async with httpx.AsyncClient() as client:
            probe = ServerProbe(client, sim.port, timeout=0.8)
            ready = await probe.readiness()
            # No /ready (404, remembered): /health, SGLang's one-token generation, >= 1 s.
            assert (ready.status, ready.http_status, ready.endpoint) == (
                ProbeStatus.READY,
                200,
                "/health",
            )
            assert ready.latency_s >= 0.9
            again = await probe.readiness()
            assert again.status is ProbeStatus.READY
            assert sim.log().count('"GET /ready HTTP/1.1" 404') == 1
            info = await probe.server_info()
            log = sim.log()
            assert info is not None and info.version == "0.5.17"
            assert info.max_running_requested == 16
            assert info.max_running_effective == _summary_value(log, "max_running_requests")
            assert info.max_total_num_tokens == _summary_value(log, "max_total_num_tokens")
            assert info.max_mamba_cache_size == 64
            load = await probe.load()
            assert load is not None and load.source == "/metrics" and load.accept_len is None
            _assert_real_shapes(sim)
            outcomes: list[int | str] = []
            threads = _long_requests(sim, 4, outcomes)
            assert sim.wait_log(r"Decode batch, #running-req: 4", 20)
            os.kill(sim.proc.pid, signal.SIGTERM)
            assert sim.wait_log("SIGTERM received", 10)
            draining = await probe.readiness()
            # 503 at once during the drain: the handler answers before any generation.
            assert (draining.status, draining.http_status) == (ProbeStatus.UP, 503)
            assert draining.latency_s < 0.5
        assert sim.proc.wait(60) == -9  # kill_process_tree of itself after the drain
        for thread in threads:
            thread.join(60)
        assert outcomes == [200] * 4  # nothing lost


def _families(body: str) -> set[str]:
    return {line.split("{")[0].split(" ")[0] for line in body.splitlines() if line[:1] != "#"}


def _assert_real_shapes(sim: SimProcess) -> None:
    """/server_info, /metrics and /get_load have what the real base server's had."""
    real = json.loads((REAL / "base" / "server_info.json").read_text())
    body = httpx.get(sim.url + "/server_info", timeout=10).json()
    assert body["version"] == real["version"] == "0.5.17"
    for key in ("status", "max_total_num_tokens", "max_req_input_len", "startup_time"):
        assert key in body and key in real
    assert body["kv_events"] is None and "launch_command" not in body and "frontend" not in body
    internal, real_internal = body["internal_states"][0], real["internal_states"][0]
    for key in ("effective_max_running_requests_per_dp", "last_gen_throughput", "startup_time"):
        assert key in internal and key in real_internal
    assert internal["memory_usage"].keys() == real_internal["memory_usage"].keys()
    assert internal["memory_usage"]["graph"].keys() == real_internal["memory_usage"]["graph"].keys()
    assert "world_size" not in internal and "avg_spec_accept_length" not in internal
    assert body["max_mamba_cache_size"] == internal["max_mamba_cache_size"] == 64
    metrics = httpx.get(sim.url + "/metrics", timeout=10).text
    assert _families(metrics) <= _families((REAL / "base" / "metrics.txt").read_text())
    rows = httpx.get(sim.url + "/get_load", timeout=10).json()
    real_rows = json.loads((REAL / "base" / "get_load.json").read_text())
    assert [row.keys() for row in rows] == [row.keys() for row in real_rows]


async def test_the_monitor_follows_a_0517_server_through_its_drain(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(paths.STATE_ENV, str(tmp_path))  # the simulated GPUs the server uses
    with running_0517("base", tmp_path, speed=5.0) as sim:
        spec = ServerSpec(0, sim.port, log_path=str(sim.log_path))
        async with sim_monitor(spec) as monitor:
            snap = await poll_until(monitor, lambda s: first_state(s) is ServerState.READY)
            server = snap.panels[0].server
            assert server is not None and server.max_running_requested == 16
            outcomes: list[int | str] = []
            threads = _long_requests(sim, 4, outcomes)
            assert sim.wait_log(r"Decode batch, #running-req: 4", 20)
            os.kill(sim.proc.pid, signal.SIGTERM)
            # Nobody told the monitor: the log's SIGTERM line and /health's 503 say it.
            snap = await poll_until(monitor, lambda s: first_state(s) is ServerState.STOPPING, 20)
            assert sim.proc.wait(60) == -9
            snap = await poll_until(monitor, lambda s: first_state(s) is ServerState.STOPPED, 20)
            server = snap.panels[0].server
            assert server is not None and server.last_error is None
            for thread in threads:
                thread.join(60)
            assert outcomes == [200] * 4


def test_a_sigkilled_0517_server_leaves_no_child(tmp_path: Path) -> None:
    """SIGKILL of the main pid: the scheduler and the detokenizer die with it (PDEATHSIG), the
    resource tracker at its pipe's end, as the recorded ``kill`` scenario's did."""
    with running_0517("kill", tmp_path) as sim:
        assert sim.wait_log("fired up and ready to roll", 30)
        children = psutil.Process(sim.proc.pid).children()
        names = sorted(" ".join(c.cmdline()) for c in children)
        assert len(names) == 3, names
        assert names[0].startswith(sys.executable)
        tracker = r" -B -c from multiprocessing\.resource_tracker import main;main\(\d+\)$"
        assert re.search(tracker, names[0]), names[0]
        assert [n.split()[0] for n in names[1:]] == ["sglang::detokenizer", "sglang::scheduler"]
        os.kill(sim.proc.pid, signal.SIGKILL)
        assert sim.proc.wait(10) == -9
        _, alive = psutil.wait_procs(children, timeout=5)
        alive = [p for p in alive if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        assert not alive, alive

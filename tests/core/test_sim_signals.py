"""Signals on a real ``gpufleet sim`` under load, against SGLang 0.5.23's semantics.

``srt/managers/tokenizer_manager.py`` (sigterm_handler, sigterm_watchdog), ``srt/utils/
watchdog.py`` (SubprocessWatchdog), ``srt/entrypoints/engine.py`` (launch-phase SIGQUIT),
``srt/utils/common.py`` (kill_process_tree, kill_itself_when_parent_died): a group SIGTERM kills
the children, the watchdog SIGQUITs the main process and every request in flight is lost (exit
137); a SIGTERM to the main pid drains every request (exit 0), and so does gpufleet's own stop.
"""

from __future__ import annotations

import os
import re
import signal
import sys
from pathlib import Path

import httpx
import psutil
from sim_helpers import ROOT, Clients, in_flight, running_sim, sim_env, wait_until

from bench.ports import free_port
from tui.control.launch import launch
from tui.control.stop import stop
from tui.gpu.sim_records import live_processes

# 20x speed: a 6,000-token request decodes for ~3 s of wall time; startup takes 1 s.
FAST = ["--sim-speed", "20", "--sim-startup-seconds", "1", "--speculative-algorithm", "EAGLE"]
REQUESTS = 10


def _gone(pids: list[int]) -> bool:
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                return False
        except psutil.NoSuchProcess:
            continue
    return True


def test_group_sigterm_loses_every_request_in_flight_and_exits_137(tmp_path: Path) -> None:
    with running_sim(FAST, tmp_path) as sim:
        children = [c.pid for c in psutil.Process(sim.proc.pid).children()]
        clients = Clients(sim.url, REQUESTS, max_tokens=30_000)
        assert wait_until(lambda: in_flight(sim.url) >= REQUESTS, 20)
        os.killpg(sim.proc.pid, signal.SIGTERM)  # the whole group, as `kill -TERM -PGID`
        assert sim.wait_exit(20) == -signal.SIGKILL  # it SIGKILLed itself: shell status 137
        results = clients.join(30)
        log = sim.log()
    assert len(results) == REQUESTS and 200 not in results, results
    crash = re.search(
        r"Subprocess scheduler_0 \(pid=(\d+)\) crashed with exit code -15\. "
        r"Triggering SIGQUIT for cleanup\.\.\.",
        log,
    )
    assert crash is not None and int(crash.group(1)) in children
    assert log.index(crash.group(0)) < log.index(
        "SIGQUIT received. signum=None, frame=None. It usually means one child failed."
    )
    # The drain may have looked once before the watchdog's tick; it never got to finish.
    assert "Remaining number of requests 0" not in log
    assert wait_until(lambda: _gone(children), 10)
    assert live_processes(tmp_path / "simgpu", 0) == []


def test_sigterm_to_the_main_pid_drains_every_request_and_exits_0(tmp_path: Path) -> None:
    with running_sim(FAST, tmp_path) as sim:
        clients = Clients(sim.url, REQUESTS, max_tokens=6000)
        assert wait_until(lambda: in_flight(sim.url) >= REQUESTS, 20)
        os.kill(sim.proc.pid, signal.SIGTERM)
        assert wait_until(lambda: "Draining requests and shutting down" in sim.log(), 5)
        # Draining: the health endpoints answer 503 at once, /generate still serves.
        assert httpx.get(sim.url + "/ready", timeout=2).status_code == 503
        assert httpx.get(sim.url + "/health", timeout=2).status_code == 503
        clients.add(1)  # a request that arrives during the drain is served too
        assert sim.wait_exit(30) == 0
        results = clients.join(30)
        log = sim.log()
    assert results == [200] * (REQUESTS + 1), results
    assert "SIGTERM received. signum=None frame=None. Draining requests and shutting down..." in log
    remaining = [int(n) for n in re.findall(r"Remaining number of requests (\d+)\.", log)]
    assert remaining[0] > 0 and remaining[-1] == 0
    assert "Health check request received during shutdown. Returning 503." in log
    assert "Subprocess scheduler_0" not in log
    tail = log[log.index("Remaining number of requests 0") :]
    assert "include_parent=False" in tail and "Finished server process" in tail
    assert live_processes(tmp_path / "simgpu", 0) == []


def test_gpufleets_own_stop_drains_every_request(tmp_path: Path) -> None:
    port = free_port()
    argv = [sys.executable, "-m", "tui", "sim", "--host", "127.0.0.1", "--port", str(port)]
    process = launch(
        [*argv, *FAST],
        sim_env(tmp_path),
        tmp_path / "sim.log",
        ROOT,
        gpu=0,
        port=port,
        record=False,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        assert wait_until(lambda: in_flight(url) == 0 and _ready(url), 30)
        clients = Clients(url, REQUESTS, max_tokens=6000)
        assert wait_until(lambda: in_flight(url) >= REQUESTS, 20)
        result = stop(process.record, forget=False)  # default mode: drain
        results = clients.join(30)
    finally:
        if process.poll() is None:
            os.killpg(process.record.pgid, signal.SIGKILL)
        process.popen.wait(10)
    assert result.outcome == "drained", result
    assert process.popen.returncode == 0
    assert results == [200] * REQUESTS, results


def _ready(url: str) -> bool:
    try:
        return httpx.get(url + "/ready", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def test_sigterm_before_the_first_request_kills_at_once(tmp_path: Path) -> None:
    """No handler is installed before the first request: Python's default, the children follow."""
    with running_sim(
        [*FAST[:2], "--sim-startup-seconds", "20"], tmp_path, wait_healthy=False
    ) as sim:
        assert wait_until(lambda: "Load weight begin" in sim.log(), 20)
        children = [c.pid for c in psutil.Process(sim.proc.pid).children()]
        assert len(children) == 2
        os.kill(sim.proc.pid, signal.SIGTERM)
        assert sim.wait_exit(5) == -signal.SIGTERM
        assert wait_until(lambda: _gone(children), 10)  # PR_SET_PDEATHSIG


def test_sigint_stops_uvicorn_then_ends_in_keyboard_interrupt(tmp_path: Path) -> None:
    with running_sim(FAST, tmp_path) as sim:
        children = [c.pid for c in psutil.Process(sim.proc.pid).children()]
        os.kill(sim.proc.pid, signal.SIGINT)
        assert sim.wait_exit(20) == -signal.SIGINT
        log = sim.log()
    assert "Shutting down" in log and log.rstrip().endswith("KeyboardInterrupt")
    assert wait_until(lambda: _gone(children), 10)


def test_sigquit_kills_the_tree(tmp_path: Path) -> None:
    with running_sim(FAST, tmp_path) as sim:
        httpx.get(sim.url + "/ready")
        os.kill(sim.proc.pid, signal.SIGQUIT)
        assert sim.wait_exit(20) == -signal.SIGKILL
        log = sim.log()
    assert "SIGQUIT received. signum=None, frame=None. It usually means one child failed." in log


def test_children_carry_sglangs_names_and_stay_small(tmp_path: Path) -> None:
    with running_sim(FAST, tmp_path) as sim:
        children = {c.name(): c for c in psutil.Process(sim.proc.pid).children()}
        assert set(children) == {"sglang::scheduler", "sglang::detokenizer"}
        before = {n: sum(c.cpu_times()[:2]) for n, c in children.items()}
        wait_until(lambda: False, 1.0)  # one idle second
        for name, child in children.items():
            assert child.memory_info().rss < 40 * 2**20, (name, child.memory_info())
            assert sum(child.cpu_times()[:2]) - before[name] < 0.05, name  # blocked on a pipe


def test_a_request_whose_client_went_away_is_aborted_and_no_longer_holds_a_drain(
    tmp_path: Path,
) -> None:
    # SGLang 0.5.23 (tokenizer_manager._stream_one_response): between waits of
    # SGLANG_REQUEST_STATE_WAIT_TIMEOUT it aborts a request whose client disconnected. Without
    # it a stopped pipeline's requests would keep a drain waiting until they finished.
    env = {"SGLANG_REQUEST_STATE_WAIT_TIMEOUT": "0.5"}
    with running_sim(FAST, tmp_path, env=env) as sim:
        clients = Clients(sim.url, REQUESTS, max_tokens=30_000, timeout=1.0)
        assert wait_until(lambda: in_flight(sim.url) >= REQUESTS, 20)
        results = clients.join(10)  # each client gives up after 1 s and closes its socket
        assert results == ["ReadTimeout"] * REQUESTS, results
        assert wait_until(lambda: in_flight(sim.url) == 0, 5), in_flight(sim.url)
        os.kill(sim.proc.pid, signal.SIGTERM)
        assert sim.wait_exit(15) == 0  # nothing left to drain: the first 5 s check exits
        log = sim.log()
    aborted = re.findall(
        r"\[http_server\] Error: Request is disconnected from the client side \(type 1\)\. "
        r"Abort request obj\.rid='[0-9a-f]+'",
        log,
    )
    assert len(aborted) == REQUESTS

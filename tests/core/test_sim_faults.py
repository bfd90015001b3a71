"""The simulated server's health handler and ``--sim-fault``, on real processes over loopback.

The handler is ``srt/entrypoints/http_server.py``'s ``health_generate``: a healthy answer takes
at least one second, a scheduler that answers nothing fails it after SGLANG_HEALTH_CHECK_TIMEOUT
with SGLang's line and marks the server UnHealthy (``/ready`` 503).
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from sim_helpers import ROOT, Clients, in_flight, running_sim, sim_env, wait_until

from bench.ports import free_port
from tui.servers.probe import parse_metrics

FAST = ["--sim-speed", "20", "--sim-startup-seconds", "1", "--enable-metrics"]


def _timed_get(url: str, timeout: float = 25.0) -> tuple[int, float]:
    started = time.monotonic()
    status = httpx.get(url, timeout=timeout).status_code
    return status, time.monotonic() - started


def _counters(url: str) -> tuple[float, ...]:
    text = httpx.get(url + "/metrics", timeout=2).text
    realtime = sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("sglang:realtime_tokens_total{")
    )
    load = parse_metrics(text)
    return realtime, float(load.running or 0)


def test_health_takes_at_least_a_second_idle_and_busy(tmp_path: Path) -> None:
    with running_sim(FAST, tmp_path) as sim:
        for path in ("/health", "/health_generate"):
            status, took = _timed_get(sim.url + path)
            assert status == 200 and 1.0 <= took < 2.0, (path, took)  # one generation, not two
        clients = Clients(sim.url, 8, max_tokens=20_000)
        assert wait_until(lambda: in_flight(sim.url) >= 8, 20)
        with ThreadPoolExecutor(1) as pool:
            health = pool.submit(_timed_get, sim.url + "/health")
            ready = _timed_get(sim.url + "/ready", 10)
            status, took = health.result()
        # Absorbed by the busy batch (not behind its 20,000-token answers), and /ready is the
        # cheap one: sent after it, answered sooner (compared, not timed: under two busy cores
        # a loopback round trip alone took 0.8 s).
        assert status == 200 and 1.0 <= took < 3.0, took
        assert ready[0] == 200 and ready[1] < took, (ready, took)
        assert clients.results == []


def test_health_endpoint_generation_can_be_switched_off(tmp_path: Path) -> None:
    env = {"SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION": "false"}
    with running_sim(FAST, tmp_path, env=env) as sim:
        status, took = _timed_get(sim.url + "/health")
        assert status == 200 and took < 1.0  # no generation (one takes >= 1 s)
        status, took = _timed_get(sim.url + "/health_generate")
        assert status == 200 and took >= 1.0


def test_health_bypass_answers_at_once_and_a_bad_boolean_keeps_its_default(
    tmp_path: Path,
) -> None:
    """``SGLANG_DIAG_BYPASS_HEALTH_GENERATE`` answers both paths 200 without a generation; an
    EnvBool that is no boolean warns and keeps its default (the server starts, as SGLang's
    ``EnvField.get`` does), here the generating /health."""
    with running_sim(FAST, tmp_path, env={"SGLANG_DIAG_BYPASS_HEALTH_GENERATE": "Yes"}) as sim:
        for path in ("/health", "/health_generate"):
            status, took = _timed_get(sim.url + path)
            assert status == 200 and took < 1.0, path
    env = {"SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION": "maybe"}
    with running_sim(FAST, tmp_path, env=env) as sim:
        status, took = _timed_get(sim.url + "/health")
        assert status == 200 and took >= 1.0  # the default: a generation
        assert (
            'Invalid value for SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION: "maybe" is not a valid '
            'boolean value, using default "True"' in sim.log()
        )


def test_hung_scheduler_fails_health_after_the_timeout(tmp_path: Path) -> None:
    env = {"SGLANG_HEALTH_CHECK_TIMEOUT": "2"}
    with running_sim([*FAST, "--sim-fault", "hung:20"], tmp_path, env=env) as sim:
        Clients(sim.url, 4, max_tokens=50_000)
        assert wait_until(lambda: "Decode batch" in sim.log(), 10)
        wait_until(lambda: False, 1.5)  # the fault fires 1 s after readiness
        assert httpx.get(sim.url + "/ready", timeout=2).status_code == 200  # nothing checked yet
        status, took = _timed_get(sim.url + "/health")
        assert status == 503 and 2.0 <= took < 4.0  # the timeout, not the fault's 20 s
        log = sim.log()
        assert re.search(
            r"Health check failed\. Server couldn't get a response from detokenizer for last 2 "
            r"seconds\. tic start time: \d\d:\d\d:\d\d\. last_heartbeat time: \d\d:\d\d:\d\d",
            log,
        )
        assert httpx.get(sim.url + "/ready", timeout=2).status_code == 503  # UnHealthy


def test_stuck_scheduler_keeps_health_200_but_makes_no_progress(tmp_path: Path) -> None:
    with running_sim([*FAST, "--sim-fault", "stuck:20"], tmp_path) as sim:
        Clients(sim.url, 6, max_tokens=50_000)
        assert wait_until(lambda: "Decode batch" in sim.log(), 10)
        wait_until(lambda: False, 1.5)
        first = _counters(sim.url)
        lines = sim.log().count("Decode batch")
        wait_until(lambda: False, 1.0)
        # Running, nothing moves (all six when the machine is idle; under load the scheduler may
        # stop before the last arrive, and those wait in the queue).
        assert _counters(sim.url) == first and first[1] >= 1
        assert sim.log().count("Decode batch") == lines
        assert _timed_get(sim.url + "/health")[0] == 200


def test_crash_mid_run_dies_like_sglang(tmp_path: Path) -> None:
    with running_sim([*FAST, "--sim-fault", "crash:40"], tmp_path) as sim:
        clients = Clients(sim.url, 8, max_tokens=50_000)
        assert sim.wait_exit(20) == -signal.SIGKILL
        results = clients.join(20)
        log = sim.log()
    assert 200 not in results
    chain = [
        "Scheduler hit an exception: Traceback (most recent call last):",
        "torch.AcceleratorError: CUDA error: an illegal memory access was encountered",
        "SIGQUIT received. signum=None, frame=None. It usually means one child failed.",
        "include_parent=True",
    ]
    assert [log.index(text) for text in chain] == sorted(log.index(text) for text in chain)


def test_decode_oom_prints_the_pressure_line_then_the_crash(tmp_path: Path) -> None:
    with running_sim([*FAST, "--sim-fault", "decode-oom:40"], tmp_path) as sim:
        Clients(sim.url, 4, max_tokens=50_000)
        assert sim.wait_exit(20) == -signal.SIGKILL
        log = sim.log()
    bare = log.index("] Decode out of memory. Try to lower your batch size.")
    raised = log.index("RuntimeError: Decode out of memory. Try to lower your batch size.")
    assert bare < log.index("Scheduler hit an exception") < raised


def test_retraction_is_logged_and_counted(tmp_path: Path) -> None:
    with running_sim([*FAST, "--sim-fault", "retract:20:3"], tmp_path) as sim:
        Clients(sim.url, 6, max_tokens=50_000)
        assert wait_until(lambda: "Retract requests" in sim.log(), 30)
        metrics = httpx.get(sim.url + "/metrics").text
        assert re.search(r"sglang:num_retracted_requests_total\{[^}]*\} 3\.0", metrics)
        assert wait_until(lambda: "#retracted_reqs: 3, #new_tokens_gained: " in sim.log(), 15)
        assert httpx.get(sim.url + "/ready").status_code == 200


def test_slow_health_answers_at_the_first_check_after_the_delay(tmp_path: Path) -> None:
    with running_sim([*FAST, "--sim-fault", "slow-health:2.3"], tmp_path) as sim:
        status, took = _timed_get(sim.url + "/health")
    assert status == 200 and 3.0 <= took < 4.0  # the first check after, not the next


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["--sim-fault", "melt:3"], {}, "unknown fault 'melt'"),
        (["--sim-fault", "retract:3"], {}, "expected retract:AT:N"),
        (["--sim-fault", "slow:3"], {}, "expected slow:AT:F"),
        (["--sim-fault", "slow:3:0.5"], {}, "F in [1, 100]"),
        ([], {"SGLANG_HEALTH_CHECK_TIMEOUT": "0.5"}, "SGLANG_HEALTH_CHECK_TIMEOUT='0.5'"),
    ],
)
def test_bad_fault_or_environment_is_one_clear_line(
    tmp_path: Path, args: list[str], env: dict[str, str], message: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tui", "sim", "--port", str(free_port()), *args],
        capture_output=True,
        text=True,
        env={**sim_env(tmp_path), **env},
        cwd=ROOT,
        timeout=30,
    )
    assert done.returncode == 2
    assert message in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "simgpu").exists() or not any((tmp_path / "simgpu").rglob("proc-*"))

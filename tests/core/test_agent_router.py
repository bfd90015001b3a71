"""The job through SGLang's own router: a real ``sglang-router`` process in front of the simulated
servers of two nodes, its workers registered from the nodes' agents; one server killed (SIGKILL,
its in-flight requests lost) and relaunched through its agent mid-job: every prompt is done
exactly once (by ``custom_id``), none missing, none duplicated."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from node_helpers import ROOT, Node, nodes

from bench.simfleet import free_ports

pytestmark = [pytest.mark.timeout(240)]

PROMPTS = 1500
SPEED = 2.0
"""The simulators' decoding speed: the job lasts ~20 s, past the kill, the removal and the
relaunch (at 60 the 1,500 prompts were done in 3 s, before the relaunched worker could rejoin);
startup is fixed at a second apart from it."""
MAX_TOKENS = 96
"""Each answer's length: with the dispatcher's lean HTTP path the client no longer limits the
rate, the servers' decoding does (24 tokens: the job was done in 6 s, before the rejoin)."""


def _router_available() -> bool:
    try:
        import sglang_router  # noqa: F401
    except ImportError:
        return False
    return True


@contextmanager
def router(tmp: Path) -> Iterator[str]:
    """A real sglang-router on a free loopback port, no workers; stopped on exit.

    HF_ENDPOINT points at a closed loopback port: the router looks up each worker's tokenizer
    (its model path) on the Hugging Face hub; the test sends no traffic off the machine.
    """
    port, metrics = free_ports(2)
    env = dict(os.environ, HF_ENDPOINT="http://127.0.0.1:9", HF_HOME=str(tmp / "hf"))
    argv = [sys.executable, "-m", "sglang_router.launch_router", "--host", "127.0.0.1"]
    argv += ["--port", str(port), "--worker-urls", "--log-level", "warn"]
    # Its metrics on a free port too: the default 29000 is one port for every router on the
    # machine (another test's, or an operator's), and a second one panicked 'Address already in
    # use' and exited.
    argv += ["--prometheus-host", "127.0.0.1", "--prometheus-port", str(metrics)]
    argv += ["--health-check-interval-secs", "2", "--policy", "cache_aware"]
    log = (tmp / "router.log").open("wb")
    proc = subprocess.Popen(
        argv, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/workers", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None, (tmp / "router.log").read_text()
            time.sleep(0.2)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def registered(url: str) -> set[str]:
    """The router's workers' URLs."""
    workers = httpx.get(f"{url}/workers", timeout=5).json()["workers"]
    return {w["url"].rstrip("/") for w in workers}


def wait_until(
    check: Callable[[], object],
    timeout: float,
    what: str,
    detail: Callable[[], object] | None = None,
) -> None:
    """Poll ``check`` until true; on timeout fail with ``what`` and what ``detail()`` says."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    said = f": {detail()}" if callable(detail) else ""
    raise AssertionError(f"{what} not within {timeout:.0f} s{said}")


def status_of(path: Path) -> dict[str, Any]:
    """The job's status document as JSON reads it ({} before it is written)."""
    try:
        return dict(json.loads(path.read_text()))
    except (OSError, ValueError):
        return {}


@pytest.mark.skipif(not _router_available(), reason="sglang-router is not installed")
def test_job_through_the_router_survives_a_killed_server(tmp_path: Path) -> None:
    fleet = nodes(tmp_path, count=2, gpus=2, speed=SPEED, startup_s=1.0)
    with fleet as (n1, n2), router(tmp_path) as url:
        every = set(n1.urls + n2.urls)
        prompts = tmp_path / "prompts.jsonl"
        with prompts.open("w") as handle:
            for i in range(PROMPTS):
                # Distinct openings: cache-aware routing sends shared prefixes to one worker.
                opening = hashlib.sha256(str(i).encode()).hexdigest()[:12]
                body = {"model": "default", "prompt": f"{opening} story.", "max_tokens": MAX_TOKENS}
                request = {"custom_id": f"q-{i}", "method": "POST", "url": "/v1/completions"}
                handle.write(json.dumps({**request, "body": body}) + "\n")
        out, status = tmp_path / "out", tmp_path / "status.json"
        argv = [sys.executable, "-m", "tui", "generate", "--prompts", str(prompts)]
        argv += ["--out", str(out), "--status", str(status), "--router", url]
        argv += ["--agents", f"{n1.agent_address},{n2.agent_address}"]
        argv += ["--token-file", str(n1.token_file), "--per-server-inflight", "8"]
        argv += ["--flush-interval", "1", "--shard-size", "200", "--fleet-timeout", "60"]
        log = (tmp_path / "generate.log").open("wb")
        job = subprocess.Popen(argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=n1.env)
        try:
            # Every ready server of both nodes becomes a worker of the router.
            wait_until(lambda: registered(url) == every, 60, "all four servers registered")
            wait_until(lambda: int(status_of(status).get("done", 0)) >= 300, 90, "300 done")
            killed = _kill_server(n2, gpu=1)
            victim = n2.urls[1]
            # The killed server leaves the router's workers (its agent no longer shows it
            # ready); the job goes on through the three others.
            wait_until(lambda: victim not in registered(url), 30, "the dead worker removed")
            relaunch = httpx.post(
                f"http://{n2.agent_address}/api/v1/operations",
                json={"kind": "relaunch", "gpus": [1], "mode": "kill"},
                headers={"authorization": f"Bearer {n2.token_file.read_text().strip()}"},
                timeout=10,
            )
            assert relaunch.status_code == 202, relaunch.text
            operation = f"http://{n2.agent_address}{relaunch.json()['url']}"
            token = {"authorization": f"Bearer {n2.token_file.read_text().strip()}"}
            wait_until(
                lambda: victim in registered(url),
                60,
                "the relaunched worker back",
                lambda: (
                    f"job {status_of(status)}; relaunch "
                    + httpx.get(operation, headers=token, timeout=5).text[:2000]
                ),
            )
            assert job.wait(timeout=150) == 0, (tmp_path / "generate.log").read_text()
        finally:
            if job.poll() is None:
                job.send_signal(signal.SIGTERM)
                job.wait(timeout=20)
        ids: list[str] = []
        servers: set[str] = set()
        for shard in sorted(out.glob("shard-*.jsonl")):
            for line in shard.read_text().splitlines():
                record = json.loads(line)
                ids.append(record["custom_id"])
                servers.add(record["server"])
        assert len(ids) == len(set(ids)), "a prompt was written twice"
        assert set(ids) == {f"q-{i}" for i in range(PROMPTS)}, "a prompt is missing"
        assert servers == {url}, "every request went through the router"
        assert killed is not None
        served = _served_by(n1), _served_by(n2)
        assert sum(served[0]) > 0 and sum(served[1]) > 0, f"a node got nothing: {served}"
        assert served[1][1] > 0, f"the killed server had served nothing: {served}"


def _kill_server(node: Node, gpu: int) -> int | None:
    """SIGKILL the server of ``gpu`` on ``node`` (its process group: in-flight requests lost)."""
    records = json.loads((node.root / "state" / "fleet_state.json").read_text())
    entry = records["gpus"][str(gpu)]["server"]
    pid = int(entry["pid"])
    os.killpg(pid, signal.SIGKILL)
    return pid


def _served_by(node: Node) -> list[int]:
    """Completions each of the node's servers logged (from its log's request lines)."""
    counts = []
    for gpu in range(len(node.ports)):
        log = node.root / "logs" / f"sglang_gpu{gpu}.log"
        text = log.read_text(errors="replace") if log.exists() else ""
        counts.append(text.count("/v1/completions"))
    return counts

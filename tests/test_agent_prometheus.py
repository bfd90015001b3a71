"""Two agents on one machine (each its own simulated GPUs, ports and state), a real Prometheus
(Debian's ``prometheus``, installed by ``make test``) scraping them with the shipped scrape config
(``deploy/prometheus.yml``), and a series read back through its HTTP API by the console's
history reader (``tui.agent.history``)."""

from __future__ import annotations

import contextlib
import json
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from node_helpers import ROOT, nodes

from bench.simfleet import free_ports
from tui.agent.history import HistoryError, PrometheusHistory

pytestmark = [pytest.mark.timeout(180)]


@contextlib.contextmanager
def prometheus(tmp: Path, targets: list[str], token_file: Path) -> Iterator[str]:
    """Prometheus on a free loopback port with a temporary storage directory."""
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.skip("prometheus is not installed (make test installs Debian's)")
    conf = tmp / "prom"
    conf.mkdir()
    shutil.copy(ROOT / "deploy" / "prometheus.yml", conf / "prometheus.yml")
    shutil.copy(token_file, conf / "agent.token")
    (conf / "agents.json").write_text(json.dumps([{"targets": targets}]))
    port = free_ports(1)[0]
    argv = [binary, f"--config.file={conf / 'prometheus.yml'}"]
    argv += [f"--storage.tsdb.path={tmp / 'tsdb'}", f"--web.listen-address=127.0.0.1:{port}"]
    log = (tmp / "prometheus.log").open("wb")
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=conf)
    url = f"http://127.0.0.1:{port}"
    try:
        yield url
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def test_prometheus_scrapes_two_agents_and_the_history_reads_a_series(tmp_path: Path) -> None:
    with nodes(tmp_path, count=2, gpus=2) as (n1, n2):
        token = n1.token_file.read_text().strip()
        # The agents' own /metrics, with the token: per-GPU series with node, gpu and port.
        text = httpx.get(
            f"http://{n1.agent_address}/metrics",
            headers={"authorization": f"Bearer {token}"},
            timeout=5,
        ).text
        port = n1.ports[1]
        assert f'gpufleet_server_state{{gpu="1",node="n1",port="{port}",state="ready"}} 1.0' in text
        assert (
            f'gpufleet_server_profile_info{{gpu="1",node="n1",port="{port}",profile="node-base"}}'
            in text
        )
        assert "gpufleet_gpu_memory_used_bytes{" in text
        with prometheus(tmp_path, [n1.agent_address, n2.agent_address], n1.token_file) as url:
            history = PrometheusHistory(url)
            deadline = time.monotonic() + 90
            points: list[tuple[float, float]] = []
            while time.monotonic() < deadline:
                with contextlib.suppress(HistoryError):
                    now = time.time()
                    points = history.series(
                        "n2", 1, "gpufleet_server_max_running_requests_effective", now - 60, now, 1
                    )
                    up = httpx.get(f"{url}/api/v1/query", params={"query": "up"}, timeout=5)
                    targets = {
                        r["metric"]["instance"]: r["value"][1] for r in up.json()["data"]["result"]
                    }
                    if len(points) >= 3 and targets == {
                        n1.agent_address: "1",
                        n2.agent_address: "1",
                    }:
                        break
                time.sleep(1)
            assert len(points) >= 3, (tmp_path / "prometheus.log").read_text()[-2000:]
            # The effective max running requests SGLang's caps leave: 16 for the baseline.
            assert {value for _, value in points} == {16.0}
            assert targets == {n1.agent_address: "1", n2.agent_address: "1"}
            # A per-node series (no GPU): the agent's poll counter grows between scrapes.
            deadline = time.monotonic() + 30
            polls: list[tuple[float, float]] = []
            while time.monotonic() < deadline:
                now = time.time()
                polls = history.series("n1", None, "gpufleet_agent_polls_total", now - 60, now, 1)
                if polls and polls[-1][1] > polls[0][1]:
                    break
                time.sleep(1)
            assert polls and polls[-1][1] > polls[0][1], polls
            with pytest.raises(HistoryError, match="metric"):
                history.series("n1", 0, "up} or vector(1", now - 60, now, 1)

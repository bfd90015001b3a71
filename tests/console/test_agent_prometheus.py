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
from ui_helpers import pipeline_status

from bench.simfleet import free_ports
from tui.agent.history import LOOKBACK_S, HistoryError, PrometheusHistory
from tui.console_wiring import prometheus_chart
from tui.pipeline.status import write_status
from tui.ui.history.chart import RANGES
from tui.ui.pipeline.generation_pane import chart_data

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


def test_the_consoles_chart_reads_the_jobs_rate_from_prometheus(tmp_path: Path) -> None:
    """``gpufleet console --prometheus URL``: the generation pane's chart data comes from a real
    Prometheus scraping an agent whose job writes its status document."""
    status_path = tmp_path / "status.json"
    write_status(status_path, pipeline_status(updated_at=time.time(), tok_s=3456.0))
    with nodes(tmp_path, count=1, gpus=1, agents=False) as (node,):
        node.start_agent("--status", str(status_path))
        with prometheus(tmp_path, [node.agent_address], node.token_file) as url:
            chart = prometheus_chart(url)
            assert chart is not None
            deadline = time.monotonic() + 90
            data = None
            while time.monotonic() < deadline and data is None:
                with contextlib.suppress(HistoryError):
                    data = chart_data(chart, RANGES[0], time.time(), ())
                if data is None:
                    time.sleep(1)
            assert data is not None, (tmp_path / "prometheus.log").read_text()[-2000:]
            assert {value for _, value in data.points} == {3456.0}
            assert data.start <= data.points[0][0] <= data.end
            first = chart.first_time(None, "out_tok_s")  # to one step of the 120-day look back
            assert first is not None and abs(first - data.points[0][0]) <= LOOKBACK_S / 600
            assert chart.series(0, "out_tok_s", time.time() - 60) == []  # fleet series only
    with pytest.raises(ValueError, match="--prometheus="):
        prometheus_chart("ftp://example")
    broken = prometheus_chart("http://127.0.0.1:9")
    assert broken is not None
    with pytest.raises(HistoryError, match=r"prometheus http://127\.0\.0\.1:9"):
        broken.series(None, "out_tok_s", time.time() - 60)

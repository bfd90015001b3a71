"""The agent's ``/metrics`` of what the peers show, read back with prometheus_client's parser:
latency percentiles with their counts, pools, the draft, energy and tokens per joule, the GPU
that stands out, the alerts firing, the job's energy; and an agent that fires an alert for a
killed simulated server and serves it."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from sim_helpers import running_sim

from tui.agent.metrics import AgentCollector, AgentView
from tui.agent.observed_metrics import ObservedCollector
from tui.agent.server import Agent, AgentConfig
from tui.fleet.monitor import FleetMonitor
from tui.fleet.snapshot import ServerState
from tui.fleet.spec import FleetSpec, ServerSpec
from tui.gpu.simulated import SimulatedSource
from tui.ops.alerts.engine import AlertFired
from tui.ops.alerts.rules import AlertConfig, Rule
from tui.ops.service import FleetOps
from tui.pipeline.energy import JobEnergy

from .test_ops_status_observed import snapshot


def scrape(view: AgentView) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ObservedCollector(lambda: view))
    text = generate_latest(registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_the_series_read_back_as_gpufleets_own() -> None:
    fired = AlertFired("crashed", "GPU 3", 3, "GPU 3 server on :30003 is stopped", 1.0, 1.0)
    ledger = JobEnergy(1, "j", 7.2e6, 9_000_000, 2, 7, True, 6300.0, 1.0)
    found = scrape(AgentView("n1", snapshot(), alerts=(fired,), job_energy=ledger))
    gpu = (("gpu", "0"), ("node", "n1"), ("port", "30000"))

    def at(name: str, *extra: tuple[str, str], labels: tuple[tuple[str, str], ...] = gpu) -> float:
        return found[(name, tuple(sorted((*labels, *extra))))]

    assert at("gpufleet_server_latency_seconds", ("kind", "ttft"), ("percentile", "p90")) == 1.2
    assert at("gpufleet_server_latency_observations", ("kind", "ttft")) == 812
    assert at("gpufleet_server_latency_window_seconds") == 300
    assert at("gpufleet_server_prefix_cache_hit_ratio") == 0.25
    assert at("gpufleet_server_swa_cache_usage_ratio") == 0.0
    assert (at("gpufleet_server_spec_accept_rate"), at("gpufleet_server_spec_steps")) == (0.47, 3)
    assert at("gpufleet_gpu_energy_joules_total") == 9000.0
    assert at("gpufleet_gpu_tokens_per_joule") == 1.31
    node = (("node", "n1"),)
    assert at("gpufleet_fleet_latency_seconds", ("kind", "ttft"), ("percentile", "p50"),
              labels=node) == 0.41  # fmt: skip
    assert at("gpufleet_fleet_tokens_per_joule", labels=node) == 1.31
    assert at("gpufleet_imbalance_score", ("gpu", "1"), ("reading", "tok_s"), labels=node) == -21.4
    assert at("gpufleet_alert_firing", ("rule", "crashed"), ("subject", "GPU 3"), labels=node) == 1
    assert at("gpufleet_job_tokens_per_joule", labels=node) == 1.25


async def test_an_agent_fires_the_crash_of_a_killed_server_and_serves_it(tmp_path: Path) -> None:
    args = ["--sim-speed", "20", "--sim-startup-seconds", "1", "--enable-metrics"]
    with running_sim(args, tmp_path) as sim:
        spec = FleetSpec((ServerSpec(gpu_index=0, port=sim.port),))
        monitor = FleetMonitor(spec, SimulatedSource(tmp_path / "simgpu"), probe_timeout=2.0)
        alerts = AlertConfig((Rule("crashed", 0.0, 0.0),))
        config = AgentConfig("n1", (), alerts=alerts, poll_interval_s=0.2)
        agent = Agent(config, monitor, FleetOps())
        async with agent.running():

            async def until(done: Callable[[], object], what: str) -> None:
                deadline = time.monotonic() + 30
                while not done():
                    assert time.monotonic() < deadline, what
                    await asyncio.sleep(0.1)  # the agent's own loop refreshes the view

            def ready() -> bool:
                server = (
                    agent.view.snapshot.panels[0].server if agent.view.snapshot.panels else None
                )
                return server is not None and server.state is ServerState.READY

            await until(ready, "the server ready")
            os.killpg(sim.proc.pid, signal.SIGKILL)
            await until(lambda: agent.view.alerts, "the crash")
            view = agent.view
    assert [(a.rule, a.subject) for a in view.alerts] == [("crashed", "GPU 0")]
    labels = (("node", "n1"), ("rule", "crashed"), ("subject", "GPU 0"))
    assert scrape(view)[("gpufleet_alert_firing", labels)] == 1.0


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is Prometheus' own")
def test_promtools_lint_passes_every_series() -> None:
    """Prometheus' own linter on the agent's whole /metrics (a gauge with a ``quantile`` label
    is a summary's look-alike: it says so)."""
    fired = AlertFired("crashed", "GPU 3", 3, "m", 1.0, 1.0)
    ledger = JobEnergy(1, "j", 7.2e6, 9_000_000, 2, 7, True, 6300.0, 1.0)
    view = AgentView("n1", snapshot(), alerts=(fired,), job_energy=ledger)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(AgentCollector(lambda: view))
    registry.register(ObservedCollector(lambda: view))
    lint = subprocess.run(
        ["promtool", "check", "metrics"],
        input=generate_latest(registry),
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert lint.returncode == 0, lint.stdout + lint.stderr

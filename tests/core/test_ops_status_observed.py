"""``gpufleet status`` with what the peers show: per GPU each pool, the draft, the latency
percentiles with their counts and the energy; for the fleet its latency, energy, the GPU that
stands out and the alerts firing (as journalled); the job's energy and its cost. And a real
one-shot ``status --json`` of a simulated server: latency since the server started, said so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from operator_helpers import gpufleet_status
from sim_helpers import Clients, running_sim

from tui import paths
from tui.fleet.energy import FleetEnergy, GpuEnergy
from tui.fleet.imbalance import Outlier
from tui.fleet.latency import LatencySummary, Percentiles
from tui.fleet.snapshot import FleetSnapshot, GpuPanel, ServerSnapshot, ServerState
from tui.fleet.speculative import SpecDecode
from tui.ops.alerts.engine import AlertCleared, AlertFired
from tui.ops.alerts.runner import journal_entry
from tui.ops.fleet_status import format_text, status_document
from tui.ops.journal import append
from tui.pipeline.energy import JOULES_PER_KWH, JobEnergy, Price
from tui.pipeline.status import PipelineStatus, Rate

T0 = 1_796_000_000.0


def snapshot() -> FleetSnapshot:
    latency = LatencySummary(300.0, ttft=Percentiles(0.41, 1.2, 2.3, 812), itl=None)
    server = ServerSnapshot(
        30000, ServerState.READY, token_usage=0.4, swa_usage=0.0, mamba_usage=0.7,
        cache_hit_rate=0.25, spec=SpecDecode("EAGLE", 2.4, 0.47, 3, 4), latency=latency,
    )  # fmt: skip
    slow = Outlier(
        1, "tok_s", 290.0, 1160.0, -21.4, "GPU 1 tok/s 290: 0.25x the fleet median 1,160"
    )
    return FleetSnapshot(
        panels=(GpuPanel(0, None, server, energy=GpuEnergy(9000.0, True, 300.0, 870.0, 1.31)),),
        taken_at=T0,
        latency=latency,
        energy=FleetEnergy(9000.0, 300.0, 870.0, 1.31),
        imbalance=(slow,),
    )


def job() -> PipelineStatus:
    rate = Rate(60.0, 2.5, 900.0)
    return PipelineStatus(1, "running", 1, T0 - 100, T0 - 4, 1000, 250, 1, 8, rate, rate, 7200.0)


def test_the_document_carries_pools_draft_latency_energy_imbalance_alerts() -> None:
    fired = AlertFired("crashed", "GPU 3", 3, "GPU 3 server on :30003 is stopped", T0 - 5, T0 - 5)
    gone = AlertFired("gpu_hot", "GPU 2", 2, "GPU 2 at 90 °C (limit 85 °C)", T0 - 60, T0 - 120)
    for event in (gone, fired, AlertCleared("gpu_hot", "GPU 2", 2, gone.message, T0 - 9, gone.at)):
        append(journal_entry(event, "agent"), paths.alerts_journal_file())
    ledger = JobEnergy(1, "j", 2 * JOULES_PER_KWH, 9_000_000, 2, 7, True, 6300.0, T0)
    doc = json.loads(json.dumps(status_document(snapshot(), job(), T0, ledger, Price(0.25, "EUR"))))
    (gpu,) = doc["gpus"]
    assert gpu["pools"] == {"kv": 0.4, "swa": 0.0, "mamba": 0.7, "cache_hit_rate": 0.25}
    assert gpu["spec"] == {"algorithm": "EAGLE", "accept_length": 2.4, "accept_rate": 0.47,
                           "steps": 3, "draft_tokens": 4}  # fmt: skip
    ttft = {"p50": 0.41, "p90": 1.2, "p99": 2.3, "count": 812}
    assert gpu["latency"] == {"window_s": 300.0, "ttft": ttft, "itl": None, "e2e": None,
                              "queue": None}  # fmt: skip
    assert gpu["energy"] == {"joules": 9000.0, "window_s": 300.0, "watts": 870.0,
                             "tokens_per_joule": 1.31, "counter": True}  # fmt: skip
    fleet = doc["fleet"]
    assert fleet["latency"]["ttft"] == ttft
    assert fleet["imbalance"][0]["gpu"] == 1 and fleet["imbalance"][0]["score"] == -21.4
    assert [(a["rule"], a["gpu"], a["message"]) for a in fleet["alerts"]] == [
        ("crashed", 3, "GPU 3 server on :30003 is stopped")  # the resolved one is not listed
    ]
    energy = doc["job"]["energy"]
    assert energy["tokens_per_joule"] == pytest.approx(9_000_000 / (2 * JOULES_PER_KWH), 1e-3)
    # 2 kWh at 0.25 so far; 6.3 kW for the ETA's two hours: 12.6 kWh, 3.15 to the ETA.
    assert energy["cost"] == {"so_far": 0.5, "to_eta": 3.15, "currency": "EUR"}
    text = "\n".join(
        format_text(status_document(snapshot(), job(), T0, ledger, Price(0.25, "EUR")))
    )
    assert "latency (300 s): TTFT p50 410 ms p90 1.20 s p99 2.30 s (n=812)" in text
    assert "energy: 870 W, 1.31 tok/J over 300 s" in text
    assert "imbalance: GPU 1 tok/s 290: 0.25x the fleet median 1,160" in text
    assert "alert: crashed: GPU 3 server on :30003 is stopped" in text
    assert "job energy: 2.00 kWh for 9,000,000 tokens, 1.25 tok/J, 0.50 EUR so far, 3.15 EUR " \
           "to the ETA (2 runs)" in text  # fmt: skip


def test_a_one_shot_status_of_a_real_server_says_its_latency_is_since_start(
    tmp_path: Path,
) -> None:
    args = ["--sim-speed", "20", "--sim-startup-seconds", "1", "--enable-metrics"]
    with running_sim(args, tmp_path) as sim:
        assert Clients(sim.url, 4, 64).join(60) == [200] * 4
        found = gpufleet_status("--json", "--ports", str(sim.port), "--gpus", "0")
        text = gpufleet_status("--ports", str(sim.port), "--gpus", "0")
    assert found.returncode == 0, found.stderr
    assert "latency (since start): TTFT p50 " in text.stdout
    (gpu,) = json.loads(found.stdout)["gpus"]
    latency = gpu["latency"]
    assert latency["window_s"] is None  # one scrape: every observation since the start
    assert latency["ttft"]["count"] >= 4 and latency["itl"]["count"] >= 4 * 63
    assert 0 < latency["ttft"]["p50"] <= latency["ttft"]["p99"]
    assert gpu["pools"]["kv"] is not None and gpu["pools"]["swa"] == 0.0
    assert gpu["spec"] is None  # no draft

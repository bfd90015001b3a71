"""Two slots on one card in ``gpufleet status``: the table says which card each slot runs on
(a ``dev`` column, only when some slot's card is not its own number), and the card's energy is
counted once for the fleet."""

from __future__ import annotations

from pathlib import Path

import pytest
from fleet_helpers import poll_until
from repo_paths import FIXTURES
from sim_helpers import Clients, running_sim

from tui.fleet.monitor import FleetMonitor
from tui.fleet.snapshot import FleetSnapshot, GpuPanel, ServerSnapshot, ServerState
from tui.fleet.spec import FleetSpec, ServerSpec
from tui.gpu.simulated import SimulatedSource
from tui.ops.fleet_status import format_text, status_document

T0 = 1_796_000_000.0
MODEL = FIXTURES / "real_sglang" / "0.5.17" / "model"


def _fleet(device_of_1: int | None) -> list[str]:
    panels = tuple(
        GpuPanel(gpu, None, ServerSnapshot(30000 + gpu, ServerState.READY), device=device)
        for gpu, device in ((0, None), (1, device_of_1), (2, None))
    )
    return format_text(status_document(FleetSnapshot(panels=panels, taken_at=T0), None, T0))


def test_the_table_shows_each_slot_s_card_when_two_slots_share_one() -> None:
    lines = _fleet(0)
    head = next(line for line in lines if line.lstrip().startswith("GPU"))
    assert head.startswith("GPU dev state ")
    rows = [line.split()[:4] for line in lines if line[:3].strip().isdigit()]
    assert rows == [
        ["0", "0", "ready", "30000"],
        ["1", "0", "ready", "30001"],
        ["2", "2", "ready", "30002"],
    ]


def test_a_fleet_of_one_server_per_card_has_no_dev_column() -> None:
    lines = _fleet(None)
    head = next(line for line in lines if line.lstrip().startswith("GPU"))
    assert "dev" not in head and head.startswith("GPU state ")
    assert [line.split()[:3] for line in lines if line[:3].strip().isdigit()][1] == [
        "1",
        "ready",
        "30001",
    ]


async def test_a_shared_card_s_energy_is_counted_once_for_the_fleet(tmp_path: Path) -> None:
    """Two simulated servers on one simulated card read its one energy counter: the fleet's
    joules and watts are the card's (not twice), its tokens both servers', and each slot's
    figure says which slot it shares the card with."""
    args = ["--sim-speed", "20", "--sim-startup-seconds", "1", "--enable-metrics",
            "--sim-gpu", "h100", "--sim-model", str(MODEL),
            "--max-mamba-cache-size", "80"]  # fmt: skip
    card = {"CUDA_VISIBLE_DEVICES": "0"}
    with (
        # The second sizes its pools from what the first left free, as SGLang does.
        running_sim([*args, "--mem-fraction-static", "0.3"], tmp_path, env=card) as first,
        running_sim([*args, "--mem-fraction-static", "0.6"], tmp_path, env=card) as second,
    ):
        spec = FleetSpec(
            (ServerSpec(gpu_index=0, port=first.port),
             ServerSpec(gpu_index=1, port=second.port, device=0))
        )  # fmt: skip
        monitor = FleetMonitor(spec, SimulatedSource(tmp_path / "simgpu"), probe_timeout=2.0,
                               discovery_interval=0)  # fmt: skip
        monitor.insight.slow_every_s = 1.0
        try:
            clients = [Clients(first.url, 4, 4000), Clients(second.url, 4, 4000)]

            def measured(snap: FleetSnapshot) -> bool:
                found = [p.energy for p in snap.panels]
                return len(found) == 2 and all(e and (e.tokens_per_joule or 0) > 0 for e in found)

            snap = await poll_until(monitor, measured, 60)
            assert [c.join(60) for c in clients] == [[200] * 4] * 2
        finally:
            await monitor.aclose()
    zero, one = (p.energy for p in snap.panels)
    assert zero is not None and one is not None and snap.energy is not None
    assert zero.counter and one.counter  # both from card 0's counter (GPU 1 has no card 1)
    assert (zero.shared_with, one.shared_with) == ((1,), (0,))
    assert one.shared_words() == "shared with GPU 0"
    assert zero.joules == one.joules == snap.energy.joules  # the card's, once
    assert snap.energy.watts == pytest.approx(zero.watts)
    assert snap.energy.tokens_per_joule == pytest.approx(
        (zero.tokens_per_joule or 0) + (one.tokens_per_joule or 0)
    )
    doc = status_document(snap, None, T0)
    assert [g["energy"].get("shared_with") for g in doc["gpus"]] == [[1], [0]]
    assert doc["fleet"]["energy"]["joules"] == round(zero.joules, 1)

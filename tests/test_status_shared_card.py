"""Two slots on one card in ``gpufleet status``: the table says which card each slot runs on
(a ``dev`` column, only when some slot's card is not its own number)."""

from __future__ import annotations

from tui.fleet.snapshot import FleetSnapshot, GpuPanel, ServerSnapshot, ServerState
from tui.ops.fleet_status import format_text, status_document

T0 = 1_796_000_000.0


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

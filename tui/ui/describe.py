"""Plain-words descriptions of what an operation touches, for the confirm screens (pure)."""

from __future__ import annotations

from collections.abc import Iterable

from tui.fleet.snapshot import FleetSnapshot
from tui.pipeline.status import PipelineStatus
from tui.ui.format import NA, num


def describe_servers(fleet: FleetSnapshot, gpus: Iterable[int]) -> str:
    """One line per GPU: its port, pid, state and load.

    Args:
        fleet: The current snapshot.
        gpus: GPU indices affected.

    Returns:
        The lines joined by newlines.
    """
    by_gpu = {panel.gpu_index: panel for panel in fleet.panels}
    lines = []
    for gpu in gpus:
        panel = by_gpu.get(gpu)
        server = None if panel is None else panel.server
        if server is None:
            lines.append(f"GPU {gpu}: no server")
            continue
        pid = NA if server.pid is None else str(server.pid)
        lines.append(
            f"GPU {gpu}: port {server.port}, pid {pid}, {server.state.value}, "
            f"{num(server.running)} running, {num(server.queued)} queued"
        )
    return "\n".join(lines)


def describe_pipeline_stop(status: PipelineStatus) -> str:
    """What stopping the pipeline does to its work."""
    return (
        f"Pipeline pid {status.pid}: {num(status.done)} of {num(status.total)} done are kept; "
        f"{num(status.in_flight)} requests in flight are dropped and generated again on restart."
    )

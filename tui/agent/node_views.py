"""What a many-node console reads from its agents' last views besides the panels: the job's
status (the generation pane, ``p``) and its energy ledger, each GPU's current and previous
profile (the rollback dialog) and the nodes' firing alerts (the header's count, ``!``), in the
console's GPU numbers."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from tui.agent.client import NodeView
from tui.fleet.snapshot import NODE_STRIDE
from tui.ops.alerts.engine import AlertFired
from tui.pipeline.energy import JobEnergy
from tui.pipeline.status import PipelineStatus
from tui.state.fleet_state import GpuState

NO_JOB = (
    "no node reports a job: run gpufleet generate --router URL --agents ... --status S on a node "
    "whose agent watches S (gpufleet agent --status S)"
)
"""Why ``p`` cannot act on a many-node console without a job."""


def node_of(gpu: int) -> tuple[int, int]:
    """The console GPU ``gpu`` as (node position, the GPU's index on its node)."""
    return gpu // NODE_STRIDE, gpu % NODE_STRIDE


def job_of(views: Sequence[NodeView | None]) -> tuple[int, PipelineStatus] | None:
    """The node reporting the job (the newest status document) and that document.

    Args:
        views: Each node's last view, by position (None: never answered).

    Returns:
        (node position, status), or None when no node reports one.
    """
    reporting = [
        (position, view.pipeline)
        for position, view in enumerate(views)
        if view is not None and view.pipeline is not None
    ]
    if not reporting:
        return None
    return max(reporting, key=lambda pair: pair[1].updated_at)


def energy_of(views: Sequence[NodeView | None]) -> JobEnergy | None:
    """The energy ledger of the job's node (``job_of``: the ledger lies beside the status
    document its agent watches); None without a job or a ledger there."""
    found = job_of(views)
    view = views[found[0]] if found is not None else None
    return view.job_energy if view is not None else None


def alerts_of(views: Sequence[NodeView | None]) -> tuple[AlertFired, ...]:
    """Every node's firing alerts in the console's words: the subject and the message name the
    node as its panels do (``n2 GPU 1 server on :30001 crashed: ...``, ``n1 job stalled: ...``),
    the GPU is the console's; oldest first.

    Args:
        views: Each node's last view, by position (a node that stopped answering keeps the
            alerts it last reported, as its panels keep their last state).

    Returns:
        The alerts, as the alerts list and the header's count show them.
    """
    out: list[AlertFired] = []
    for position, view in enumerate(views):
        if view is None:
            continue
        for alert in view.alerts:
            said = alert.message
            message = (
                f"{view.node} {said}" if said.startswith(alert.subject) else f"{view.node}: {said}"
            )
            out.append(
                replace(
                    alert,
                    subject=f"{view.node} {alert.subject}",
                    gpu=None if alert.gpu is None else position * NODE_STRIDE + alert.gpu,
                    message=message,
                )
            )
    return tuple(sorted(out, key=lambda a: (a.at, a.rule, a.subject)))


def running_of(views: Sequence[NodeView | None]) -> dict[int, GpuState]:
    """Each GPU's current and previous profile names, in the console's numbers.

    Args:
        views: Each node's last view, by position.

    Returns:
        Console GPU -> its state (names only: what the rollback dialog says).
    """
    out: dict[int, GpuState] = {}
    for position, view in enumerate(views):
        if view is None:
            continue
        for gpu in set(view.profiles) | set(view.previous):
            now, before = view.profiles.get(gpu), view.previous.get(gpu)
            console = position * NODE_STRIDE + gpu
            out[console] = GpuState(
                console,
                current={"name": now} if now else None,
                previous={"name": before} if before else None,
            )
    return out

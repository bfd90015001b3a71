"""Plain-words descriptions of what an operation touches, for the confirm screens (pure)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from tui.fleet.snapshot import FleetSnapshot, ServerState
from tui.ops.types import ConfirmedServer, StopReleased
from tui.pipeline.status import PipelineStatus
from tui.ui.format import NA, num
from tui.words import counted


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
        if server.state is ServerState.UNKNOWN or server.stranger:
            command = " ".join(server.cmdline) or "command line unknown"
            reach = (
                "if confirmed, only this pid is signalled, never its group"
                if server.pid is not None and server.start_ticks
                else "the kernel does not say which process it is: it cannot be stopped from here"
            )
            what = (
                f"{server.state.value}, NOT THE FLEET'S (gpufleet neither launched nor adopted "
                "it; gpufleet adopt takes it over)"
                if server.stranger
                else "UNKNOWN (not the server the fleet records)"
            )
            lines.append(f"GPU {gpu}: port {server.port}, pid {pid}, {what}: {command}; {reach}")
            continue
        lines.append(
            f"GPU {gpu}: port {server.port}, pid {pid}, {server.state.value}, "
            f"{num(server.running)} running, {num(server.queued)} queued"
        )
    return "\n".join(lines)


def adoptable(fleet: FleetSnapshot) -> tuple[tuple[int, int], ...]:
    """(GPU, port) of each server shown that runs while the fleet state records nothing of it
    (``ServerSnapshot.stranger``): what the console's ``A`` offers to adopt."""
    return tuple(
        (panel.gpu_index, panel.server.port)
        for panel in fleet.panels
        if panel.server is not None and panel.server.stranger
    )


def unknown_servers(fleet: FleetSnapshot, gpus: Iterable[int]) -> tuple[ConfirmedServer, ...]:
    """The servers among ``gpus`` that are not the fleet's (``unknown``, or a ``stranger`` the
    fleet state records nothing of) and that a confirmation can name (pid and start ticks
    known): what a confirmed stop or relaunch may signal, and nothing else.

    Args:
        fleet: The snapshot the confirmation showed.
        gpus: The GPUs of the operation.

    Returns:
        One per GPU whose server is unknown and identifiable.
    """
    wanted = set(gpus)
    out = []
    for panel in fleet.panels:
        server = panel.server
        if (
            panel.gpu_index in wanted
            and server is not None
            and (server.state is ServerState.UNKNOWN or server.stranger)
            and server.pid is not None
            and server.start_ticks
        ):
            out.append(
                ConfirmedServer(
                    panel.gpu_index, server.pid, server.start_ticks, " ".join(server.cmdline)
                )
            )
    return tuple(out)


def stop_words(outcomes: Sequence[StopReleased], asked: str) -> tuple[str, str]:
    """The title and text of the toast after a stop that was neither refused nor failed.

    "Stopped" only when every GPU's server was stopped; a GPU where nothing ran says so in its
    own words ("no server recorded; port 30000 is free"), never "stopped".

    Args:
        outcomes: Each GPU's outcome (every backend reports them, the many-node one too).
        asked: What was asked, in words ("stop GPU 0 (drain)"), when there are no outcomes.
    """
    if not outcomes:
        return "Nothing reported", asked
    acted = [o for o in outcomes if o.result is not None and o.result.outcome != "already_exited"]
    if len(acted) == len(outcomes):
        title = "Stopped"
    else:
        title = "Nothing was running" if not acted else "Stopped what was running"
    return title, "\n".join(o.message for o in outcomes)


def describe_pipeline_stop(status: PipelineStatus) -> str:
    """What stopping the pipeline does to its work."""
    return (
        f"Pipeline pid {status.pid}: {num(status.done)} of {num(status.total)} done are kept; "
        f"{counted(num(status.in_flight), 'request')} in flight: dropped and generated again on "
        "restart."
    )


def describe_fresh_job(status: PipelineStatus) -> str:
    """What starting the demo's job afresh does (its last run finished)."""
    return (
        f"The demo job finished: {num(status.done)} of {num(status.total)} prompts done. A fresh "
        "one starts from the first prompt; the finished job's outputs move aside to "
        "out-finished, replacing the job kept there before."
    )

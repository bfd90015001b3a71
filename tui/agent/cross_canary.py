"""A canary judged across nodes: the candidate on one GPU of one node, against every GPU of every
node that runs the canary GPU's current profile, over the same seconds.

Why the console runs it (not the canary GPU's agent): only the console sees every node. It runs
the one canary algorithm (``tui.rollout.canary.Canary``: the sequential test, its looks, its
interval, its window) with three parts swapped for the agents':

- the **apply** of the candidate on the canary GPU is the node's own apply operation, asked
  through its agent (stopped, released, launched, verified and journaled there, under the node's
  operation lock);
- the **counters** are read from every node at each reading through its agent
  (``GET /api/v1/counters``), all nodes at once, so the canary and the controls share intervals;
- the **state** before (what the canary GPU ran) comes from the agents' last views.

A node whose agent stops answering (an error or no answer within its timeout) leaves the control
for the rest of the canary: every interval is paired again without its GPUs, and the canary goes
on while a control remains. With no control left, or the canary's own node gone, the window ends
with no verdict. On "worse", or with no verdict once the candidate runs, the console rolls the
canary GPU back at once through its agent (the node's rollback operation); the reason says so.
The result names the controls of every node (console GPU numbers) and goes to the console's
journal.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from tui.agent.client import AgentClient, AgentError, NodeView
from tui.agent.node_views import node_of
from tui.agent.remap import remap_gpus
from tui.agent.tuning import renumber
from tui.fleet.snapshot import NODE_STRIDE, ServerState
from tui.ops.commands import Apply, Restore
from tui.ops.entries import canary_entry
from tui.ops.events import EventSink
from tui.ops.journal import append
from tui.profiles import Profile, profile_to_dict
from tui.retune.events import ApplyResult
from tui.rollout.canary import Canary, CanaryOptions
from tui.rollout.canary_result import CanaryLook, CanaryResult
from tui.rollout.sampling import Counts, Sampler
from tui.state.fleet_state import GpuState


def cross_controls(
    views: Sequence[NodeView | None], answering: Sequence[bool], gpu: int
) -> tuple[str | None, tuple[int, ...]]:
    """The canary GPU's current profile, and every ready GPU of every answering node that runs
    it (the canary GPU left out), in console numbers.

    Args:
        views: Each node's last view, by position (None: never answered).
        answering: Whether each node answered its last poll.
        gpu: The canary GPU (console number).

    Returns:
        (profile name or None when unknown, control GPUs; none when the profile is unknown).
    """
    position, local = node_of(gpu)
    view = views[position] if 0 <= position < len(views) else None
    current = view.profiles.get(local) if view is not None else None
    if current is None:
        return None, ()
    controls: list[int] = []
    for where, other in enumerate(views):
        if other is None or not answering[where]:
            continue
        ready = {
            panel.gpu_index
            for panel in other.snapshot.panels
            if panel.server is not None and panel.server.state is ServerState.READY
        }
        for g, name in other.profiles.items():
            console = where * NODE_STRIDE + g
            if name == current and g in ready and console != gpu:
                controls.append(console)
    return current, tuple(sorted(controls))


class NodesCounters:
    """The counters of GPUs on many nodes, each node read through its agent, all at once (a
    sampler's ``CountsReader``). A node that fails once is lost for good: its GPUs read None
    and ``lost()`` names them.

    Args:
        clients: Every node's agent client, by position.
    """

    def __init__(self, clients: Sequence[AgentClient]) -> None:
        self._clients = list(clients)
        self.lost_nodes: dict[int, str] = {}
        """Node position -> why it was lost (its error, one line)."""
        self._asked: set[int] = set()

    async def read(self, gpus: Sequence[int]) -> dict[int, Counts | None]:
        """Every GPU's counters now (None for a lost node's, or where its server did not
        answer)."""
        groups: dict[int, list[int]] = {}
        for gpu in gpus:
            position, local = node_of(gpu)
            groups.setdefault(position, []).append(local)
        self._asked.update(gpus)
        live = [p for p in groups if p not in self.lost_nodes]
        answers = await asyncio.gather(
            *(self._clients[p].counters(groups[p]) for p in live), return_exceptions=True
        )
        out: dict[int, Counts | None] = dict.fromkeys(gpus)
        for position, answer in zip(live, answers, strict=True):
            if isinstance(answer, AgentError):
                self.lost_nodes[position] = str(answer)
                continue
            if isinstance(answer, BaseException):
                raise answer
            for local, value in answer.items():
                out[position * NODE_STRIDE + local] = value
        return out

    def lost(self) -> frozenset[int]:
        """The GPUs read so far whose node was lost."""
        return frozenset(g for g in self._asked if node_of(g)[0] in self.lost_nodes)


async def cross_node_canary(
    clients: Sequence[AgentClient],
    views: Sequence[NodeView | None],
    answering: Sequence[bool],
    profile_name: str,
    gpu: int,
    options: CanaryOptions,
    on_event: EventSink | None = None,
    on_look: Callable[[CanaryLook], None] | None = None,
    by: str = "console",
) -> CanaryResult:
    """Try ``profile_name`` on ``gpu`` against every GPU of every node running its profile.

    Args:
        clients: Every node's agent client, by position.
        views: Each node's last view (what each GPU runs, which servers are ready).
        answering: Whether each node answered its last poll.
        profile_name: The candidate, as the canary GPU's node has it.
        gpu: The canary GPU (console number).
        options: Windows, levels, timeouts (the apply's own are the node's).
        on_event: The apply's and the rollback's events (console numbers).
        on_look: Every look of the window.
        by: Who asked (the console's journal).

    Returns:
        The result (console numbers); refused when no control runs the canary GPU's profile.

    Raises:
        AgentError: the canary's node does not have the profile or refused the apply.
    """
    position, local = node_of(gpu)
    if not 0 <= position < len(clients):
        raise AgentError(f"GPU {gpu}: no node {position} in this console")
    client = clients[position]
    offset = position * NODE_STRIDE

    def remap(value: Any) -> Any:
        return remap_gpus(value, lambda g: g + offset)

    current, controls = cross_controls(views, answering, gpu)
    candidate = renumber(await client.profile(profile_name), offset)
    before: dict[int, GpuState] = {}
    if current is not None:
        running = renumber(await client.profile(current), offset)
        before[gpu] = GpuState(gpu, current=profile_to_dict(running))

    async def apply(profile: Profile, gpus: Sequence[int]) -> ApplyResult:
        return await client.run(Apply(profile_name, (local,), measure=False), on_event, remap)

    counters = NodesCounters(clients)
    canary = Canary(
        candidate,
        gpu,
        apply,
        lambda gpus, interval_s: Sampler(counters, gpus, interval_s),
        options,
        controls=list(controls),
        on_look=on_look,
        state=lambda: before,
        lost=counters.lost,
    )
    result = await canary.run()
    result = _with_nodes(result, counters)
    candidate_runs = result.report is not None and result.report.ok
    if candidate_runs and result.verdict in ("worse", "not measured"):
        result = await _roll_back(client, local, profile_name, result, on_event, remap)
    await asyncio.to_thread(append, canary_entry(result, by))
    return result


def _with_nodes(result: CanaryResult, counters: NodesCounters) -> CanaryResult:
    """The reason names each node that stopped answering."""
    if not counters.lost_nodes:
        return result
    lost = "; ".join(counters.lost_nodes.values())
    return replace(result, reason=f"{result.reason} (left out: {lost})")


async def _roll_back(
    client: AgentClient,
    local: int,
    candidate: str,
    result: CanaryResult,
    on_event: EventSink | None,
    remap: Callable[[Any], Any],
) -> CanaryResult:
    """Return the canary GPU to its profile through its agent; the reason says how it went.

    The node's operation lock is not held from the apply to here (the window is minutes, over
    HTTP); the rollback carries ``expect``, so the node refuses it when another operation put
    something else on the GPU meanwhile, rather than undoing that."""
    try:
        back = await client.run(Restore((local,), expect=candidate), on_event, remap)
    except AgentError as error:
        failed = f"rolling GPU {result.gpu} back FAILED: {error}"
        return replace(result, reason=f"{result.reason}; {failed}")
    went = "rolled back" if back is not None and back.ok else "rollback FAILED"
    where = result.previous_profile or "its previous profile"
    return replace(result, reason=f"{result.reason}; GPU {result.gpu} {went} to {where}")

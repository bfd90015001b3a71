"""How one command of a many-node console is split over the nodes' agents and put back together.

The port (``tui.agent.nodes.Nodes``) polls the agents and reads through them; this module only
runs commands. The k-th agent's GPU ``n`` is the console's GPU ``k * NODE_STRIDE + n``: a command
naming console GPUs goes to each node concerned with that node's own numbers, and its events and
result come back in the console's. Every part runs through that node's ``FleetOps`` (its lock,
its journal). Stops, relaunches and applies run on every node at once, each GPU's outcome kept;
a rollout walks node after node and stops at the first node that failed; a canary is judged
across nodes by the console itself (``tui.agent.cross_canary``).

Separate from the port because a command's split and merge is its own rule set (which nodes, in
which order, what each receives, how the outcomes join), and the reads never need it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Any, Protocol, TypeVar

from tui.agent.client import AgentClient, AgentError, NodeView
from tui.agent.cross_canary import cross_node_canary
from tui.agent.merge import merge_applies, merge_rollouts
from tui.agent.node_views import NO_JOB, job_of, node_of
from tui.agent.remap import remap_gpus
from tui.agent.tuning import NodesTuning, renumber
from tui.control.adopt import ConfirmedServer
from tui.fleet.snapshot import NODE_STRIDE
from tui.ops.commands import (
    MAX_BATCH,
    Apply,
    Canary,
    Kill,
    Op,
    Relaunch,
    Rollback,
    Rollout,
    SaveProfile,
    StartPipeline,
    StopFleet,
    StopPipeline,
)
from tui.ops.door import OperationError
from tui.ops.events import EventSink
from tui.ops.port import Refused
from tui.profiles import Profile
from tui.retune.events import ApplyResult
from tui.rollout.canary import CanaryOptions
from tui.rollout.rollout import RolloutResult

T = TypeVar("T")
R = TypeVar("R")


class NodeDirectory(Protocol):
    """What the fan-out needs of the port that polls the agents (``Nodes``)."""

    @property
    def canary_options(self) -> CanaryOptions:
        """How a canary across nodes measures."""
        ...

    @property
    def clients(self) -> list[AgentClient]:
        """One client per node, in order."""
        ...

    @property
    def last_tuning(self) -> NodesTuning | None:
        """The tuning form's reads last handed out (None: no form opened yet)."""
        ...

    def views(self) -> list[NodeView | None]:
        """Each node's last view, by position (None: never answered)."""
        ...

    def answering(self) -> list[bool]:
        """Whether each node answered its last poll."""
        ...

    def tuning(self, gpu: int | None) -> NodesTuning:
        """The tuning form's backend on ``gpu``'s node (None: every node)."""
        ...


class FanOut:
    """Runs the commands of a many-node console on the agents of the nodes they concern.

    Args:
        nodes: The agents and what the last poll read of them.
    """

    def __init__(self, nodes: NodeDirectory) -> None:
        self._nodes = nodes

    async def run(self, command: Op[Any], sink: EventSink | None) -> object:
        """Run ``command`` (its kind already checked against the port's capabilities).

        Raises:
            Refused: a command a many-node console does not run.
            AgentError: naming each node that refused or failed, and why.
        """
        match command:
            case Kill() | Relaunch() | StopFleet():  # every node at once; each GPU's outcome
                if not isinstance(command, StopFleet):
                    _local_only(command.confirmed)
                groups = self._scope(getattr(command, "gpus", None))
                found = await self._each(groups, lambda p, local: self._on(p, command, local, sink))
                return tuple(outcome for outcomes in found for outcome in outcomes)
            case Apply(profile):  # every node at once, each its own version of the profile
                groups = self._scope(command.gpus)
                versions = {p: self._version(p, profile) for p in groups}

                async def apply(position: int, local: list[int] | None) -> ApplyResult:
                    one = replace(command, profile=versions[position])
                    return await self._on(position, one, local, sink)

                return merge_applies(await self._each(groups, apply))
            case Rollback(gpus, _, all_at_once):
                # Each node walks its own GPUs back; all at once: every node, in one batch each.
                back = Rollback(batch=MAX_BATCH if all_at_once else 1)
                groups = self._scope(gpus)

                async def walk(position: int, local: list[int] | None) -> RolloutResult:
                    return await self._on(position, back, local, sink)

                if all_at_once:
                    return merge_rollouts(await self._each(groups, walk))
                return merge_rollouts(await _node_after_node(groups, walk))
            case Rollout(profile, batch, gpus):  # node after node, each by the name it has
                rollout = Rollout(_name(profile), batch)

                async def roll(position: int, local: list[int] | None) -> RolloutResult:
                    return await self._on(position, rollout, local, sink)

                return merge_rollouts(await _node_after_node(self._scope(gpus), roll))
            case Canary(profile, gpu):  # judged here, across nodes (tui.agent.cross_canary)
                nodes = self._nodes
                return await cross_node_canary(
                    nodes.clients,
                    nodes.views(),
                    nodes.answering(),
                    _name(profile),
                    gpu,
                    nodes.canary_options,
                    sink,
                    sink,
                )
            case StartPipeline() | StopPipeline():
                # Started again or stopped through the job's node's agent (identity-checked
                # there; a start resumes from the done record).
                action = "start" if isinstance(command, StartPipeline) else "stop"
                await self._job_client().pipeline(action)
                return None
            case SaveProfile(profile, gpus):
                form = self._nodes.last_tuning or self._nodes.tuning(None if not gpus else gpus[0])
                return await asyncio.to_thread(form.save_profile, profile)
        raise Refused(f"{type(command).__name__}: not a command a many-node console runs")

    async def _on(
        self, position: int, command: Op[R], local: list[int] | None, sink: EventSink | None
    ) -> R:
        """``command`` on node ``position``'s agent, its GPUs ``local`` (None: as it is), its
        events and result in the console's numbers."""
        if local is not None:
            command = replace(command, gpus=tuple(local))  # type: ignore[type-var]
        return await self._client(position).run(command, sink, _remap(position))

    def _scope(self, gpus: Sequence[int] | None) -> dict[int, Any]:
        """The nodes of ``gpus`` with their own GPUs (None: every node, each as a whole)."""
        if gpus is None:
            return {position: None for position in range(len(self._nodes.clients))}
        groups: dict[int, list[int]] = {}
        for gpu in sorted(set(gpus)):
            position, local = node_of(gpu)
            self._client(position)
            groups.setdefault(position, []).append(local)
        return groups

    def _version(self, position: int, profile: Profile | str) -> Profile | str:
        """What node ``position`` applies: a profile by name its own of that name; the tuning
        form's profile that node's version of it, in its own numbers."""
        if isinstance(profile, str):
            return profile
        form = self._nodes.last_tuning
        if form is not None:
            return form.version(position, profile)
        return renumber(profile, -position * NODE_STRIDE)

    def _client(self, position: int) -> AgentClient:
        clients = self._nodes.clients
        if not 0 <= position < len(clients):
            raise AgentError(f"GPU {position * NODE_STRIDE}: no node {position} in this console")
        return clients[position]

    def _job_client(self) -> AgentClient:
        found = job_of(self._nodes.views())
        if found is None:
            raise AgentError(NO_JOB)
        return self._client(found[0])

    @staticmethod
    async def _each(groups: dict[int, Any], run: Callable[[int, Any], Awaitable[T]]) -> list[T]:
        """Run on every node at once; all finish; failures are raised together, by node."""
        positions = list(groups)
        outcomes = await asyncio.gather(
            *(run(p, groups[p]) for p in positions), return_exceptions=True
        )
        errors = [str(o) for o in outcomes if isinstance(o, BaseException)]
        if errors:
            raise AgentError("; ".join(errors))
        return [o for o in outcomes if not isinstance(o, BaseException)]


async def _node_after_node(
    groups: dict[int, Any], walk: Callable[[int, Any], Awaitable[RolloutResult]]
) -> list[RolloutResult]:
    """``walk`` on each node in turn, stopping at the first node whose walk failed."""
    results: list[RolloutResult] = []
    for position, local in groups.items():
        results.append(await walk(position, local))
        if results[-1].failed or results[-1].failure:
            break
    return results


def _remap(position: int) -> Callable[[Any], Any]:
    """A node's events and results in the console's GPU numbers."""
    return lambda value: remap_gpus(value, lambda g: position * NODE_STRIDE + g)


def _local_only(confirmed: tuple[ConfirmedServer, ...]) -> None:
    """A server no node verifies as its fleet's is stopped only from a console on its host."""
    if confirmed:
        pids = ", ".join(f"pid {c.pid} (GPU {c.gpu})" for c in confirmed)
        raise OperationError(
            f"{pids}: not a server of its node's fleet; stop it on that node's host"
        )


def _name(profile: Profile | str) -> str:
    """A profile by name: each node runs its own of that name."""
    return profile if isinstance(profile, str) else profile.name

"""Many nodes as one fleet for the console: the port (``tui.ops.port.Fleet``) over the agents,
its snapshot merging theirs, its commands run by their control APIs.

The k-th agent's GPU ``n`` is the console's GPU ``k * NODE_STRIDE + n`` (its panel says which node
and which GPU). A node whose agent stops answering keeps its last panels, marked unreachable with
the time of its last answer; the other nodes keep working. Every operation goes to the agent of
the GPU's node, which runs it through that node's ``FleetOps`` (its lock, its journal); one split
over several nodes runs on each at once (a rollout: node after node). A canary is judged across
nodes by the console itself (``tui.agent.cross_canary``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar, cast

import httpx

from tui.agent.client import SNAPSHOT_TIMEOUT_S, AgentAddress, AgentClient, AgentError, NodeView
from tui.agent.cross_canary import cross_controls, cross_node_canary
from tui.agent.merge import merge_applies, merge_rollouts
from tui.agent.node_views import NO_JOB, job_of, node_of, running_of
from tui.agent.remap import remap_gpus
from tui.agent.tuning import NodesTuning, renumber
from tui.control.adopt import ConfirmedServer
from tui.fleet.insight import fleet_imbalance
from tui.fleet.snapshot import NODE_STRIDE, FleetSnapshot, NodeStatus
from tui.ops.adoption import AdoptError, AdoptPlan
from tui.ops.commands import (
    MAX_BATCH,
    Apply,
    Canary,
    Kill,
    Kind,
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
from tui.ops.journal import JournalRead
from tui.ops.marks import OperationMark
from tui.ops.port import (
    Capabilities,
    FleetReads,
    Refused,
    SearchStatus,
    refuse_unless_capable,
)
from tui.ops.windows import console_windows
from tui.pipeline.energy import JobEnergy
from tui.pipeline.status import PipelineStatus
from tui.profiles import Problem, Profile, ProfileError
from tui.retune.events import ApplyResult
from tui.rollout.canary import CanaryOptions
from tui.rollout.rollout import RolloutResult
from tui.state.fleet_state import GpuState

T = TypeVar("T")
R = TypeVar("R")

KINDS = frozenset(
    {
        Kind.KILL,
        Kind.RELAUNCH,
        Kind.ROLLBACK,
        Kind.CANARY,
        Kind.ROLLOUT,
        Kind.STOP_FLEET,
        Kind.TUNE,
        Kind.PIPELINE,
    }
)
"""What a many-node console can do."""
ON_ONE_NODE = {
    Kind.JOURNAL: "each node keeps its own journal (gpufleet journal on the node)",
    Kind.ADOPT: "servers are adopted on their own node (gpufleet adopt there)",
    Kind.AUTOTUNE: (
        "a search tunes one node's GPUs against each other: start it on that node "
        "(gpufleet autotune start, or its agent's /api/v1/autotune)"
    ),
}
"""Why the kinds a many-node console lacks are off."""


def _local_only(confirmed: tuple[ConfirmedServer, ...]) -> None:
    """A server no node verifies as its fleet's is stopped only from a console on its host."""
    if confirmed:
        pids = ", ".join(f"pid {c.pid} (GPU {c.gpu})" for c in confirmed)
        raise OperationError(
            f"{pids}: not a server of its node's fleet; stop it on that node's host"
        )


@dataclass
class _Node:
    """What the poller remembers of one agent (mutable, private)."""

    client: AgentClient
    view: NodeView | None = None
    last_answer_at: float | None = None
    error: str = ""
    asking: asyncio.Task[NodeView] | None = None
    """The snapshot request in flight (it may outlive a poll: its answer is the next one's)."""


class Nodes:
    """The agents of a many-node console: one poll merges them; operations go to each.

    Args:
        addresses: The agents, in the order their nodes are shown.
        token: The bearer token (the same file on every node, or a copy of it).
        client: HTTP client (default: one owned by this object).
        canary_options: How a canary measures (default: the console's windows).
    """

    def __init__(
        self,
        addresses: Sequence[AgentAddress],
        token: str,
        client: httpx.AsyncClient | None = None,
        canary_options: CanaryOptions | None = None,
    ) -> None:
        self.canary_options = canary_options or console_windows().canary
        """How a canary across nodes measures."""
        self._token = token
        self._own = client is None
        self._http = client or httpx.AsyncClient(timeout=httpx.Timeout(30.0, connect=3.0))
        self._nodes = [_Node(AgentClient(a, token, self._http)) for a in addresses]
        self._logs: dict[str, tuple[int, int]] = {}
        """A panel's log path as shown (``node:path``) -> (node position, local GPU)."""
        self._form: NodesTuning | None = None
        """The tuning form's reads last handed out (a Save writes each node's version)."""

    @property
    def clients(self) -> list[AgentClient]:
        """One client per node, in order."""
        return [n.client for n in self._nodes]

    async def aclose(self) -> None:
        """Close the HTTP client if owned (a snapshot request still in flight is cancelled)."""
        for node in self._nodes:
            if node.asking is not None:
                node.asking.cancel()
                with contextlib.suppress(asyncio.CancelledError, AgentError):
                    await node.asking
                node.asking = None
        if self._own:
            await self._http.aclose()

    # --- the port ---------------------------------------------------------------------------------

    @property
    def reads(self) -> FleetReads:
        """This port reads itself (through the agents' last views, or by asking them)."""
        return self

    def capabilities(self) -> Capabilities:
        """Stop, relaunch, apply, rollback, canary, rollout, the job and stopping every node;
        the controls of a canary picked here."""
        return Capabilities(KINDS, ON_ONE_NODE, picks_controls=True)

    async def run(self, command: Op[R], sink: EventSink | None = None) -> R:
        """Run ``command`` on the agents of the nodes it concerns.

        Raises:
            Refused: a kind a many-node console does not run.
            AgentError: naming each node that refused or failed, and why.
        """
        refuse_unless_capable(self.capabilities(), command)
        return cast(R, await self._run(command, sink))

    async def _run(self, command: Op[Any], sink: EventSink | None) -> object:
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
                return merge_rollouts(await self._node_after_node(groups, walk))
            case Rollout(profile, batch, gpus):  # node after node, each by the name it has
                rollout = Rollout(_name(profile), batch)

                async def roll(position: int, local: list[int] | None) -> RolloutResult:
                    return await self._on(position, rollout, local, sink)

                return merge_rollouts(await self._node_after_node(self._scope(gpus), roll))
            case Canary(profile, gpu):  # judged here, across nodes (tui.agent.cross_canary)
                return await cross_node_canary(
                    self.clients,
                    self._views(),
                    self._answering(),
                    _name(profile),
                    gpu,
                    self.canary_options,
                    sink,
                    sink,
                )
            case StartPipeline() | StopPipeline():
                # Started again or stopped through the job's node's agent (identity-checked
                # there; a start resumes from the done record).
                action = "start" if isinstance(command, StartPipeline) else "stop"
                await (await self._job_client()).pipeline(action)
                return None
            case SaveProfile(profile, gpus):
                form = self._form or self.tuning(None if not gpus else gpus[0])
                return await asyncio.to_thread(form.save_profile, profile)
        raise Refused(f"{type(command).__name__}: not a command a many-node console runs")

    async def _on(
        self, position: int, command: Op[R], local: list[int] | None, sink: EventSink | None
    ) -> R:
        """``command`` on node ``position``'s agent, its GPUs ``local`` (None: as it is), its
        events and result in the console's numbers."""
        if local is not None:
            command = replace(command, gpus=tuple(local))  # type: ignore[type-var]
        return await self._client(position).run(command, sink, self._remap(position))

    def _scope(self, gpus: Sequence[int] | None) -> dict[int, Any]:
        """The nodes of ``gpus`` with their own GPUs (None: every node, each as a whole)."""
        return self._everywhere() if gpus is None else self._split(gpus)

    @staticmethod
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

    def _version(self, position: int, profile: Profile | str) -> Profile | str:
        """What node ``position`` applies: a profile by name its own of that name; the tuning
        form's profile that node's version of it, in its own numbers."""
        if isinstance(profile, str):
            return profile
        if self._form is not None:
            return self._form.version(position, profile)
        return renumber(profile, -position * NODE_STRIDE)

    async def snapshot(self) -> FleetSnapshot:
        """Every agent's snapshot at once, merged."""
        return await self.poll()

    # --- the poll -------------------------------------------------------------------------------

    async def poll(self) -> FleetSnapshot:
        """Every agent's snapshot at once, merged."""
        await asyncio.gather(*(self._poll_one(n) for n in self._nodes))
        now = time.time()
        panels = []
        statuses = []
        for position, node in enumerate(self._nodes):
            view = node.view
            name = view.node if view is not None else node.client.address.label
            statuses.append(
                NodeStatus(
                    name=name,
                    address=node.client.address.label,
                    reachable=not node.error,
                    last_answer_at=node.last_answer_at,
                    error=node.error,
                    readonly=view.readonly if view is not None else False,
                )
            )
            if view is None:
                continue
            for panel in view.snapshot.panels:
                server = panel.server
                if server is not None and server.log_path:
                    # Every node may keep its logs at the same path: name the node in it.
                    shown = f"{name}:{server.log_path}"
                    self._logs[shown] = (position, panel.gpu_index)
                    server = replace(server, log_path=shown)
                panels.append(
                    replace(
                        panel,
                        gpu_index=position * NODE_STRIDE + panel.gpu_index,
                        node=name,
                        server=server,
                    )
                )
        live = sum(1 for s in statuses if s.reachable)
        source = f"{len(statuses)} nodes, {live} answering"
        # The GPU that stands out is judged over every node's panels (a node's own judges its
        # GPUs alone). The fleet's latency and energy are left out: a node's summary cannot be
        # summed again; each panel keeps its own GPU's and server's.
        return FleetSnapshot(
            panels=tuple(panels),
            gpu_source=source,
            taken_at=now,
            nodes=tuple(statuses),
            imbalance=fleet_imbalance(panels),
        )

    async def _poll_one(self, node: _Node) -> None:
        """Wait ``SNAPSHOT_TIMEOUT_S`` at most for the node's snapshot. A request that takes
        longer is not cancelled: the node reads as not answering for this poll, and the answer
        is taken when it lands. Why: a request cut at the deadline and asked again at every poll
        never lands when each answer takes longer than the deadline (seen under load: a node's
        panels never appeared in 30 s, while its agent answered in 2-5 s)."""
        if node.asking is None:
            node.asking = asyncio.ensure_future(node.client.snapshot())
        done, _ = await asyncio.wait({node.asking}, timeout=SNAPSHOT_TIMEOUT_S)
        if not done:
            client = node.client
            node.error = (
                f"node {client.node}: agent {client.address.label} did not answer within "
                f"{SNAPSHOT_TIMEOUT_S:g} s"
            )
            return
        answered, node.asking = node.asking, None
        try:
            node.view = answered.result()
        except AgentError as error:
            node.error = str(error)
            return
        node.error = ""
        node.last_answer_at = time.time()

    def log_tail(self, path: Path, max_lines: int) -> list[str]:
        """A panel's log through its node's agent. Blocking (the detail screen calls it from a
        thread).

        Args:
            path: The log path as the panel shows it (``node:path``).
            max_lines: How many lines at most.

        Returns:
            The newest lines; empty when the node does not answer.
        """
        where = self._logs.get(str(path))
        if where is None:
            return []
        position, gpu = where
        address = self._nodes[position].client.address

        async def fetch() -> list[str]:
            async with httpx.AsyncClient(timeout=5.0) as client:
                return await AgentClient(address, self._token, client).logs(gpu, max_lines)

        try:
            return asyncio.run(fetch())
        except AgentError:
            return []

    # --- routing ----------------------------------------------------------------------------

    def _client(self, position: int) -> AgentClient:
        if not 0 <= position < len(self._nodes):
            raise AgentError(f"GPU {position * NODE_STRIDE}: no node {position} in this console")
        return self._nodes[position].client

    def _split(self, gpus: Sequence[int]) -> dict[int, list[int]]:
        groups: dict[int, list[int]] = {}
        for gpu in sorted(set(gpus)):
            position, local = node_of(gpu)
            self._client(position)
            groups.setdefault(position, []).append(local)
        return groups

    @staticmethod
    def _remap(position: int) -> Callable[[Any], Any]:
        return lambda value: remap_gpus(value, lambda g: position * NODE_STRIDE + g)

    async def _each(
        self, groups: dict[int, Any], run: Callable[[int, Any], Awaitable[T]]
    ) -> list[T]:
        """Run on every node at once; all finish; failures are raised together, by node."""
        positions = list(groups)
        outcomes = await asyncio.gather(
            *(run(p, groups[p]) for p in positions), return_exceptions=True
        )
        errors = [str(o) for o in outcomes if isinstance(o, BaseException)]
        if errors:
            raise AgentError("; ".join(errors))
        return [o for o in outcomes if not isinstance(o, BaseException)]

    def _everywhere(self) -> dict[int, None]:
        return {position: None for position in range(len(self._nodes))}

    def autotune_status(self) -> SearchStatus | None:
        """None: a search runs on one node (``ON_ONE_NODE``), not across this console's."""
        return None

    def canary_controls(self, gpu: int) -> tuple[int, ...] | None:
        """The control GPUs a canary on ``gpu`` would have now (its confirm names them)."""
        return cross_controls(self._views(), self._answering(), gpu)[1]

    def _answering(self) -> list[bool]:
        return [not n.error and n.view is not None for n in self._nodes]

    def profile_names(self) -> list[str]:
        """Profiles every answering node has (an apply by name runs each node's own). Blocking."""
        return asyncio.run(self._profiles())[0]

    def current_profile(self) -> str | None:
        """The profile most answering nodes run. Blocking."""
        return asyncio.run(self._profiles())[1]

    async def _profiles(self) -> tuple[list[str], str | None]:
        async with httpx.AsyncClient(timeout=5.0) as client:
            token = self._token
            answers = await asyncio.gather(
                *(AgentClient(n.client.address, token, client).profiles() for n in self._nodes),
                return_exceptions=True,
            )
        good = [a for a in answers if not isinstance(a, BaseException)]
        if not good:
            return [], None
        common = set(good[0][0]).intersection(*(set(names) for names, _ in good[1:]))
        currents = [c for _, c in good if c]
        current = max(set(currents), key=currents.count) if currents else None
        return sorted(common), current

    # --- the job and the rollback dialog (what the agents' views say) --------------------------

    def _views(self) -> list[NodeView | None]:
        return [n.view for n in self._nodes]

    def running(self) -> dict[int, GpuState]:
        """Each GPU's current and previous profile, as its node's agent last reported them."""
        return running_of(self._views())

    def pipeline_status(self) -> PipelineStatus | None:
        """The job as its node's agent reports it."""
        found = job_of(self._views())
        return found[1] if found is not None else None

    def job_energy(self) -> JobEnergy | None:
        """None: the job's ledger stays on its node (its panels' energy comes with the
        snapshots)."""
        return None

    def journal(self) -> JournalRead:
        """None here: each node keeps its own (``ON_ONE_NODE``)."""
        return JournalRead((), 0)

    def marks(self) -> list[OperationMark]:
        """None: the nodes' journals stay on the nodes."""
        return []

    async def plan_adoption(
        self, ports: tuple[int, ...], gpus: tuple[int, ...], name: str
    ) -> AdoptPlan:
        """Refused: servers are adopted on their own node."""
        raise AdoptError(ON_ONE_NODE[Kind.ADOPT])

    async def _job_client(self) -> AgentClient:
        found = job_of(self._views())
        if found is None:
            raise AgentError(NO_JOB)
        return self._client(found[0])

    def tuning(self, gpu: int | None) -> NodesTuning:
        """The tuning form's backend: ``gpu``'s node (``t``), or every node (``T``: None).

        Args:
            gpu: A console GPU, or None for every node.

        Returns:
            The backend, reading each node's running profile from the last poll.
        """
        positions = list(range(len(self._nodes))) if gpu is None else [node_of(gpu)[0]]
        current: dict[int, str] = {}
        for position in positions:
            view = self._nodes[position].view
            if view is None or not view.profiles:
                continue
            names = list(view.profiles.values())
            local = view.profiles.get(node_of(gpu)[1]) if gpu is not None else None
            current[position] = local or max(set(names), key=names.count)
        addresses = [n.client.address for n in self._nodes]
        node_names = {p: n.view.node for p, n in enumerate(self._nodes) if n.view is not None}
        tuning = NodesTuning(addresses, self._token, positions, current, node_names, self._http)
        self._form = tuning
        return tuning

    def load_profile(self, name: str) -> Profile:
        """The first answering node's profile ``name``, in the console's numbers. Blocking.

        Raises:
            ProfileError: no node could give it (naming each node and why).
        """
        try:
            return self.tuning(None).load_profile(name)
        except AgentError as error:
            raise ProfileError([Problem("file", name, str(error))], name) from None


def _name(profile: Profile | str) -> str:
    """A profile by name: each node runs its own of that name."""
    return profile if isinstance(profile, str) else profile.name

"""Many nodes as one fleet for the console: the port (``tui.ops.port.Fleet``) over the agents,
its snapshot merging theirs, its reads through their last views or their APIs.

The k-th agent's GPU ``n`` is the console's GPU ``k * NODE_STRIDE + n`` (its panel says which node
and which GPU). A node whose agent stops answering keeps its last panels, marked unreachable with
the time of its last answer; the other nodes keep working. The port's commands are split over the
nodes and their outcomes joined by ``tui.agent.fanout``: this module polls, merges and reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar, cast

import httpx

from tui.agent.client import SNAPSHOT_TIMEOUT_S, AgentAddress, AgentClient, AgentError, NodeView
from tui.agent.cross_canary import cross_controls
from tui.agent.fanout import FanOut
from tui.agent.node_views import alerts_of, energy_of, job_of, node_of, running_of
from tui.agent.tuning import NodesTuning
from tui.fleet.insight import fleet_imbalance
from tui.fleet.snapshot import NODE_STRIDE, FleetSnapshot, NodeStatus
from tui.ops.adoption import AdoptError, AdoptPlan
from tui.ops.alerts.engine import AlertFired
from tui.ops.commands import Kind, Op
from tui.ops.events import EventSink
from tui.ops.journal import JournalRead
from tui.ops.marks import OperationMark
from tui.ops.port import Capabilities, FleetReads, SearchStatus, refuse_unless_capable
from tui.ops.windows import console_windows
from tui.pipeline.energy import JobEnergy
from tui.pipeline.status import PipelineStatus
from tui.profiles import Problem, Profile, ProfileError
from tui.rollout.canary import CanaryOptions
from tui.state.fleet_state import GpuState

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
    """The agents of a many-node console: one poll merges them; operations go to each
    (``tui.agent.fanout``).

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
        self._fanout = FanOut(self)

    @property
    def clients(self) -> list[AgentClient]:
        """One client per node, in order."""
        return [n.client for n in self._nodes]

    @property
    def last_tuning(self) -> NodesTuning | None:
        """The tuning form's reads last handed out (an Apply or a Save of the form sends each
        node its own version of the profile)."""
        return self._form

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
        return cast(R, await self._fanout.run(command, sink))

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

    def autotune_status(self) -> SearchStatus | None:
        """None: a search runs on one node (``ON_ONE_NODE``), not across this console's."""
        return None

    def canary_controls(self, gpu: int) -> tuple[int, ...] | None:
        """The control GPUs a canary on ``gpu`` would have now (its confirm names them)."""
        return cross_controls(self.views(), self.answering(), gpu)[1]

    def answering(self) -> list[bool]:
        """Whether each node answered its last poll, by position."""
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

    def views(self) -> list[NodeView | None]:
        """Each node's last view, by position (None: never answered)."""
        return [n.view for n in self._nodes]

    def running(self) -> dict[int, GpuState]:
        """Each GPU's current and previous profile, as its node's agent last reported them."""
        return running_of(self.views())

    def pipeline_status(self) -> PipelineStatus | None:
        """The job as its node's agent reports it."""
        found = job_of(self.views())
        return found[1] if found is not None else None

    def job_energy(self) -> JobEnergy | None:
        """The job's ledger as its node's agent last sent it (the node ``pipeline_status``
        picks)."""
        return energy_of(self.views())

    def node_alerts(self) -> tuple[AlertFired, ...]:
        """The alerts the nodes' agents fire now, as their last answers said, each naming its
        node (``alerts_of``). The agents run, journal and post them; this console runs none."""
        return alerts_of(self.views())

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

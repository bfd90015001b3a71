"""Many nodes as one fleet for the console: a poller that merges the agents' snapshots, and the
console's backend (``FleetActions``) over the agents' control APIs.

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
from typing import Any, TypeVar

import httpx

from tui.agent.client import SNAPSHOT_TIMEOUT_S, AgentAddress, AgentClient, AgentError, NodeView
from tui.agent.cross_canary import cross_controls, cross_node_canary
from tui.agent.merge import merge_applies, merge_rollouts
from tui.agent.node_views import NO_JOB, job_of, node_of, running_of
from tui.agent.remap import remap_gpus
from tui.agent.requests import MAX_BATCH
from tui.agent.tuning import NodesTuning
from tui.control.adopt import ConfirmedServer
from tui.control.stop import StopMode
from tui.control.stop_release import StopReleased
from tui.fleet.insight import fleet_imbalance
from tui.fleet.snapshot import NODE_STRIDE, FleetSnapshot, NodeStatus
from tui.ops.door import OperationError
from tui.ops.events import EventSink
from tui.ops.windows import console_windows
from tui.pipeline.status import PipelineStatus
from tui.retune.events import ApplyResult
from tui.rollout.canary import CanaryOptions
from tui.rollout.canary_result import CanaryLook, CanaryResult
from tui.rollout.rollout import RolloutResult
from tui.state.fleet_state import GpuState

T = TypeVar("T")

SUPPORTED = frozenset(
    {"kill", "relaunch", "rollback", "canary", "rollout", "stop_fleet", "tune", "pipeline"}
)
"""What a many-node console can do."""


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

    # --- the poll -------------------------------------------------------------------------------

    async def poll(self) -> FleetSnapshot:
        """Every agent's snapshot at once, merged (``FleetPoller``)."""
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

    def tail(self, path: Path, max_lines: int) -> list[str]:
        """The ``LogTail`` of a many-node console: a panel's log through its node's agent.
        Blocking (the detail screen calls it from a thread).

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

    # --- FleetActions ----------------------------------------------------------------------------

    def supports(self, intent: str) -> bool:
        """Stop, relaunch, apply (through the relaunch picker), rollback, canary, rollout and
        stopping every node."""
        return intent in SUPPORTED

    async def kill(
        self,
        gpus: tuple[int, ...],
        mode: StopMode = "drain",
        confirmed: tuple[ConfirmedServer, ...] = (),
        drain_s: float | None = None,
    ) -> tuple[StopReleased, ...]:
        """Stop the servers on ``gpus`` through their nodes' agents.

        Returns:
            Each GPU's outcome (its GPU numbered as the console numbers it).

        Raises:
            AgentError: naming each node whose stop failed, and why.
            OperationError: ``confirmed`` names an unknown server (not signalled remotely).
        """
        _local_only(confirmed)

        async def one(position: int, local: list[int]) -> Any:
            request: dict[str, Any] = {"kind": "kill", "gpus": local, "mode": mode}
            if drain_s is not None:
                request["drain_s"] = drain_s
            return await self._client(position).run(
                request, list[StopReleased], None, self._remap(position)
            )

        found = await self._each(self._split(gpus), one)
        return tuple(o for outcomes in found for o in outcomes if isinstance(o, StopReleased))

    async def relaunch(
        self, gpus: tuple[int, ...], confirmed: tuple[ConfirmedServer, ...] = ()
    ) -> tuple[ApplyResult, ...]:
        """Relaunch each GPU's own profile on its node, verified (each run's result, its GPUs
        numbered as the console numbers them).

        Raises:
            AgentError: naming each node that failed, and why.
            OperationError: ``confirmed`` names an unknown server (not signalled remotely).
        """
        _local_only(confirmed)

        async def one(position: int, local: list[int]) -> Any:
            request = {"kind": "relaunch", "gpus": local}
            return await self._client(position).run(
                request, list[ApplyResult], None, self._remap(position)
            )

        found = await self._each(self._split(gpus), one)
        return tuple(r for results in found for r in results if isinstance(r, ApplyResult))

    async def apply_profile(
        self, name: str, gpus: tuple[int, ...], on_event: EventSink | None = None
    ) -> ApplyResult:
        """Apply profile ``name`` (as each node has it) to ``gpus``, every node at once."""

        async def one(position: int, local: list[int]) -> ApplyResult:
            request = {"kind": "apply", "profile": name, "gpus": local}
            result: ApplyResult = await self._client(position).run(
                request, ApplyResult, on_event, self._remap(position)
            )
            return result

        return merge_applies(await self._each(self._split(gpus), one))

    async def rollback(
        self,
        gpus: tuple[int, ...] | None = None,
        on_event: EventSink | None = None,
        all_at_once: bool = False,
    ) -> RolloutResult:
        """Walk ``gpus`` back to the profile each ran before, each node through its agent's
        walk back (None: every node, each of its GPUs that has a previous profile): node after
        node, one GPU at a time, stopping at the first node that failed; with ``all_at_once``
        every node at once, each in one batch. Each node's result carries its own fleet verdict.

        Raises:
            AgentError: naming each node that refused or failed, and why.
        """
        groups: dict[int, Any] = self._everywhere() if gpus is None else self._split(gpus)
        batch = MAX_BATCH if all_at_once else 1

        async def one(position: int, local: list[int] | None) -> RolloutResult:
            request: dict[str, Any] = {"kind": "rollout_back", "batch": batch}
            if local is not None:
                request["gpus"] = local
            result: RolloutResult = await self._client(position).run(
                request, RolloutResult, on_event, self._remap(position)
            )
            return result

        if all_at_once:
            return merge_rollouts(await self._each(groups, one))
        results: list[RolloutResult] = []
        for position, local in groups.items():
            results.append(await one(position, local))
            if results[-1].failed or results[-1].failure:
                break
        return merge_rollouts(results)

    async def canary(
        self,
        profile_name: str,
        gpu: int,
        on_event: EventSink | None = None,
        on_look: Callable[[CanaryLook], None] | None = None,
    ) -> CanaryResult:
        """A canary on ``gpu`` judged across nodes: the control is every ready GPU of every
        answering node that runs ``gpu``'s current profile (``tui.agent.cross_canary``); on
        "worse" the canary GPU is rolled back through its agent."""
        return await cross_node_canary(
            self.clients,
            self._views(),
            self._answering(),
            profile_name,
            gpu,
            self.canary_options,
            on_event,
            on_look,
        )

    def canary_controls(self, gpu: int) -> tuple[int, ...]:
        """The control GPUs a canary on ``gpu`` would have now (its confirm names them)."""
        return cross_controls(self._views(), self._answering(), gpu)[1]

    def _answering(self) -> list[bool]:
        return [not n.error and n.view is not None for n in self._nodes]

    async def rollout(
        self,
        profile_name: str,
        batch: int = 1,
        gpus: tuple[int, ...] | None = None,
        on_event: EventSink | None = None,
    ) -> RolloutResult:
        """Roll ``profile_name`` out node after node, ``batch`` GPUs at a time on each (on each
        node only its GPUs among ``gpus``; None: every node, all of its GPUs); stops at the
        first node whose rollout failed (the nodes after it keep their profile)."""
        groups: dict[int, Any] = self._everywhere() if gpus is None else self._split(gpus)
        results: list[RolloutResult] = []
        for position, local in groups.items():
            request: dict[str, Any] = {"kind": "rollout", "profile": profile_name, "batch": batch}
            if local is not None:
                request["gpus"] = local
            result: RolloutResult = await self._client(position).run(
                request, RolloutResult, on_event, self._remap(position)
            )
            results.append(result)
            if result.failed or result.failure:
                break
        return merge_rollouts(results)

    async def stop_fleet(self, on_event: EventSink | None = None) -> None:
        """Stop every server of every node."""

        async def one(position: int, _: None) -> Any:
            return await self._client(position).run(
                {"kind": "stop_fleet"}, list[StopReleased], on_event, self._remap(position)
            )

        await self._each(self._everywhere(), one)

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
        """The console's ``RunningReader``: each GPU's current and previous profile, as its
        node's agent last reported them."""
        return running_of(self._views())

    def read_status(self, path: Path) -> PipelineStatus | None:
        """The generation pane's ``StatusReader``: the job as its node's agent reports it
        (``path`` is the one-node console's, unused)."""
        found = job_of(self._views())
        return found[1] if found is not None else None

    async def _job_client(self) -> AgentClient:
        found = job_of(self._views())
        if found is None:
            raise AgentError(NO_JOB)
        return self._client(found[0])

    async def start_pipeline(self) -> None:
        """Start again, through its node's agent, the job that agent stopped (it resumes from
        its done record).

        Raises:
            AgentError: no node reports a job, or its agent cannot start it (saying why).
        """
        await (await self._job_client()).pipeline("start")

    async def stop_pipeline(self) -> None:
        """Stop the job through its node's agent (identity-checked there).

        Raises:
            AgentError: no node reports a job, or its agent refused.
        """
        await (await self._job_client()).pipeline("stop")

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
        return NodesTuning(addresses, self._token, positions, current, node_names, self._http)

    def load_profile(self, name: str) -> Any:
        """Through ``tuning`` (a profile is read from a node, in its numbers)."""
        raise NotImplementedError("load_profile: use Nodes.tuning(gpu)")

    def save_profile(self, profile: Any) -> Any:
        """Through ``tuning`` (a profile is saved on each node it tunes)."""
        raise NotImplementedError("save_profile: use Nodes.tuning(gpu)")

    async def preflight(self, profile: Any, gpus: tuple[int, ...]) -> list[Any]:
        """Through ``tuning`` (each node's preflight of its version)."""
        raise NotImplementedError("preflight: use Nodes.tuning(gpu)")

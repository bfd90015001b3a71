"""The agent of one node: today's monitor and operations core, served over HTTP.

A background task builds an ``AgentView`` about once a second (the fleet monitor's snapshot, the
profile each GPU runs, the job's status document); ``/metrics`` and the snapshot API only format
the newest view, so a scrape never waits on NVML, a log or a server. Operations go to
``FleetOps`` through the node's port (``tui.ops.local.LocalFleet``: the same STOPPING marks on
the monitor as in the console).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tui.agent.codec import CodecError, decode_command
from tui.agent.counters_api import CountersReader
from tui.agent.metrics import AgentView
from tui.agent.operations import Operation, Operations
from tui.agent.policy import ApiPolicy, PolicyError, load_policy
from tui.agent.requests import BadRequest, parse_profile
from tui.fleet.monitor import FleetMonitor
from tui.fleet.snapshot import FleetSnapshot
from tui.ops.alerts.rules import AlertConfig
from tui.ops.alerts.runner import AlertRunner
from tui.ops.commands import Op
from tui.ops.events import EventSink
from tui.ops.local import LocalFleet
from tui.ops.service import FleetOps
from tui.pipeline.energy import JobEnergy, ledger_path, read_ledger
from tui.pipeline.status import read_status
from tui.profiles import Profile, ProfileError, load_by_name
from tui.servers.tokens import AgentToken, Scope, allows
from tui.state.fleet_state import read_running

POLL_INTERVAL_S = 1.0
"""Seconds from the end of one view to the start of the next."""


@dataclass(frozen=True, slots=True)
class AgentConfig:
    """How one agent runs."""

    node: str
    """The node's name (the ``node`` label, the console's heading)."""
    tokens: tuple[AgentToken, ...]
    """The bearer tokens a request may carry, each with its scope (``tui.servers.tokens``)."""
    readonly: bool = False
    """Refuse every write (operations) with 403, and every token but a read token."""
    open_metrics: bool = False
    """Serve ``/metrics`` without the token (like node_exporter; for a trusted network only)."""
    status_path: Path | None = None
    """The job's status document (its progress goes to ``/metrics``)."""
    poll_interval_s: float = POLL_INTERVAL_S
    """Seconds between views."""
    alerts: AlertConfig | None = None
    """The alert rules it fires on each view (None: none; ``tui.ops.alerts``)."""


class Agent:
    """One node's monitor, operations and the views the HTTP app serves.

    Args:
        config: Name, token, modes.
        monitor: The node's fleet monitor (polled only by the agent's loop).
        ops: The operations core of the node (its ``by`` is written in the journal).
    """

    def __init__(
        self,
        config: AgentConfig,
        monitor: FleetMonitor,
        ops: FleetOps,
        policy: ApiPolicy | None = None,
    ) -> None:
        self.config = config
        """The agent's settings."""
        self.monitor = monitor
        """The node's fleet monitor."""
        self.ops = ops
        """The one door."""
        self.policy = policy or load_policy([ops.base] if ops.base is not None else [])
        """What a profile that comes through the API may not do (``tui.agent.policy``)."""
        self.backend = LocalFleet(ops, monitor)
        """The node's port: the operations as the console runs them (STOPPING marks on the
        monitor)."""
        self.operations = Operations()
        """Operations asked through the API."""
        self.counters = CountersReader()
        """The servers' counters, read for ``/api/v1/counters`` (one shared client)."""
        self.view = AgentView(config.node, FleetSnapshot())
        """The newest view."""
        self.started_at = time.time()
        """When the agent started."""
        self._loop_task: asyncio.Task[None] | None = None
        self.alerts: AlertRunner | None = None
        """The node's alerts (made when the view loop starts: it takes the publisher's lock)."""

    # --- the view ----------------------------------------------------------------------------

    async def refresh(self) -> AgentView:
        """Build a new view now (the loop calls this; tests may too)."""
        t0 = time.perf_counter()
        snapshot = await self.monitor.poll()
        profiles, previous, pipeline, energy = await asyncio.to_thread(self._read_files)
        alerts = self.alerts
        if alerts is not None:  # the journal's fsync: in a thread
            await asyncio.to_thread(alerts.feed, snapshot, pipeline)
        self.view = AgentView(
            self.config.node,
            snapshot,
            profiles,
            pipeline,
            polled_at=time.time(),
            poll_seconds=time.perf_counter() - t0,
            polls=self.view.polls + 1,
            previous=previous,
            alerts=alerts.active if alerts is not None else (),
            job_energy=energy,
        )
        return self.view

    def _read_files(self) -> tuple[dict[int, str], dict[int, str], Any, JobEnergy | None]:
        try:
            running = read_running()
        except Exception:  # a damaged state file must not stop the metrics; the API says so
            running = {}
        profiles = {g: s.current_name for g, s in running.items() if s.current_name}
        previous = {g: s.previous_name for g, s in running.items() if s.previous_name}
        path = self.config.status_path
        status = read_status(path) if path else None
        energy = read_ledger(ledger_path(path)) if path else None
        return profiles, previous, status, energy

    async def _loop(self) -> None:
        while True:
            with contextlib.suppress(Exception):  # one bad poll costs one view, not the agent
                await self.refresh()
            await asyncio.sleep(self.config.poll_interval_s)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[Agent]:
        """Run the view loop while the context is open (the HTTP app's lifespan)."""
        # ``gpufleet agent`` read the state before serving; what goes wrong after that costs a
        # view (the API says so), never the agent's start (a traceback from uvicorn's lifespan).
        if self.config.alerts is not None:
            self.alerts = AlertRunner(self.config.alerts, by="agent", node=self.config.node)
        with contextlib.suppress(Exception):
            await self.refresh()
        self._loop_task = asyncio.create_task(self._loop())
        try:
            yield self
        finally:
            self._loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop_task
            await self.operations.aclose()
            await self.counters.aclose()
            await self.monitor.aclose()
            if self.alerts is not None:
                await asyncio.to_thread(self.alerts.close)

    # --- operations ---------------------------------------------------------------------------

    def load_by_name(self, name: str) -> Profile:
        """A profile of this node by name (never a path), fitted to the fleet. Blocking.

        Raises:
            ProfileError: not a name, no such profile, or an invalid one.
        """
        return self.ops.fit(load_by_name(name))

    def checked_profile(self, profile: Profile | str, scope: Scope) -> Profile:
        """The profile an API command names (loaded) or carries, held to the API policy.
        Blocking.

        A profile the command carries itself decides what the node runs, as saving one does:
        it needs an admin token, unless it is the node's own saved profile of that name as
        the node would run it (a console's form applying a profile it did not change).

        Raises:
            BadRequest: not a name, no such or an invalid profile, one the policy refuses, or
                a new profile from a token below admin (one line naming the field).
        """
        try:
            loaded = self.load_by_name(profile) if isinstance(profile, str) else profile
            self.policy.check(loaded, f"profile {loaded.name}")
        except (ProfileError, PolicyError) as error:
            raise BadRequest(" ".join(str(error).split())[:500]) from None
        if isinstance(profile, Profile) and not allows(scope, "admin"):
            try:
                saved = self.load_by_name(profile.name)
            except ProfileError:
                saved = None
            if saved != self.ops.fit(profile):
                raise BadRequest(
                    f"profile: {profile.name!r} is not this node's saved profile of that name: "
                    f"running a new profile needs an admin token (this one's scope is {scope})"
                )
        return loaded

    async def start(self, body: Any, scope: Scope = "admin") -> Operation:
        """Start the command ``body`` asks for (``tui.agent.codec.decode_command``) in the
        background, on this node's port; returns its handle.

        The profile it names or carries is loaded and checked first (``checked_profile``), so
        a name that is not a profile of this node, or one the policy refuses, is a 400 and
        nothing starts; the operation then runs that very profile (the file is not read again).

        Raises:
            BadRequest: the body is not a command, or its profile cannot be used.
        """
        try:
            command = decode_command(body, parse_profile)
        except CodecError as error:
            raise BadRequest(str(error)) from None
        profile = getattr(command, "profile", None)
        if isinstance(profile, Profile | str):
            loaded = await asyncio.to_thread(self.checked_profile, profile, scope)
            command = replace(command, profile=loaded)  # type: ignore[type-var]
        args = {k: v for k, v in body.items() if k != "profile" or isinstance(v, str)}
        return self.operations.start(command.WIRE or "", args, self._work(command))

    def _work(self, command: Op[Any]) -> Any:
        async def work(sink: EventSink) -> Any:
            return await self.backend.run(command, sink)

        return work

    def describe(self) -> dict[str, Any]:
        """The agent itself: node, pid, modes, since when, operations running."""
        return {
            "node": self.config.node,
            "pid": os.getpid(),
            "readonly": self.config.readonly,
            "started_at": self.started_at,
            "operations": [op.document(len(op.events)) for op in self.operations.running()],
        }

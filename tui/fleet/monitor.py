"""The fleet monitor: one ``poll()`` joins GPUs, server processes, HTTP probes and logs.

The UI calls :meth:`FleetMonitor.poll` from an exclusive async worker about once a second and
renders the immutable :class:`~tui.fleet.snapshot.FleetSnapshot` it returns. Blocking work (NVML or
the simulated records, psutil, log reads) runs in one ``asyncio.to_thread`` per poll; the HTTP
probes of every server run concurrently with short timeouts, so a hung server never delays the
others.

Which HTTP probes a server gets at each poll, and when, is the probe policy
(``tui.fleet.probes``). A ready server's steady ``/metrics`` read (its one request of most polls)
rides the poll's thread hop as one blocking batch (``tui.servers.batch_fetch``); the rest is
asyncio. A snapshot asks for a sooner refresh while a server warms up, so its ready line shows
within a fraction of a second.

The state rules and the snapshot of each server are ``tui.fleet.server_state``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

import httpx

from tui import paths, plain
from tui.fleet.insight import Insight
from tui.fleet.liveness import DEFAULT_FLOOR_S, ProgressWatch
from tui.fleet.panels import card_of, join_panels
from tui.fleet.probes import ProbePolicy
from tui.fleet.running_profiles import RunningProfile, read_state_and_profiles
from tui.fleet.server_log import ServerLog
from tui.fleet.server_state import server_snapshot
from tui.fleet.snapshot import FleetSnapshot, ServerState
from tui.fleet.spec import FleetSpec
from tui.fleet.tracker import (
    Tracker,
    judge_known,
    judge_recorded,
    recorded_process,
)
from tui.gpu.snapshot import GpuSnapshot, GpuSource
from tui.servers.batch_fetch import BatchFetcher
from tui.servers.discovery import find_servers
from tui.servers.keepalive import Answer, lean_transport
from tui.servers.probe import ServerLoad, ServerProbe
from tui.state.cordons import CordonWatch, address_of
from tui.state.fleet_state import FleetState


class FleetMonitor:
    """Polls a fleet and returns immutable snapshots. Not thread-safe: one poll at a time."""

    def __init__(
        self,
        spec: FleetSpec,
        gpu_source: GpuSource,
        *,
        client: httpx.AsyncClient | None = None,
        probe_timeout: float = 0.8,
        server_info_interval: float = 30.0,
        health_interval: float = 30.0,
        ready_interval: float = 10.0,
        discovery_interval: float = 5.0,
        stuck_after_s: float = DEFAULT_FLOOR_S,
        clock: Callable[[], float] = time.time,
        sampled_gpus: bool = True,
    ) -> None:
        """Args:
        spec: The fleet to watch.
        gpu_source: Where GPU readings come from (NVML, simulated, none).
        client: Shared async HTTP client (default: one owned and closed by the monitor).
        probe_timeout: Seconds per cheap HTTP request (``/ready``, ``/metrics``); slower answers
            count as timeouts (STALE). The generating probe waits ``HEALTH_TIMEOUT_S``.
        server_info_interval: Seconds between /server_info reads of a ready server
            (``tui.fleet.probes.ProbePolicy`` says why for each interval).
        health_interval: Seconds between generating health probes of a ready server.
        ready_interval: Seconds between ``/ready`` probes of a ready server whose ``/metrics``
            keeps answering 200 (0 asks readiness every poll).
        discovery_interval: Seconds between process-table scans for servers not yet found.
        stuck_after_s: The liveness bound's floor (``tui.fleet.liveness``): a server with
            requests and no progress for this long (or five typical progress gaps) is STUCK.
        clock: Wall clock (tests pass a fake one).
        sampled_gpus: Show every GPU the source samples, a panel without a server for those
            the spec does not name (False: the spec's GPUs only, as ``status --ports`` asks).
        """
        self.spec = spec
        self.gpu_source = gpu_source
        self._own_client = client is None
        # The lean keep-alive transport: these probes run every second for days. The probes
        # send to it straight when the client is the monitor's own (None: httpx's own).
        transport = lean_transport() if client is None else None
        self._client = client or httpx.AsyncClient(transport=transport)
        # The steady /metrics reads go through the batch only with the monitor's own wire (a
        # given client may be a test's mock transport, which the batch would bypass), and not
        # with GPUFLEET_PLAIN=batch (``tui.plain``): then on the loop like the other probes.
        own_batch = client is None and not plain.off("batch")
        self._batch = BatchFetcher() if own_batch else None
        self.probe_timeout = probe_timeout
        self.probes = ProbePolicy(server_info_interval, health_interval, ready_interval, clock)
        """Which HTTP probes each server gets at a poll (``tui.fleet.probes``)."""
        self.discovery_interval = discovery_interval
        self._clock = clock
        self._sampled_gpus = sampled_gpus
        self._trackers = [
            Tracker(
                s,
                ServerProbe(self._client, s.port, s.host, probe_timeout, direct=transport),
                progress=ProgressWatch(floor_s=stuck_after_s),
            )
            for s in sorted(spec.servers, key=lambda s: s.gpu_index)
        ]
        self._last_scan = float("-inf")
        self._profiles: dict[int, RunningProfile] = {}
        self._state: FleetState = {}
        self._profiles_key: tuple[int, int, int] | None = None
        self._cordons = CordonWatch()
        """The cordons: a server gone while its address is cordoned was stopped by gpufleet."""
        self.insight = Insight()
        """Fleet-wide readings: latency, imbalance, energy (``tui.fleet.insight``)."""

    def log_paths(self) -> dict[int, str]:
        """The log each GPU's server is followed in: what the console shows, and what the tuning
        form's preflight calibrates on (``tui.fleet.log_paths``). Read from another thread too:
        each follower is replaced whole, never changed in place."""
        return {
            t.spec.gpu_index: str(follower.path)
            for t in self._trackers
            if (follower := t.follower) is not None
        }

    def mark_stopping(self, gpu: int, stopping: bool = True) -> None:
        """Show the server on ``gpu`` as STOPPING until its process is gone or replaced.

        Args:
            gpu: GPU index of a server of the fleet.
            stopping: False withdraws the mark (the stop was refused or cancelled).

        Raises:
            ValueError: ``gpu`` has no server in the fleet.
        """
        tracker = next((t for t in self._trackers if t.spec.gpu_index == gpu), None)
        if tracker is None:
            known = sorted(t.spec.gpu_index for t in self._trackers)
            raise ValueError(f"gpu={gpu} has no server in the fleet; allowed {known}")
        tracker.stopping = stopping
        tracker.stop_pid = tracker.process.pid if stopping and tracker.process else None
        tracker.stop_asked = stopping

    async def aclose(self) -> None:
        """Stop the generating probes, close log files (and the HTTP client if the monitor's)."""
        tasks = [t.health_task for t in self._trackers if t.health_task is not None]
        for tracker in self._trackers:
            tracker.cancel_health()
            if tracker.follower is not None:
                tracker.follower.close()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*tasks, return_exceptions=True)
        if self._batch is not None:
            self._batch.close()
        if self._own_client:
            await self._client.aclose()

    # --- blocking parts, run in threads -------------------------------------------------------

    def _sample_gpus(self) -> tuple[tuple[GpuSnapshot, ...], str, str]:
        """The readings, the source's description, and why sampling failed ("" when it did not).

        The description is taken here too: for the simulated source it lists the device
        records, a file read that must not run on the event loop.
        """
        try:
            return self.gpu_source.sample(), self.gpu_source.describe(), ""
        except Exception as error:  # a driver hiccup must cost one frame, not the console
            return (), "", f"GPU sampling failed: {type(error).__name__}: {error}"

    def _blocking_part(
        self, now: float
    ) -> tuple[tuple[GpuSnapshot, ...], str, str, dict[int, ServerLoad | None]]:
        """The poll's blocking work: the host side, the GPU sample (``_sample_gpus``), then the
        steady load reads (``_steady_loads``).

        Why one call: each ``asyncio.to_thread`` costs an executor submission, a future pair
        and a wake-up of the loop through its self-pipe; the GPU sample ran in a second one
        beside the host side and the probes. Run after the host side, it delays the probes by
        the sample (about 0.6 ms with NVML); a hung driver held the poll before too, which
        awaited the sample at its end. The steady reads come after the host side, which may
        have reset a relaunched server's tracker: such a server is not steady any more.
        """
        self._host_side()
        gpus, description, error = self._sample_gpus()
        self.insight.read_slow(self.gpu_source)
        return gpus, description, error, self._steady_loads(now)

    def _steady_loads(self, now: float) -> dict[int, ServerLoad | None]:
        """Read ``/metrics`` of every server whose load read suffices this poll, in one batch.

        Returns:
            By tracker position: the load, or None when the read failed (that server's
            readiness is asked on the event loop the same poll, as before the batch).
        """
        if self._batch is None:
            return {}
        due = []
        for position, tracker in enumerate(self._trackers):
            suffices = self.probes.load_suffices(tracker, now)
            target = tracker.probe.steady_target() if suffices else None
            if target is not None:
                due.append((position, tracker, target))
        if not due:
            return {}
        outcomes = self._batch.fetch_all([target for *_, target in due], self.probe_timeout)
        return {
            position: tracker.probe.read_load(outcome) if isinstance(outcome, Answer) else None
            for (position, tracker, _), outcome in zip(due, outcomes, strict=True)
        }

    def _read_profiles(self) -> None:
        """Read what each GPU runs from the fleet state, when the file changed since.

        The inode is part of the key: every write replaces the file with a new one, so a
        rewrite of the same size within one timestamp tick (a few ms) still reads as a change.
        The state decides ``unknown``, not only the panels' profile names."""
        try:
            stat = paths.fleet_state_file().stat()
            key: tuple[int, int, int] | None = (stat.st_mtime_ns, stat.st_size, stat.st_ino)
        except OSError:
            key = None
        if key != self._profiles_key:
            self._profiles_key = key
            self._state, self._profiles = read_state_and_profiles() if key is not None else ({}, {})

    def _host_side(self) -> None:
        """Refresh process liveness (and discovery, rarely), the running profiles, and read
        every log's new lines."""
        self._read_profiles()
        now = time.monotonic()
        unknown = []
        cordoned = self._cordons.current()
        for tracker in self._trackers:
            if not tracker.spec.is_local:
                continue
            tracker.cordoned = address_of(tracker.spec.host, tracker.spec.port) in cordoned
            if tracker.alive_check is not None and tracker.alive_check():
                tracker.alive = True
                continue
            if tracker.alive:
                tracker.went_away()
            tracker.alive = False
            unknown.append(tracker)
        if unknown:
            # The fleet record (written by tui.control at launch) is the first source of truth:
            # it names a relaunched server the moment it starts, with its exact log path. The
            # state was read this poll when it changed (``_read_profiles``).
            for tracker in unknown:
                entry = self._state.get(tracker.spec.gpu_index)
                record = entry.server if entry is not None else None
                process = recorded_process(record, tracker.spec.port)
                if process is not None:
                    tracker.new_process(process)
                    tracker.alive = True
            unknown = [t for t in unknown if not t.alive]
        if unknown and now - self._last_scan >= self.discovery_interval:
            self._last_scan = now
            hints = {t.spec.port: t.spec.log_path for t in unknown if t.spec.log_path}
            found = find_servers([t.spec.port for t in unknown], log_hints=hints)
            for tracker in unknown:
                process = found.get(tracker.spec.port)
                if process is not None:
                    tracker.new_process(process)
                    tracker.alive = True
        for tracker in self._trackers:
            entry = self._state.get(tracker.spec.gpu_index)
            judge_known(tracker, entry)
            judge_recorded(tracker, entry)
        for tracker in self._trackers:
            process_log = tracker.process.log_path if tracker.process else None
            path = process_log or tracker.spec.log_path
            if path and (tracker.follower is None or str(tracker.follower.path) != path):
                if tracker.follower is not None:
                    tracker.follower.close()
                tracker.follower = ServerLog(path)
            if tracker.follower is not None:
                tracker.log = tracker.follower.poll()
                if not tracker.log.ready:
                    tracker.log_ready_at = None
                elif tracker.log_ready_at is None:
                    tracker.log_ready_at = self._clock()

    # --- joining ------------------------------------------------------------------------------

    async def poll(self) -> FleetSnapshot:
        """Take one snapshot of the whole fleet.

        Returns:
            One panel per GPU (configured or sampled), in index order.
        """
        # Processes, logs and GPUs first, in one thread hop (a millisecond or two): a relaunch
        # resets a tracker, and the probes that follow must not race with that reset.
        now = self._clock()
        gpus, description, gpu_error, steady = await asyncio.to_thread(self._blocking_part, now)
        await self.probes.probe_all(self._trackers, steady, now)
        note = gpu_error or description
        now = self._clock()
        servers = {
            t.spec.gpu_index: server_snapshot(t, now, self._profiles.get(t.spec.gpu_index))
            for t in self._trackers
        }
        devices = {
            t.spec.gpu_index: card_of(t.spec, self._state.get(t.spec.gpu_index))
            for t in self._trackers
        }
        panels = join_panels(
            self.spec.gpu_indices(),
            devices,
            servers,
            gpus,
            self._sampled_gpus,
            gpu_error or f"no reading: {note}",
        )
        soon = any(
            t.state is ServerState.STARTING and (t.log.ready or t.log.phase == "warming up")
            for t in self._trackers
        )
        snapshot = FleetSnapshot(panels=panels, gpu_source=note, taken_at=now, refresh_soon=soon)
        return self.insight.finish(snapshot, self._trackers)

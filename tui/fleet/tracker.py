"""The monitor's per-server memory between polls, and the small readings it derives.

Mutable, owned by one :class:`~tui.fleet.monitor.FleetMonitor`; nothing here leaves the monitor
except through the immutable snapshot.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import TypeVar

import psutil

from tui.fleet.latency import LatencyWindow
from tui.fleet.liveness import ProgressWatch
from tui.fleet.server_log import EMPTY_VIEW, ServerLog
from tui.fleet.snapshot import ServerState
from tui.fleet.spec import ServerSpec
from tui.logs.state import LogView
from tui.servers.discovery import LiveCheck, ServerProcess, is_alive
from tui.servers.probe import Readiness, ServerInfo, ServerLoad, ServerProbe
from tui.servers.procinfo import boot_id, exit_status, start_ticks
from tui.state.fleet_state import GpuState, ProcessRecord

_N = TypeVar("_N", int, float)


@dataclass
class Tracker:
    """Mutable per-server memory between polls (never leaves the monitor)."""

    spec: ServerSpec
    """The server as configured."""
    probe: ServerProbe
    """Its HTTP probes."""
    process: ServerProcess | None = None
    """Its main process, once found."""
    alive_check: LiveCheck | None = None
    """Whether ``process`` still runs (made with it: it keeps psutil's handle between polls)."""
    alive: bool = False
    """The process was alive at the last look."""
    follower: ServerLog | None = None
    """Its log, followed."""
    log: LogView = EMPTY_VIEW
    """What the log says about the current launch."""
    readiness: Readiness | None = None
    """The last readiness answer (``/ready``)."""
    load: ServerLoad | None = None
    """The last load reading (``/metrics`` or ``/v1/loads``)."""
    info: ServerInfo | None = None
    """The last ``/server_info``."""
    info_at: float = 0.0
    """When ``/server_info`` was last read."""
    ever_ready: bool = False
    """It was ready at some point of this launch."""
    ready_at: float | None = None
    """When it was first seen ready."""
    log_ready_at: float | None = None
    """When this launch's ready line (``The server is fired up and ready to roll!``) was first
    read from its log (None: not yet)."""
    health: Readiness | None = None
    """The last generating probe's answer (None: none finished since launch)."""
    health_at: float = float("-inf")
    """When the last generating probe started."""
    health_task: asyncio.Task[Readiness] | None = None
    """The generating probe in flight, if any (never awaited by the refresh)."""
    checked_at: float = float("-inf")
    """When readiness was last probed (between, a 200 from /metrics stands for it)."""
    progress: ProgressWatch = field(default_factory=ProgressWatch)
    """Whether the scheduler still makes progress."""
    state: ServerState = ServerState.ABSENT
    """The state the last snapshot showed."""
    stopping: bool = False
    """A stop was requested (``FleetMonitor.mark_stopping``) and not yet seen to finish."""
    stop_pid: int | None = None
    """The pid that was to stop (None: none was known), so a relaunch is not shown STOPPING."""
    known: bool | None = None
    """Whether what serves the port is the server the fleet state records for this GPU: None
    when the state says nothing of this GPU on this port (a fleet gpufleet did not launch);
    False when the state records the GPU but not this process (an ``unknown`` server)."""
    load_at: float | None = None
    """When the last load reading answered (None: none since launch)."""
    decode_mark: tuple[int, float | None] | None = None
    """(decode lines, the throughput gauge) at the last poll: a change is a new Decode line."""
    decode_at: float | None = None
    """When the last Decode line (or gauge change) was seen (None: none since launch)."""
    stop_asked: bool = False
    """A stop of this process was asked (``FleetMonitor.mark_stopping``): gone, it stopped."""
    record: ProcessRecord | None = None
    """The server the fleet state records for this GPU on this port (None: none)."""
    recorded_alive: bool = False
    """The fleet state recorded this very process while it ran: gone, with its record dropped
    or replaced since, gpufleet stopped it (or relaunched the GPU)."""
    cordoned: bool = False
    """Its address is cordoned now: an operation of gpufleet is stopping it."""
    exit_status: str | None = None
    """How its process ended, read from the kernel when it was first seen gone (None: not
    gone, or not known)."""
    latency: LatencyWindow = field(default_factory=LatencyWindow)
    """Its latency histograms over the rolling window; kept across a relaunch (the window spans
    it, the new process counted from zero: ``tui.fleet.latency``)."""

    def new_process(self, process: ServerProcess) -> None:
        """A different process now serves the port: forget the previous launch."""
        self.process = process
        self.alive_check = LiveCheck(process.pid, process.create_time, process.start_ticks)
        self.stopping = False
        self.ever_ready = False
        self.ready_at = None
        self.log_ready_at = None
        self.cancel_health()
        self.health = None
        self.health_at = float("-inf")
        self.checked_at = float("-inf")
        self.progress.reset()
        self.readiness = None
        self.info = None
        self.info_at = 0.0
        self.load = None
        self.load_at = None
        self.decode_mark = None
        self.decode_at = None
        self.stop_asked = False
        self.recorded_alive = False
        self.exit_status = None
        self.probe.reset()

    def went_away(self) -> None:
        """Its process is gone since the last look: keep how it ended, while the kernel still
        says (a zombie not yet reaped)."""
        if self.process is not None:
            self.exit_status = exit_status(self.process.pid, self.process.start_ticks)

    def cancel_health(self) -> None:
        """Drop the generating probe in flight (its server is gone or replaced)."""
        if self.health_task is not None:
            self.health_task.cancel()
            self.health_task = None


def recorded_process(record: ProcessRecord | None, port: int) -> ServerProcess | None:
    """The recorded server for a GPU, when it serves ``port`` and is still the same process
    (same start ticks and boot: a clock step since its launch changes nothing)."""
    if record is None or record.port != port:
        return None
    if record.start_ticks:
        if record.boot_id and record.boot_id != boot_id():
            return None
        if start_ticks(record.pid) != record.start_ticks:
            return None
        try:
            proc = psutil.Process(record.pid)
            if proc.status() == psutil.STATUS_ZOMBIE:
                return None
            create_time = proc.create_time()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            return None
    elif is_alive(record.pid, record.create_time):  # a record of an older gpufleet
        create_time = record.create_time
    else:
        return None
    return ServerProcess(
        pid=record.pid,
        create_time=create_time,
        port=record.port,
        cmdline=record.cmdline,
        log_path=record.log_path or None,
        found_by="record",
        start_ticks=record.start_ticks or None,
    )


def judge_known(tracker: Tracker, entry: GpuState | None) -> None:
    """Set ``tracker.known``: whether what serves its port is the server the fleet state
    records for its GPU (None: the state says nothing of this GPU on this port)."""
    if not tracker.spec.is_local or entry is None or entry.port != tracker.spec.port:
        tracker.known = None
        return
    record, process = entry.server, tracker.process
    tracker.known = (
        record is not None
        and process is not None
        and process.pid == record.pid
        and (not record.start_ticks or process.start_ticks in (None, record.start_ticks))
    )


def judge_recorded(tracker: Tracker, entry: GpuState | None) -> None:
    """Note what the fleet state records for the tracker's GPU (the record of gpufleet's intent:
    a server it stopped loses its record), and whether it recorded the running process."""
    here = entry is not None and entry.port == tracker.spec.port
    tracker.record = record = entry.server if here and entry is not None else None
    if record and record.start_ticks and not (tracker.process or tracker.exit_status):
        # Recorded, never seen running: how it ended, if it is a zombie still.
        tracker.exit_status = exit_status(record.pid, record.start_ticks)
    if tracker.alive and tracker.known:
        tracker.recorded_alive = True


def pressure_words(log: LogView) -> str | None:
    """The last pressure event in a few words: 'retracted 3', 'prefill OOM', 'decode OOM'."""
    if log.pressure_reason == "retract":
        return f"retracted {log.pressure_retracted if log.pressure_retracted is not None else '?'}"
    if log.pressure_reason in ("prefill_oom", "decode_oom"):
        return f"{log.pressure_reason.split('_')[0]} OOM"
    return None


def stamp_age(stamp: str | None, now: float) -> float | None:
    """Seconds from a log stamp (local ``YYYY-MM-DD HH:MM:SS``) to ``now``; None if undated."""
    if stamp is None or len(stamp) < 19 or stamp[4] != "-":
        return None
    try:
        when = time.mktime(time.strptime(stamp[:19].replace("T", " "), "%Y-%m-%d %H:%M:%S"))
    except ValueError:
        return None
    return max(now - when, 0.0)


def note_decode(tracker: Tracker, now: float) -> float | None:
    """Feed this poll's decode count and gauge; seconds since the last Decode line, or None.

    The first look after attaching dates the line from its log stamp (a fleet idle for an hour
    must not read as decoding now); later changes are dated by the monitor's clock.
    """
    load = tracker.load
    mark = (tracker.log.decode_lines, load.gen_throughput if load else None)
    if mark != tracker.decode_mark and (mark[0] > 0 or mark[1] is not None):
        first = tracker.decode_mark is None
        tracker.decode_mark = mark
        age = stamp_age(tracker.log.decode_stamp, now) if first else None
        tracker.decode_at = now - (age or 0.0)
    return None if tracker.decode_at is None else max(now - tracker.decode_at, 0.0)


def live_number(live: bool, probed: _N | None, logged: _N | None) -> _N | None:
    """Live load prefers the probe (fresh) over the log (up to 40 iterations old)."""
    if not live:
        return None
    return probed if probed is not None else logged

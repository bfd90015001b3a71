"""What is wrong now, rule by rule: each rule's condition read from one fleet snapshot and the job's
status document, with the little memory some need (a GPU's tok/s over the last hour, its queue a
minute ago, when the job last completed a prompt). Which conditions become alerts, and when, is
the engine's (``tui.ops.alerts.engine``: the hysteresis).
"""

from __future__ import annotations

import statistics
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from tui.fleet.snapshot import FleetSnapshot, GpuPanel, ServerState
from tui.ops.alerts.rules import Rule
from tui.pipeline.status import PipelineStatus

MEDIAN_S = 3600.0
"""throughput_low compares with the GPU's own median over this long."""
MEDIAN_EVERY_S = 10.0
"""Seconds between two tok/s readings kept for that median."""
MEDIAN_MIN_S = 300.0
"""A median over less history than this is not trusted (a fleet just started)."""
QUEUE_SPAN_S = 60.0
"""queue_growing compares with the queue this long ago."""
STATUS_SILENT_S = 60.0
"""A running job's status document not rewritten for this long: the pipeline is gone or hung
(it rewrites it every second)."""
DOWN = frozenset({ServerState.FAILED, ServerState.STOPPED, ServerState.CRASHED})
"""States of a server that no longer serves."""
SERVER_RULES = frozenset({"crashed", "stuck", "throughput_low", "queue_growing", "capped"})
"""Rules about servers: held (neither fired nor cleared) while an operation changes the fleet,
whose stops and starts are its own."""


@dataclass(frozen=True, slots=True)
class Condition:
    """One rule's condition, true now for one subject."""

    rule: str
    """The rule (``tui.ops.alerts.rules.KINDS``)."""
    subject: str
    """What it is about: 'GPU 3' (with its node in a console over many nodes), or 'job'."""
    gpu: int | None
    """The GPU's panel index (None: the job)."""
    message: str
    """What is wrong, in one line."""
    since: float | None = None
    """When it began, where that is known better than when it was first seen (the job's last
    completed prompt)."""


def _subject(panel: GpuPanel) -> str:
    return f"{panel.node} GPU {panel.local_index}" if panel.node else f"GPU {panel.gpu_index}"


def _num(value: float) -> str:
    return f"{value:,.0f}"


class Watch:
    """The readings' memory the conditions need (owned by one engine)."""

    def __init__(self) -> None:
        self._tok_s: dict[int, deque[tuple[float, float]]] = {}
        self._queue: dict[int, deque[tuple[float, int]]] = {}
        self._done: tuple[int, float] | None = None
        self._states: dict[int, ServerState] = {}
        self._crashed: set[int] = set()

    def conditions(
        self,
        rules: Mapping[str, Rule],
        snapshot: FleetSnapshot,
        job: PipelineStatus | None,
        now: float,
        operation: bool = False,
    ) -> Iterator[Condition]:
        """Every condition true now (the memory is fed as it goes); ``operation``: an operation
        changes the fleet now (a server it stops has not crashed)."""
        for panel in snapshot.panels:
            yield from self._server(rules, panel, now, operation)
            yield from self._gpu(rules, panel)
        found = self._job(rules.get("job_stalled"), job, now)
        if found is not None:
            yield found

    def _went_down(self, index: int, state: ServerState, operation: bool) -> bool:
        """Whether the server crashed: the monitor says so (``crashed``: it died and nothing of
        gpufleet's stopped it), it failed, or it exited while serving or starting (not after a
        drain: STOPPING) while no operation was changing the fleet; it stays crashed until it
        serves again. At the first look only a failed or crashed server is (a stopped one may
        have been stopped on purpose)."""
        before = self._states.get(index)
        self._states[index] = state
        drained = before in DOWN or before is ServerState.STOPPING
        seen = before is not None or state is ServerState.FAILED
        if state not in DOWN:
            self._crashed.discard(index)
        elif state is ServerState.CRASHED or (not operation and not drained and seen):
            self._crashed.add(index)
        return index in self._crashed

    def _server(
        self, rules: Mapping[str, Rule], panel: GpuPanel, now: float, operation: bool
    ) -> Iterator[Condition]:
        server, who = panel.server, _subject(panel)
        if server is None:
            return
        index, state = panel.gpu_index, server.state
        if self._went_down(index, state, operation) and "crashed" in rules:
            if state is ServerState.CRASHED:
                how = f"crashed: {server.exit_status or 'exit status unknown'}" + (
                    f"; {server.last_error}" if server.last_error else ""
                )
            elif server.last_error:
                how = f"failed: {server.last_error}"
            else:
                how = f"is {state.value}"
            yield Condition("crashed", who, index, f"{who} server on :{server.port} {how}")
        if "stuck" in rules and state is ServerState.STUCK:
            for_s = f" for {server.stuck_for_s:.0f} s" if server.stuck_for_s else ""
            words = f"{who} server makes no progress{for_s} with requests waiting"
            yield Condition("stuck", who, index, words)
        if "stuck" in rules and state is ServerState.STALE:
            yield Condition("stuck", who, index, f"{who} server does not answer (probes time out)")
        if "capped" in rules and server.capped and state is ServerState.READY:
            asked = server.max_running_requested
            words = f"{who} max running requests capped to {server.max_running_effective}" + (
                f" (asked {asked})" if asked is not None else ""
            )
            yield Condition("capped", who, index, words)
        ready = state is ServerState.READY
        busy = ready and (server.running or 0) + (server.queued or 0) > 0
        low = rules.get("throughput_low")
        if low is not None and busy and server.gen_throughput is not None:
            median = self._median(index, now, server.gen_throughput)
            if median is not None and server.gen_throughput < low.threshold / 100 * median:
                share = server.gen_throughput / median if median else 0.0
                words = (
                    f"{who} tok/s {_num(server.gen_throughput)}, {share:.0%} of its 1-hour "
                    f"median {_num(median)}"
                )
                yield Condition("throughput_low", who, index, words)
        growing = rules.get("queue_growing")
        if growing is not None and ready and server.queued is not None:
            before = self._queue_before(index, now, server.queued)
            if before is not None and server.queued - before >= growing.threshold:
                words = f"{who} queue {server.queued}, +{server.queued - before} in a minute"
                yield Condition("queue_growing", who, index, words)

    def _median(self, gpu: int, now: float, tok_s: float) -> float | None:
        """The GPU's median tok/s over the last hour while it had requests (None: too little
        history yet); this reading is kept every ``MEDIAN_EVERY_S``."""
        kept = self._tok_s.setdefault(gpu, deque())
        if not kept or now - kept[-1][0] >= MEDIAN_EVERY_S:
            kept.append((now, tok_s))
        while kept and kept[0][0] < now - MEDIAN_S:
            kept.popleft()
        if now - kept[0][0] < MEDIAN_MIN_S:
            return None
        return statistics.median(v for _, v in kept)

    def _queue_before(self, gpu: int, now: float, queued: int) -> int | None:
        """The queue about a minute ago (None: not watched that long yet)."""
        kept = self._queue.setdefault(gpu, deque())
        kept.append((now, queued))
        while len(kept) >= 2 and kept[1][0] <= now - QUEUE_SPAN_S:
            kept.popleft()
        t, before = kept[0]
        return before if now - t >= QUEUE_SPAN_S else None

    def _gpu(self, rules: Mapping[str, Rule], panel: GpuPanel) -> Iterator[Condition]:
        gpu, who = panel.gpu, _subject(panel)
        if gpu is None:
            return
        hot = rules.get("gpu_hot")
        if hot is not None and gpu.temperature_c is not None and gpu.temperature_c >= hot.threshold:
            words = f"{who} at {gpu.temperature_c:.0f} °C (limit {hot.threshold:g} °C)"
            yield Condition("gpu_hot", who, panel.gpu_index, words)
        power = rules.get("gpu_power")
        watts, limit = gpu.power_w, gpu.power_limit_w
        if (
            power is not None
            and watts is not None
            and limit
            and watts >= power.threshold / 100 * limit
        ):
            words = f"{who} draws {watts:.0f} W, {watts / limit:.0%} of its {limit:.0f} W limit"
            yield Condition("gpu_power", who, panel.gpu_index, words)

    def _job(self, rule: Rule | None, job: PipelineStatus | None, now: float) -> Condition | None:
        if job is None or job.state != "running":
            self._done = None
            return None
        if self._done is None or job.done != self._done[0]:
            self._done = (job.done, now)
            return None
        if rule is None:
            return None
        progress = f"{job.done:,}/{job.total:,} done"
        silent = now - job.updated_at
        if silent > STATUS_SILENT_S:
            words = f"job stalled: {progress}; its status not rewritten for {silent:.0f} s"
        else:
            words = f"job stalled: {progress}, none completed for {now - self._done[1]:.0f} s"
        return Condition("job_stalled", "job", None, words, since=self._done[1])

"""Immutable results and progress events of one apply (what the UI and the CLI consume)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeVar

from tui.sglang.caps import WARNED, running_capped
from tui.words import counted

_T = TypeVar("_T")

Verdict = Literal["better", "worse", "no measurable difference", "not measured"]


@dataclass(frozen=True, slots=True)
class RequestedValues:
    """The tuning knobs a profile asks for on one GPU (None = left to SGLang's default)."""

    mem_fraction_static: float | None = None
    """--mem-fraction-static."""
    max_mamba_cache_size: int | None = None
    """--max-mamba-cache-size."""
    mamba_full_memory_ratio: float | None = None
    """--mamba-full-memory-ratio."""
    max_running_requests: int | None = None
    """--max-running-requests."""


@dataclass(frozen=True, slots=True)
class EffectiveValues:
    """What the server actually allocated (from its log and /server_info); None = not seen."""

    max_running_requests: int | None = None
    """Effective (possibly capped) max running requests."""
    mamba_slots: int | None = None
    """max_mamba_cache_size as allocated."""
    kv_tokens: int | None = None
    """max_total_num_tokens (KV pool size in tokens)."""
    available_gpu_mem_gb: float | None = None
    """available_gpu_mem from the summary line (headroom left after pools and graphs)."""
    cap_line: str | None = None
    """The log line that announced a max_running_requests cap, if any."""

    def merged(self, other: EffectiveValues) -> EffectiveValues:
        """Fill this record's missing fields from ``other`` (self wins where both are known)."""
        return EffectiveValues(
            max_running_requests=_first(self.max_running_requests, other.max_running_requests),
            mamba_slots=_first(self.mamba_slots, other.mamba_slots),
            kv_tokens=_first(self.kv_tokens, other.kv_tokens),
            available_gpu_mem_gb=_first(self.available_gpu_mem_gb, other.available_gpu_mem_gb),
            cap_line=_first(self.cap_line, other.cap_line),
        )


def _first(a: _T | None, b: _T | None) -> _T | None:
    return a if a is not None else b


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """The outcome of one GPU's relaunch: requested vs effective, timings, the failure line."""

    gpu: int
    """GPU index."""
    ok: bool
    """True when the server reached ready (/health_generate 200)."""
    profile: str
    """Name of the profile launched on this GPU."""
    requested: RequestedValues
    """What the profile asked for on this GPU (per-GPU override applied)."""
    effective: EffectiveValues
    """What the server allocated."""
    time_to_ready_s: float | None = None
    """Seconds from launch to ready; None when it never got ready."""
    free_memory_bytes: int | None = None
    """GPU memory free after ready, from the GPU source."""
    failure: str | None = None
    """Why it failed, in plain words ('OOM: ...', 'process exited with code 1', ...)."""
    error_line: str | None = None
    """The OOM or crash line from the server's log, when there was one."""
    error_reason: str | None = None
    """'oom', 'crash', 'exit', 'timeout', 'launch', 'release', 'refused' (the old server was not
    verified as the fleet's: nothing was signalled)."""
    phases: tuple[tuple[str, float], ...] = ()
    """Startup phases seen, with seconds since launch."""
    pid: int | None = None
    """Main process id of the launched server."""
    log_path: str | None = None
    """The server's log file."""
    stop_s: float | None = None
    """Seconds the GPU's old server took to stop (its drain, then its memory released) before
    this launch; None when nothing was stopped. A GPU was out of service for ``stop_s`` plus
    ``time_to_ready_s``: 'ready in 2s' alone left out a 20 s drain."""
    drain_timed_out: bool = False
    """The old server's drain ran past its deadline and it was signalled while it served."""
    lost_in_flight: int | None = None
    """Requests the old server's stop dropped in flight (0: none; None: nothing was stopped,
    or requests were lost and how many is unknown: see ``drain_timed_out``)."""
    drain_note: str | None = None
    """What the old server's stop did to its requests, when that is news (``drain timed out
    after 60 s: 16 requests running, 864 arrived during the drain; stopped by SIGTERM to its
    process group: 16 in-flight requests lost``)."""
    client_still_sending: bool = False
    """The old server's drain ended while a client was still sending (SGLang accepts new
    requests while it drains, and its exit drops what came after its last check): requests
    may have been lost, how many is unknown."""
    arrived_during_drain: int | None = None
    """Requests that reached the old server after its SIGTERM (None: not counted, or nothing
    was stopped)."""

    @property
    def status(self) -> str:
        """done (ready), refused (nothing was signalled) or failed."""
        if self.ok:
            return "done"
        return "refused" if self.error_reason == "refused" else "failed"

    @property
    def lost_requests(self) -> bool:
        """The old server's stop dropped requests in flight, or may have: a timed-out drain
        whose count is unknown, or a drain that ended while a client was still sending."""
        return self.drain_timed_out or bool(self.lost_in_flight) or self.client_still_sending

    @property
    def capped(self) -> bool:
        """True when SGLang ran fewer concurrent requests than the profile asked for."""
        said = WARNED if self.effective.cap_line is not None else None
        asked = self.requested.max_running_requests
        return bool(running_capped(asked, self.effective.max_running_requests, said))


LOAD_CHANGED = "the load changed"
"""How a verdict not taken because the load changed begins its note (``tui.rollout.load``)."""


@dataclass(frozen=True, slots=True)
class ThroughputComparison:
    """Per-interval output tokens/s before and after, and the verdict with its interval."""

    before: tuple[float, ...]
    """Per-interval fleet output tokens/s before the change."""
    after: tuple[float, ...]
    """Per-interval fleet output tokens/s after the change (warm-up excluded)."""
    verdict: Verdict
    """better / worse / no measurable difference / not measured."""
    relative_change: float | None = None
    """mean(after)/mean(before) - 1."""
    ci_low: float | None = None
    """Lower bound of the confidence interval on the relative change."""
    ci_high: float | None = None
    """Upper bound of the confidence interval on the relative change."""
    confidence_level: float = 0.95
    """Two-sided level of [ci_low, ci_high]."""
    sureness: float | None = None
    """1 - p of Welch's test of 'no change': how sure the data make us that there is a change."""
    note: str = ""
    """Why nothing was measured, or caveats (too few samples)."""
    before_window: tuple[float, float] | None = None
    """time.time() at the start and end of the window before (None: not measured); the
    generation pane shades it under the output-rate chart."""
    after_window: tuple[float, float] | None = None
    """time.time() at the start and end of the window after (None: not measured)."""
    load_before: float | None = None
    """The offered load (running + queued requests) per GPU before (None: not known)."""
    load_after: float | None = None
    """The same after."""

    def describe(self) -> str:
        """One line for humans, e.g. 'better: +12.0% (95% CI +8.1% .. +15.9%, sure 99.9%)'."""
        if self.relative_change is None or self.ci_low is None or self.ci_high is None:
            if self.note.startswith(LOAD_CHANGED):  # 'not measured: the load changed (...)'
                return f"{self.verdict}: {self.note}"
            return f"{self.verdict}" + (f" ({self.note})" if self.note else "")
        level = f"{self.confidence_level:.0%}"
        sure = f", sure {self.sureness:.1%}" if self.sureness is not None else ""
        # The words of ``tui.retune.verdict.verdict_words``, with the sureness in the bracket.
        return (
            f"{self.verdict}: {self.relative_change:+.1%} ({level} CI {self.ci_low:+.1%} .. "
            f"{self.ci_high:+.1%}{sure})"
        )


@dataclass(frozen=True, slots=True)
class ApplyResult:
    """Everything one apply did, for the journal and the exit code."""

    profile: str
    """Profile applied."""
    previous_profiles: dict[int, str | None]
    """Profile each GPU ran before (None = unknown or nothing)."""
    gpus: tuple[int, ...]
    """GPUs targeted."""
    reports: tuple[VerifyReport, ...]
    """One per targeted GPU, in GPU order."""
    throughput: ThroughputComparison
    """Before/after comparison."""
    started_at: float
    """time.time() when the apply began."""
    finished_at: float
    """time.time() when it ended."""
    refused: tuple[str, ...] = ()
    """Validation errors that refused the apply (nothing was stopped)."""
    diff: tuple[str, ...] = field(default_factory=tuple)
    """Human-readable profile diff lines (previous vs applied)."""

    @property
    def ok(self) -> bool:
        """True when nothing was refused and every targeted GPU reached ready."""
        return not self.refused and bool(self.reports) and all(r.ok for r in self.reports)

    @property
    def lost_in_flight(self) -> int | None:
        """Requests the stops dropped in flight, over every GPU (None: nothing was stopped, or
        a loss whose count is unknown)."""
        return total_lost(self.reports)

    @property
    def lost_requests(self) -> bool:
        """Some GPU's stop dropped requests in flight (a drain that timed out)."""
        return any(r.lost_requests for r in self.reports)


def _on(reports: Sequence[VerifyReport]) -> str:
    gpus = ", ".join(str(r.gpu) for r in reports)
    return f"GPU {gpus}" if len(reports) == 1 else f"GPUs {gpus}"


def lost_summary(reports: Iterable[VerifyReport]) -> str:
    """``drain timed out on GPU 0: 16 in-flight requests lost``, and/or ``drain on GPU 1 ended
    while a client was still sending (40 arrived during the drain): requests sent in its last
    moment may have been lost`` ("" when no stop lost any, or could have)."""
    reports = list(reports)
    lossy = [r for r in reports if r.drain_timed_out or r.lost_in_flight]
    sending = [r for r in reports if r.client_still_sending and r not in lossy]
    parts = []
    if lossy:
        where = _on(lossy)
        timed_out = "drain timed out" if any(r.drain_timed_out for r in lossy) else "stopped"
        lost = total_lost(lossy)
        if lost is None:
            parts.append(f"{timed_out} on {where}: in-flight requests lost (how many is unknown)")
        else:
            parts.append(f"{timed_out} on {where}: {counted(lost, 'in-flight request')} lost")
    if sending:
        counts = [r.arrived_during_drain for r in sending]
        arrived = (
            f" ({sum(c for c in counts if c is not None)} arrived during the drain)"
            if all(c is not None for c in counts)
            else ""
        )
        parts.append(
            f"drain on {_on(sending)} ended while a client was still sending{arrived}: "
            "requests sent in its last moment may have been lost"
        )
    return "; ".join(parts)


def total_lost(reports: Iterable[VerifyReport]) -> int | None:
    """The requests lost in flight over ``reports`` (None when none was stopped, or when a
    loss has no count)."""
    counts = [r.lost_in_flight for r in reports if r.stop_s is not None or r.drain_timed_out]
    if any(r.drain_timed_out and r.lost_in_flight is None for r in reports):
        return None
    known = [c for c in counts if c is not None]
    return sum(known) if known else None


@dataclass(frozen=True, slots=True)
class GpuPhase:
    """A GPU moved to a new step or startup phase ('stopping', 'loading weights', ...)."""

    gpu: int
    """GPU index."""
    phase: str
    """Step or startup phase in words."""
    elapsed_s: float = 0.0
    """Seconds since this GPU's apply began."""


@dataclass(frozen=True, slots=True)
class GpuReady:
    """A GPU's server answered /health_generate 200."""

    gpu: int
    """GPU index."""
    report: VerifyReport
    """Its verify report."""


@dataclass(frozen=True, slots=True)
class GpuFailed:
    """A GPU's relaunch failed; its process group has been stopped."""

    gpu: int
    """GPU index."""
    report: VerifyReport
    """Its verify report, with the failure line."""


@dataclass(frozen=True, slots=True)
class MeasureProgress:
    """A throughput measurement stage started or produced a sample."""

    stage: Literal["before", "warm-up", "after"]
    """Which window."""
    samples: int
    """Samples taken so far in this stage."""
    window_s: float
    """Stage length."""


@dataclass(frozen=True, slots=True)
class ApplyRefused:
    """The apply was refused before anything was stopped."""

    errors: tuple[str, ...]
    """Validation errors, each naming field, value and allowed range."""


@dataclass(frozen=True, slots=True)
class ApplyFinished:
    """The apply ended (successfully or not)."""

    result: ApplyResult
    """Its result."""


RetuneEvent = GpuPhase | GpuReady | GpuFailed | MeasureProgress | ApplyRefused | ApplyFinished
"""Any progress event of an apply."""

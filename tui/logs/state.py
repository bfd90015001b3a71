"""Per-server state accumulated from log events: what the console shows from a server's log."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from tui.logs import events as ev
from tui.logs.errors import NON_FATAL_REASONS
from tui.logs.events import LogEvent
from tui.logs.ingest import IngestSummary
from tui.sglang.caps import WARNED

__all__ = ["NON_FATAL_REASONS", "LogState", "LogView"]

CHAIN_REASONS = frozenset(
    {"scheduler_exception", "sigquit", "killed", "exception", "subprocess_crashed", "warmup_failed"}
)
"""Reasons that follow a root cause in SGLang's process-death chain."""

ROOT_CAUSES = frozenset({"oom", "port_in_use"})
"""Reasons a later link of the chain never hides. ``port_in_use``: uvicorn cannot bind, runs the
lifespan's shutdown, which joins the warmup thread (``srt/entrypoints/http_server.py``
``lifespan``); its 120 tries of ``/model_info`` then fail and print ``Initialization failed.
warmup error`` with a ``RuntimeError``/``ConnectionError`` a couple of minutes later: the port is
what the operator must fix."""

ALLOCATION_KINDS = frozenset({ev.WEIGHTS, ev.MAMBA_CACHE, ev.KV_CACHE, ev.POOL, ev.CAP})
ALLOCATION_KINDS |= {ev.RESET_48, ev.PROFILED}
"""Kinds whose lines are kept as the server's allocation lines."""

_PHASES = {
    ev.SERVER_ARGS: "starting",
    ev.DIST_INIT: "initialising",
    ev.MEMORY_BASELINE: "initialising",
    ev.WEIGHTS_BEGIN: "loading weights",
    ev.WEIGHTS: "allocating memory pools",
    ev.MAMBA_CACHE: "allocating KV cache",
    ev.KV_CACHE: "allocating KV cache",
    ev.MEMORY_POOL_END: "allocating KV cache",  # a draft pool may follow; then the graphs
    ev.GRAPH_CAPTURE: "capturing CUDA graphs",
    ev.POOL: "starting HTTP server",
    ev.STARTUP_TIMINGS: "starting HTTP server",
    ev.READY: "ready",
    ev.SHUTDOWN: "shutting down",
    ev.KILL_TREE: "shutting down",
}
"""The phase each startup line announces (SGLang 0.5.23's and 0.5.17's orders; see ``apply``
for the draft model's lines and the CUDA-graph progress bars)."""

DRAFT_PHASE = "loading draft weights"
"""With speculative decoding 0.5.17 prints a second ``Init torch distributed`` / ``Load weight``
pair for the draft after the target's weights: the phase goes on, it does not start over."""


@dataclass(frozen=True, slots=True)
class LogView:
    """An immutable copy of a :class:`LogState`, named like ``ServerSnapshot``'s fields."""

    phase: str
    """Startup phase from the last startup line ('' before any), 'ready', 'failed', ..."""
    ready: bool
    """The ready line was seen since the last launch."""
    failed: bool
    """A fatal error line was seen since the last launch."""
    kv_tokens: int | None
    """max_total_num_tokens (or the KV line's #tokens before the summary line)."""
    mamba_slots: int | None
    """max_mamba_cache_size as allocated."""
    max_running_requested: int | None
    """The requested max running requests when the log says it (cap, reset or server_args)."""
    max_running_effective: int | None
    """Effective max running requests (pool summary line, or the cap warning)."""
    cap_cause: str | None
    """Why SGLang's warning says it capped max running requests (``mamba``, ``kv_cache``,
    ``capacity``: the cap line's cause); None: no such line."""
    running: int | None
    """Running requests (last decode line)."""
    queued: int | None
    """Queued requests (last decode line)."""
    token_usage: float | None
    """KV token usage, 0..1."""
    mamba_usage: float | None
    """Mamba slot usage, 0..1."""
    gen_throughput: float | None
    """Last generation throughput, tokens/s."""
    accept_len: float | None
    """Speculative accept length."""
    throughput_history: tuple[float, ...]
    """Recent generation throughputs, oldest first."""
    allocation_lines: tuple[str, ...]
    """The allocation lines of the current launch, in order."""
    available_gpu_mem_gb: float | None
    """``available_gpu_mem`` from the summary line."""
    last_error: str | None
    """Text of the last error line."""
    error_reason: str | None
    """Its reason ('oom', 'sigquit', ...)."""
    error_fatal: bool
    """Whether that error means the server is going down or cannot serve."""
    decode_lines: int
    """Decode lines seen since the last launch."""
    prefill_lines: int
    """Prefill lines seen since the last launch (a long prefill's chunks are progress too)."""
    pressure_reason: str | None = None
    """The last pressure event's reason ('retract', 'prefill_oom', 'decode_oom'), if any."""
    pressure_text: str | None = None
    """Its line."""
    pressure_retracted: int | None = None
    """``#retracted_reqs`` of the last retraction."""
    pressure_stamp: str | None = None
    """Its timestamp as printed (``2026-04-05 20:02:51``), when the line had one."""
    pressure_events: int = 0
    """Pressure lines seen since the last launch."""
    decode_stamp: str | None = None
    """The last decode line's timestamp as printed, when it had one (its age on attach)."""
    stopping: bool = False
    """The server got a SIGTERM since the launch (``SIGTERM received ... Draining``): it drains
    and exits, whoever sent it (SGLang 0.5.17's drain then ends in ``kill_process_tree``, exit
    code -9: a stop, not a crash)."""

    @property
    def capped(self) -> bool:
        """SGLang's log says it capped max running requests."""
        return self.cap_cause is not None


def _int(event: LogEvent, name: str, default: int | None) -> int | None:
    value = event.fields.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _float(event: LogEvent, name: str, default: float | None) -> float | None:
    value = event.fields.get(name)
    return float(value) if isinstance(value, int | float) else default


class LogState:
    """Accumulates one server's events; a new launch (``server_args`` line) starts it over.

    Not thread-safe: one worker owns it and hands :meth:`view` copies to others.
    """

    def __init__(self, history: int = 120, max_allocation_lines: int = 64) -> None:
        """Start empty.

        Args:
            history: Throughput readings kept for the sparkline (>= 1).
            max_allocation_lines: Allocation lines kept (>= 1); the oldest are dropped.
        """
        if history < 1:
            raise ValueError(f"history must be >= 1, got {history}")
        if max_allocation_lines < 1:
            raise ValueError(f"max_allocation_lines must be >= 1, got {max_allocation_lines}")
        self._history = history
        self._max_alloc = max_allocation_lines
        self.reset()

    def reset(self) -> None:
        """Forget everything (a new launch begins)."""
        self.phase = ""
        self.ready = False
        self.failed = False
        self.kv_tokens: int | None = None
        self.mamba_slots: int | None = None
        self.max_running_requested: int | None = None
        self.max_running_effective: int | None = None
        self.cap_cause: str | None = None
        self.latest_decode: LogEvent | None = None
        self.latest_prefill: LogEvent | None = None
        self.throughput_history: deque[float] = deque(maxlen=self._history)
        self.allocation_lines: deque[str] = deque(maxlen=self._max_alloc)
        self.available_gpu_mem_gb: float | None = None
        self.last_error: str | None = None
        self.error_reason: str | None = None
        self.error_fatal = False
        self.decode_lines = 0
        self.prefill_lines = 0
        self.pressure: LogEvent | None = None
        self.pressure_events = 0
        self.weights_seen = False
        self.stopping = False

    def apply(self, event: LogEvent) -> None:
        """Fold one event in (any kind; unknown kinds are ignored)."""
        kind, get = event.kind, event.fields.get
        if kind == ev.SERVER_ARGS:
            self.reset()
            self.max_running_requested = _int(event, "max_running_requests", None)
        if kind == ev.DECODE:
            self.latest_decode = event
            self.decode_lines += 1
            throughput = get("gen_throughput")
            if isinstance(throughput, int | float):
                self.throughput_history.append(float(throughput))
            return
        if kind == ev.PREFILL:
            self.latest_prefill = event
            self.prefill_lines += 1
            return
        if kind == ev.PRESSURE:
            self.pressure = event
            self.pressure_events += 1
            return
        if kind in ALLOCATION_KINDS:
            self.allocation_lines.append(event.text)
        if kind in _PHASES and not self.failed:
            self.phase = self._phase(event)
        if kind == ev.PROGRESS and get("graph") and not self.failed and not self.ready:
            self.phase = f"capturing CUDA graphs {get('done')}/{get('total')}"
        if kind == ev.UVICORN and not self.failed and not self.ready:
            self.phase = "warming up" if get("event") == "running" else "starting HTTP server"
        if kind == ev.MAMBA_CACHE:
            self.mamba_slots = _int(event, "max_mamba_cache_size", self.mamba_slots)
        elif kind == ev.KV_CACHE and self.kv_tokens is None:
            self.kv_tokens = _int(event, "tokens", None)  # the first pool is the target's
        elif kind == ev.POOL:
            self.kv_tokens = _int(event, "max_total_num_tokens", self.kv_tokens)
            self.max_running_effective = _int(
                event, "max_running_requests", self.max_running_effective
            )
            self.available_gpu_mem_gb = _float(
                event, "available_gpu_mem_gb", self.available_gpu_mem_gb
            )
        elif kind == ev.CAP:
            self.cap_cause = str(get("cause") or WARNED)
            self.max_running_effective = _int(event, "max_running_requests", None)
            self.max_running_requested = _int(event, "requested", self.max_running_requested)
            self.mamba_slots = _int(event, "max_mamba_cache_size", self.mamba_slots)
        elif kind == ev.RESET_48 and self.max_running_requested is None:
            self.max_running_requested = _int(event, "max_running_requests", None)
        elif kind == ev.READY:
            self.ready = True
        elif kind == ev.SHUTDOWN:
            self.stopping = True
        elif kind == ev.ERROR:
            reason = str(get("reason", "")) or None
            fatal = get("fatal")
            fatal = reason not in NON_FATAL_REASONS if not isinstance(fatal, bool) else fatal
            # A crash prints a chain (the OOM, then the scheduler's exception, SIGQUIT, Killed):
            # the cause is what the operator needs, so a later link never hides an OOM
            # or a port that was taken.
            if not (self.error_reason in ROOT_CAUSES and self.failed and reason in CHAIN_REASONS):
                self.last_error = event.text
                self.error_reason = reason
                self.error_fatal = fatal
            if fatal:
                self.failed = True
                self.phase = "failed"

    def _phase(self, event: LogEvent) -> str:
        """The phase ``event`` announces in this launch."""
        kind = event.kind
        if kind == ev.WEIGHTS:
            self.weights_seen = True
        elif kind in (ev.DIST_INIT, ev.MEMORY_BASELINE, ev.WEIGHTS_BEGIN) and self.weights_seen:
            return DRAFT_PHASE
        elif kind == ev.GRAPH_CAPTURE and event.get("stage") == "disabled":
            return self.phase  # 0.5.17 says a graph is not captured: nothing starts
        elif kind == ev.GRAPH_CAPTURE and event.get("stage") == "end":
            return self.phase  # keeps the bar's count until the next graph begins
        return _PHASES[kind]

    def apply_summary(self, summary: IngestSummary) -> None:
        """Fold in what :func:`~tui.logs.ingest.ingest_bytes` found, rare events in order.

        The latest prefill is applied before the latest decode; the throughput history gets one
        reading per summary (the chunk's last decode line), plus the counts. A summary that
        counted prefill lines without parsing the last (``last_prefill=False``) adds the count.
        """
        for event in summary.rare:
            self.apply(event)
        if summary.latest_prefill is not None:
            self.apply(summary.latest_prefill)
            self.prefill_lines += summary.prefill_lines - 1
        else:
            self.prefill_lines += summary.prefill_lines
        if summary.latest_decode is not None:
            self.apply(summary.latest_decode)
            self.decode_lines += summary.decode_lines - 1

    def view(self) -> LogView:
        """Return an immutable copy for another thread or the UI."""
        decode = self.latest_decode.fields if self.latest_decode else {}
        pressure = self.pressure

        def number(name: str) -> float | None:
            value = decode.get(name)
            return float(value) if isinstance(value, int | float) else None

        def count(name: str) -> int | None:
            value = decode.get(name)
            return value if isinstance(value, int) else None

        return LogView(
            phase=self.phase,
            ready=self.ready,
            failed=self.failed,
            kv_tokens=self.kv_tokens,
            mamba_slots=self.mamba_slots,
            max_running_requested=self.max_running_requested,
            max_running_effective=self.max_running_effective,
            cap_cause=self.cap_cause,
            running=count("running_req"),
            queued=count("queue_req"),
            token_usage=number("token_usage"),
            mamba_usage=number("mamba_usage"),
            gen_throughput=number("gen_throughput"),
            accept_len=number("accept_len"),
            throughput_history=tuple(self.throughput_history),
            allocation_lines=tuple(self.allocation_lines),
            available_gpu_mem_gb=self.available_gpu_mem_gb,
            last_error=self.last_error,
            error_reason=self.error_reason,
            error_fatal=self.error_fatal,
            decode_lines=self.decode_lines,
            prefill_lines=self.prefill_lines,
            pressure_reason=str(pressure.get("reason")) if pressure else None,
            pressure_text=pressure.text if pressure else None,
            pressure_retracted=pressure.get("retracted_reqs") if pressure else None,
            pressure_stamp=pressure.stamp if pressure else None,
            decode_stamp=self.latest_decode.stamp if self.latest_decode else None,
            pressure_events=self.pressure_events,
            stopping=self.stopping,
        )

"""Adapt the log parser's events (``tui.logs``) to the engine's ServerSignal facts.

Phases are the startup steps of sglang-ops.md (d); allocation lines become effective values; error
events become failures, except the ones that are about a single request, not the server.
"""

from __future__ import annotations

from collections.abc import Iterable

from tui.logs import events as ev
from tui.logs.events import LogEvent
from tui.retune.events import EffectiveValues
from tui.retune.ports import ServerSignal

NON_FATAL_REASONS = frozenset({"input_too_long", "health_check_failed"})
"""Error reasons about one request or one probe: the server keeps running, startup carries on."""

_UVICORN_PHASES = {"started": "starting HTTP server", "running": "warming up"}


def _int(value: object) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _float(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def phase_of(event: LogEvent) -> str | None:
    """The startup phase an event announces, or None."""
    kind = event.kind
    if kind == ev.SERVER_ARGS:
        return "resolving arguments"
    if kind in (ev.DIST_INIT, ev.MEMORY_BASELINE):
        return "initialising"
    if kind == ev.WEIGHTS_BEGIN:
        return "loading weights"
    if kind in (ev.MAMBA_CACHE, ev.KV_CACHE):
        return "allocating pools"
    if kind == ev.GRAPH_CAPTURE and event.get("stage") == "begin":
        return "capturing CUDA graphs"
    if kind == ev.UVICORN:
        return _UVICORN_PHASES.get(str(event.get("event", "")))
    if kind == ev.READY:
        return "warmed up"
    return None


def effective_of(event: LogEvent, kv_seen: bool) -> EffectiveValues | None:
    """Effective values an allocation line reveals (the first KV line only: the second is the
    draft pool with the same token count)."""
    if event.kind == ev.MAMBA_CACHE:
        return EffectiveValues(mamba_slots=_int(event.get("max_mamba_cache_size")))
    if event.kind == ev.KV_CACHE and not kv_seen:
        return EffectiveValues(kv_tokens=_int(event.get("tokens")))
    if event.kind == ev.POOL:
        return EffectiveValues(
            max_running_requests=_int(event.get("max_running_requests")),
            kv_tokens=_int(event.get("max_total_num_tokens")),
            available_gpu_mem_gb=_float(event.get("available_gpu_mem_gb")),
        )
    if event.kind == ev.CAP:
        return EffectiveValues(
            max_running_requests=_int(event.get("max_running_requests")), cap_line=event.text
        )
    return None


class SignalAdapter:
    """Stateful translation of one server's log events into ServerSignals."""

    def __init__(self) -> None:
        self._kv_seen = False
        # SGLang 0.5.17 prints a second Init torch distributed / Load weight pair for a
        # speculative draft after the target's weights: that is the draft loading, not the
        # startup beginning again.
        self._weights_seen = False
        self._phase: str | None = None

    def translate(self, events: Iterable[LogEvent]) -> list[ServerSignal]:
        """The signals of a batch of new events, in order."""
        out: list[ServerSignal] = []
        for event in events:
            if event.kind == ev.ERROR:
                reason = str(event.get("reason", "exception"))
                if reason not in NON_FATAL_REASONS:
                    out.append(ServerSignal("error", event.text, reason=reason))
                continue
            if event.kind == ev.SERVER_ARGS:
                self._weights_seen, self._phase = False, None
            phase = phase_of(event)
            if phase in ("initialising", "loading weights") and self._weights_seen:
                phase = "loading draft weights"
            if event.kind == ev.WEIGHTS:
                self._weights_seen = True
            if phase is not None and phase != self._phase:
                self._phase = phase
                out.append(ServerSignal("phase", phase))
            effective = effective_of(event, self._kv_seen)
            if effective is not None:
                # The pool summary line is authoritative: later lines win over earlier ones.
                out.append(ServerSignal("effective", effective=effective))
            if event.kind == ev.KV_CACHE:
                self._kv_seen = True
        return out

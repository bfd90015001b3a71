"""What the monitor keeps from one server's log: allocations, caps, phase, load, last error.

A thin accumulator over the log layer (``tui.logs.tailer`` + ``tui.logs.parser``). A
``server_args`` line opens a new launch and forgets what the previous launch said, so an OOM from
yesterday's attempt never marks today's server failed.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from pathlib import Path

from tui.logs import events as ev
from tui.logs.parser import parse_line
from tui.logs.tailer import LogTailer

ATTACH_BYTES = 4 * 1024 * 1024
"""On attach, read at most the last 4 MiB of a log (startup lines of a fresh launch fit easily)."""
HISTORY = 60
"""Throughput readings kept for the sparkline."""

PHASES: dict[str, str] = {
    ev.SERVER_ARGS: "parsing arguments",
    ev.MEMORY_BASELINE: "initialising",
    ev.WEIGHTS_BEGIN: "loading weights",
    ev.WEIGHTS: "weights loaded",
    ev.MAMBA_CACHE: "allocating pools",
    ev.KV_CACHE: "allocating pools",
    ev.MEMORY_POOL_END: "allocating pools",
    ev.GRAPH_CAPTURE: "capturing CUDA graphs",
    ev.POOL: "starting HTTP",
    ev.UVICORN: "warming up",
    ev.READY: "ready",
    ev.SHUTDOWN: "shutting down",
}
"""Startup phase reached after each event kind."""

ALLOCATION_KINDS = frozenset(
    {ev.WEIGHTS, ev.MAMBA_CACHE, ev.KV_CACHE, ev.POOL, ev.CAP, ev.RESET_48}
)
"""Lines worth showing in a panel's allocation list."""


@dataclass(frozen=True, slots=True)
class LogView:
    """An immutable reading of one server's log state."""

    launches: int = 0
    """server_args lines seen (launches in this log, as far as it was read)."""
    phase: str = ""
    """Startup phase the current launch reached."""
    ready: bool = False
    """The current launch printed the ready line."""
    kv_tokens: int | None = None
    """max_total_num_tokens (or the KV line's #tokens)."""
    mamba_slots: int | None = None
    """max_mamba_cache_size."""
    max_running_requested: int | None = None
    """max_running_requests from the launch arguments."""
    max_running_effective: int | None = None
    """max_running_requests from the pool summary or a cap line."""
    capped: bool = False
    """SGLang printed a cap warning."""
    running: int | None = None
    """#running-req of the latest decode line."""
    queued: int | None = None
    """#queue-req of the latest decode line."""
    token_usage: float | None = None
    """Token usage of the latest decode line."""
    mamba_usage: float | None = None
    """Mamba usage of the latest decode line."""
    gen_throughput: float | None = None
    """gen throughput of the latest decode line."""
    accept_len: float | None = None
    """accept len of the latest decode line."""
    throughput_history: tuple[float, ...] = ()
    """Recent gen throughput readings, oldest first."""
    allocation_lines: tuple[str, ...] = ()
    """Allocation lines of the current launch."""
    last_error: str | None = None
    """Last error line of the current launch."""
    error_reason: str | None = None
    """Its reason ('oom', 'scheduler_exception', ...)."""


def _int(value: object) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _float(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


class LogFollower:
    """Follows one log file and accumulates the current launch's state. Blocking (file reads)."""

    def __init__(self, path: str | Path, attach_bytes: int = ATTACH_BYTES) -> None:
        """Args:
        path: The server's log file (it may not exist yet).
        attach_bytes: How much of an existing log's end to read on attach.
        """
        self.path = Path(path)
        self._tailer = LogTailer(self.path, attach_bytes=attach_bytes)
        self._launches = 0
        self._history: deque[float] = deque(maxlen=HISTORY)
        self._reset()

    def _reset(self) -> None:
        self._phase = ""
        self._ready = False
        self._values: dict[str, int | float | None] = {}
        self._capped = False
        self._allocations: list[str] = []
        self._error: tuple[str, str] | None = None
        self._history.clear()

    def _apply(self, event: ev.LogEvent) -> None:
        kind, get = event.kind, event.get
        if kind == ev.SERVER_ARGS:
            self._launches += 1
            self._reset()
            self._values["requested"] = _int(get("max_running_requests"))
        if kind in PHASES and not (self._ready and kind != ev.SHUTDOWN):
            self._phase = PHASES[kind]
        if kind in ALLOCATION_KINDS:
            self._allocations.append(event.text)
        if kind == ev.READY:
            self._ready = True
        elif kind == ev.KV_CACHE and self._values.get("kv") is None:
            self._values["kv"] = _int(get("tokens"))
        elif kind == ev.MAMBA_CACHE:
            self._values["mamba"] = _int(get("max_mamba_cache_size"))
        elif kind == ev.POOL:
            self._values["kv"] = _int(get("max_total_num_tokens")) or self._values.get("kv")
            effective = _int(get("max_running_requests"))
            if effective is not None:
                self._values["effective"] = effective
        elif kind == ev.CAP:
            self._capped = True
            self._values["effective"] = _int(get("max_running_requests"))
        elif kind == ev.ERROR:
            self._error = (event.text, str(get("reason", "exception")))
        elif kind == ev.DECODE:
            for name, key in (("running", "running_req"), ("queued", "queue_req")):
                self._values[name] = _int(get(key))
            for name in ("token_usage", "mamba_usage", "gen_throughput", "accept_len"):
                self._values[name] = _float(get(name))
            throughput = _float(get("gen_throughput"))
            if throughput is not None:
                self._history.append(throughput)

    def poll(self) -> LogView:
        """Read what is new in the log and return the current launch's state.

        Returns:
            An immutable view; all None/empty while the log does not exist.
        """
        for text in self._tailer.read_new():
            event = parse_line(text)
            if event is not None:
                self._apply(event)
        v = self._values
        error = self._error
        return LogView(
            launches=self._launches,
            phase=self._phase,
            ready=self._ready,
            kv_tokens=_int(v.get("kv")),
            mamba_slots=_int(v.get("mamba")),
            max_running_requested=_int(v.get("requested")),
            max_running_effective=_int(v.get("effective")),
            capped=self._capped,
            running=_int(v.get("running")),
            queued=_int(v.get("queued")),
            token_usage=_float(v.get("token_usage")),
            mamba_usage=_float(v.get("mamba_usage")),
            gen_throughput=_float(v.get("gen_throughput")),
            accept_len=_float(v.get("accept_len")),
            throughput_history=tuple(self._history),
            allocation_lines=tuple(self._allocations),
            last_error=error[0] if error else None,
            error_reason=error[1] if error else None,
        )

    def close(self) -> None:
        """Close the log file."""
        self._tailer.close()

"""What a server's informational endpoints say, parsed into frozen values (no I/O here).

``/metrics`` (Prometheus text), ``/v1/loads`` and ``/get_load`` (JSON, one row per DP rank) into
:class:`ServerLoad`; ``/server_info`` into :class:`ServerInfo`. Tolerant: unknown keys are
ignored, missing ones are None.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tui.sglang.releases import CONSOLE_METRICS

METRIC_NAMES = CONSOLE_METRICS
"""The families the console reads; other families are dropped before parsing (cheaper)."""

PROGRESS_NAMES = (
    "sglang:realtime_tokens_total",
    "sglang:generation_tokens_total",
    "sglang:prompt_tokens_total",
    "sglang:num_requests_total",
)
"""Counters that move while the scheduler works (the progress fingerprint, ``tui.fleet.liveness``):
``realtime_tokens_total`` every prefill and decode iteration, the others when a request ends."""


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """The effective values from ``/server_info`` (None when the server does not report one)."""

    max_running_effective: int | None = None
    """``internal_states[0].effective_max_running_requests_per_dp`` (after SGLang's caps)."""
    max_running_requested: int | None = None
    """``max_running_requests`` from the server args (None when auto)."""
    max_mamba_cache_size: int | None = None
    """Mamba state slots."""
    max_total_num_tokens: int | None = None
    """KV pool size in tokens."""
    version: str | None = None
    """SGLang version string."""
    spec_algorithm: str | None = None
    """``speculative_algorithm`` (``EAGLE``, ``NEXTN``, ...); None: the server runs no draft."""
    spec_num_steps: int | None = None
    """``speculative_num_steps``: draft steps per verify."""
    spec_draft_tokens: int | None = None
    """``speculative_num_draft_tokens``: tokens a verify checks."""
    spec_accept_length: float | None = None
    """``internal_states[0].avg_spec_accept_length``: accepted tokens per verify since start
    (present once the draft ran)."""


@dataclass(frozen=True, slots=True)
class ServerLoad:
    """Live load of one server."""

    running: int | None = None
    """Requests running."""
    queued: int | None = None
    """Requests waiting."""
    token_usage: float | None = None
    """Full-attention KV usage, 0..1 (``full_token_usage``; SGLang's ``token_usage`` is the
    maximum of every pool, read only where no pool is exported)."""
    mamba_usage: float | None = None
    """Mamba slot usage, 0..1."""
    swa_usage: float | None = None
    """Sliding-window-attention KV usage, 0..1 (0 on a model without SWA layers)."""
    cache_hit_rate: float | None = None
    """The prefix (radix) cache hit rate, 0..1."""
    gen_throughput: float | None = None
    """Generation tokens/s."""
    accept_len: float | None = None
    """Speculative accept length (None below 1: 0.5.17 exports 0.0 without a draft)."""
    spec_accept_rate: float | None = None
    """Speculative accept rate, 0..1 (meaningful only while a draft runs)."""
    spec_num_steps: int | None = None
    """Speculative steps in use (0 without a draft)."""
    generation_tokens: float | None = None
    """``generation_tokens_total``: output tokens since the server started (tokens per joule)."""
    max_total_num_tokens: int | None = None
    """KV pool size, when the endpoint reports it."""
    progress: tuple[float, ...] = ()
    """Counters that move while the scheduler works (empty when the endpoint has none)."""
    source: str = ""
    """Which endpoint answered."""


def _to_int(value: Any) -> int | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _mean(values: list[float] | None) -> float | None:
    """A rate per rank (hit rate, accept rate) over the server: their mean."""
    return sum(values) / len(values) if values else None


def _to_float(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


_SAMPLES = re.compile(
    rb"\n(sglang:(?:"
    + b"|".join(re.escape(name.removeprefix("sglang:").encode()) for name in METRIC_NAMES)
    + rb"))(?=[{ \t])(?:\{.*\})?[ \t]*([^ \t\r\n]*)"
)
"""A sample line of a wanted family, with or without labels (comments are never matched): the
family's name and the value's text. The label block ends at the line's last ``}`` (a value or
timestamp never holds one), whatever the quoted label values contain."""


def _samples(body: bytes) -> dict[str, list[float]]:
    """The wanted families' values, scanned from the body's bytes.

    Why: one regular-expression scan in C, on the bytes as they arrived (no decoding), instead
    of every line split off and tested in Python: a real server's exposition has hundreds of
    histogram lines the console never reads (a 160 KB body: 107 us instead of 381 us plus the
    decode). Values are summed or maxed over every label set, so labels are not read.

    Raises:
        ValueError: a wanted sample line has no value, or one that is not a number.
    """
    found: dict[bytes, list[float]] = {}
    # findall: tuples, no match object per sample; names stay bytes until the end (a dozen
    # samples a body, seven bodies a second).
    for name, value in _SAMPLES.findall(b"\n" + body if body[:7] == b"sglang:" else body):
        if not value:
            raise ValueError(f"metric line without a value: {name.decode()!r}")
        samples = found.get(name)
        if samples is None:
            found[name] = [float(value)]
        else:
            samples.append(float(value))
    return {name.decode(): samples for name, samples in found.items()}


def parse_metrics(body: str | bytes) -> ServerLoad:
    """Read the console's gauges from a Prometheus exposition body.

    Args:
        body: The ``/metrics`` body. Only sample lines of ``METRIC_NAMES`` are read.

    Returns:
        The load; counts and throughput are summed over ranks, usages take the max.

    Raises:
        ValueError: a wanted sample line is malformed.
    """
    values = _samples(body.encode() if isinstance(body, str) else body)

    def total(name: str) -> float | None:
        return sum(values[name]) if name in values else None

    def peak(name: str) -> float | None:
        return max(values[name]) if name in values else None

    running, queued = total("sglang:num_running_reqs"), total("sglang:num_queue_reqs")
    # SGLang 0.5.17 exports spec_accept_length without speculative decoding too, as 0.0 (and a
    # speculative server before its first step): an accept length is >= 1 when there is one.
    accept = [v for v in values.get("sglang:spec_accept_length", ()) if v >= 1.0]
    usage = peak("sglang:full_token_usage")
    steps = peak("sglang:spec_num_steps")
    return ServerLoad(
        running=int(running) if running is not None else None,
        queued=int(queued) if queued is not None else None,
        token_usage=usage if usage is not None else peak("sglang:token_usage"),
        mamba_usage=peak("sglang:mamba_usage"),
        swa_usage=peak("sglang:swa_token_usage"),
        cache_hit_rate=_mean(values.get("sglang:cache_hit_rate")),
        gen_throughput=total("sglang:gen_throughput"),
        accept_len=sum(accept) / len(accept) if accept else None,
        spec_accept_rate=_mean(values.get("sglang:spec_accept_rate")),
        spec_num_steps=int(steps) if steps is not None else None,
        generation_tokens=total("sglang:generation_tokens_total"),
        max_total_num_tokens=_to_int(peak("sglang:max_total_num_tokens")),
        progress=tuple(total(name) or 0.0 for name in PROGRESS_NAMES if name in values),
        source="/metrics",
    )


GENERATION_ENDPOINTS = ("/generate", "/v1/completions", "/v1/chat/completions")
"""The endpoints whose requests run on the scheduler (what a drain waits for)."""

_REQUEST_SAMPLES = re.compile(
    rb"^sglang:http_requests_(total|active)\{([^}\n]*)\}[ \t]+([^ \t\r\n]+)", re.M
)
_ENDPOINT = re.compile(rb'(?:^|,)endpoint="([^"]*)"')


@dataclass(frozen=True, slots=True)
class RequestCounts:
    """The generation requests a server has seen (``--enable-metrics``' HTTP middleware)."""

    arrived: int | None = None
    """``sglang:http_requests_total`` of the generation endpoints: requests that reached the
    server since it started, counted on arrival (None: the server exports no such counter)."""
    active: int | None = None
    """``sglang:http_requests_active`` of the same endpoints: arrived and not yet answered."""


def parse_request_counts(body: str | bytes) -> RequestCounts:
    """The generation endpoints' HTTP request counters of a ``/metrics`` body.

    SGLang 0.5.17 and 0.5.23 both export them when metrics are enabled (the request counted
    before its handler runs), a draining server's included: a drain watches them to tell whether
    a client is still sending.

    Args:
        body: The ``/metrics`` body.

    Returns:
        The counts (None where the family is absent).

    Raises:
        ValueError: a sample's value is not a number.
    """
    data = body.encode() if isinstance(body, str) else body
    found: dict[bytes, float] = {}
    for kind, labels, value in _REQUEST_SAMPLES.findall(data):
        endpoint = _ENDPOINT.search(labels)
        found.setdefault(kind, 0.0)
        if endpoint is not None and endpoint.group(1).decode() in GENERATION_ENDPOINTS:
            found[kind] += float(value)
    arrived, active = found.get(b"total"), found.get(b"active")
    return RequestCounts(
        None if arrived is None else round(arrived), None if active is None else round(active)
    )


def _rank_rows(payload: Any) -> list[Mapping[str, Any]]:
    if isinstance(payload, Mapping):
        for key in ("loads", "data", "dp_loads"):
            rows = payload.get(key)
            if isinstance(rows, list):
                return [r for r in rows if isinstance(r, Mapping)]
        return [payload]
    if isinstance(payload, list):
        return [r for r in payload if isinstance(r, Mapping)]
    return []


def _first(row: Mapping[str, Any], keys: Iterable[str]) -> Any:
    for key in keys:
        if key in row:
            return row[key]
    return None


def parse_loads_json(payload: Any, source: str) -> ServerLoad:
    """Read load from ``/v1/loads`` or ``/get_load`` JSON (one row per DP rank, tolerant keys).

    Args:
        payload: The decoded JSON.
        source: The endpoint it came from.

    Returns:
        The load summed over ranks; fields not present are None.
    """
    rows = _rank_rows(payload)

    def total(keys: tuple[str, ...], conv: Any) -> Any:
        found = [conv(_first(r, keys)) for r in rows]
        found = [v for v in found if v is not None]
        return sum(found) if found else None

    def peak(keys: tuple[str, ...]) -> float | None:
        found = [v for v in (_to_float(_first(r, keys)) for r in rows) if v is not None]
        return max(found) if found else None

    queued = total(("num_waiting_reqs", "num_queue_reqs", "queued"), _to_int)
    running = total(("num_running_reqs", "running"), _to_int)
    if running is None:
        # ``/get_load``'s ``num_reqs`` counts the waiting requests too (0.5.17's shim:
        # ``num_running_reqs + num_waiting_reqs``).
        requests = total(("num_reqs",), _to_int)
        running = None if requests is None else max(requests - (queued or 0), 0)
    return ServerLoad(
        running=running,
        queued=queued,
        token_usage=peak(("token_usage", "full_token_usage")),
        mamba_usage=peak(("mamba_usage",)),
        gen_throughput=total(("gen_throughput",), _to_float),
        max_total_num_tokens=total(("max_total_num_tokens",), _to_int),
        progress=tuple(
            float(v)
            for v in (
                total(("total_prefill_uncached_tokens",), _to_float),
                total(("num_used_tokens", "num_tokens"), _to_float),
            )
            if v is not None
        ),
        source=source,
    )


def parse_server_info(payload: Any) -> ServerInfo:
    """Read the effective settings from a ``/server_info`` JSON body.

    Args:
        payload: The decoded JSON (server args at top level, ``internal_states`` per DP rank).

    Returns:
        The values found; internal_states wins over the top level for each key.
    """
    top: Mapping[str, Any] = payload if isinstance(payload, Mapping) else {}
    states = top.get("internal_states")
    first: Mapping[str, Any] = (
        states[0] if isinstance(states, list) and states and isinstance(states[0], Mapping) else {}
    )

    def pick(*keys: str) -> Any:
        for source in (first, top):
            value = _first(source, keys)
            if value is not None:
                return value
        return None

    version = top.get("version")
    algorithm = pick("speculative_algorithm")
    return ServerInfo(
        max_running_effective=_to_int(
            pick("effective_max_running_requests_per_dp", "effective_max_running_requests")
        ),
        max_running_requested=_to_int(top.get("max_running_requests")),
        max_mamba_cache_size=_to_int(pick("max_mamba_cache_size")),
        max_total_num_tokens=_to_int(pick("max_total_num_tokens")),
        version=str(version) if version is not None else None,
        spec_algorithm=str(algorithm) if algorithm else None,
        spec_num_steps=_to_int(pick("speculative_num_steps")),
        spec_draft_tokens=_to_int(pick("speculative_num_draft_tokens")),
        spec_accept_length=_to_float(first.get("avg_spec_accept_length")),
    )

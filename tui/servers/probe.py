"""Async HTTP probes of one SGLang server: readiness, effective settings and live load.

Every probe has a short timeout so a hung server never delays the others, and every outcome is a
frozen value: a timeout is ``TIMEOUT`` (the monitor calls that *stale*), a refused connection is
``REFUSED`` (nothing listening: starting, or gone), never an exception.

Endpoints, newest first, with the older spellings SGLang still answers or used to:

* readiness: ``/health_generate`` (a real one-token generation; 503 until warmup ends), else
  ``/health``; ``/model_info`` (``/get_model_info``) answers as soon as uvicorn is up, so it is
  only the early sign of life, never readiness. In 0.5.23 ``/health`` and ``/health_generate``
  are one handler that generates a token, so a ready server is watched with the cheap ``/ready``
  (200/503; ``/health`` where ``/ready`` is 404, as on <= 0.4 where ``/health`` was cheap).
* settings: ``/server_info`` (``/get_server_info``) goes through the scheduler, so poll it rarely.
* load: ``/metrics`` (needs ``--enable-metrics``), else ``/v1/loads``, else ``/get_load``.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

HEALTH_PATHS = ("/health_generate", "/health")
QUICK_READY_PATHS = ("/ready", "/health")
MODEL_INFO_PATHS = ("/model_info", "/get_model_info")
SERVER_INFO_PATHS = ("/server_info", "/get_server_info")
LOAD_PATHS = ("/metrics", "/v1/loads", "/get_load")

METRIC_NAMES = (
    "sglang:num_running_reqs",
    "sglang:num_queue_reqs",
    "sglang:gen_throughput",
    "sglang:token_usage",
    "sglang:full_token_usage",
    "sglang:mamba_usage",
    "sglang:spec_accept_length",
    "sglang:max_total_num_tokens",
)
"""The gauges the console reads; other families are dropped before parsing (cheaper)."""

_KEPT_PREFIXES = tuple(
    prefix
    for name in METRIC_NAMES
    for prefix in (f"{name}{{", f"{name} ", f"# HELP {name} ", f"# TYPE {name} ")
)
"""Lines of the wanted families: samples with or without labels, and their HELP and TYPE."""


class ProbeStatus(StrEnum):
    """What one readiness probe found."""

    READY = "ready"
    """The readiness endpoint answered 200."""
    UP = "up"
    """HTTP answers but the server is not ready (503 during warmup, or only /model_info)."""
    REFUSED = "refused"
    """Connection refused: nothing listens on the port (yet, or any more)."""
    TIMEOUT = "timeout"
    """No answer within the timeout: busy or hung, not known dead."""
    ERROR = "error"
    """Another transport or protocol failure."""


@dataclass(frozen=True, slots=True)
class Readiness:
    """Result of one readiness probe."""

    status: ProbeStatus
    """What was found."""
    http_status: int | None = None
    """HTTP status of the readiness endpoint, when one answered."""
    endpoint: str = ""
    """The path that decided the status."""
    latency_s: float = 0.0
    """Wall time of the probe."""
    detail: str = ""
    """Error text for REFUSED/TIMEOUT/ERROR; empty otherwise."""


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


@dataclass(frozen=True, slots=True)
class ServerLoad:
    """Live load of one server."""

    running: int | None = None
    """Requests running."""
    queued: int | None = None
    """Requests waiting."""
    token_usage: float | None = None
    """Full-attention KV usage, 0..1."""
    mamba_usage: float | None = None
    """Mamba slot usage, 0..1."""
    gen_throughput: float | None = None
    """Generation tokens/s."""
    accept_len: float | None = None
    """Speculative accept length."""
    max_total_num_tokens: int | None = None
    """KV pool size, when the endpoint reports it."""
    source: str = ""
    """Which endpoint answered."""


def _to_int(value: Any) -> int | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _to_float(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _without_labels(line: str) -> str:
    """``name{labels} value`` -> ``name value``: the console sums or maxes over every label set.

    Why: prometheus_client parses label sets character by character; dropping them halves the
    parse of the monitor's every-second ``/metrics`` read. The label block ends at the last
    ``}`` (a value or timestamp never holds one), whatever the quoted label values contain.
    """
    if line.startswith("#") or "{" not in line:
        return line
    return line[: line.index("{")] + line[line.rindex("}") + 1 :]


def parse_metrics(text: str) -> ServerLoad:
    """Read the console's gauges from a Prometheus exposition body.

    Args:
        text: The ``/metrics`` body. Lines of other families are skipped before parsing.

    Returns:
        The load; counts and throughput are summed over ranks, usages take the max.
    """
    kept = [_without_labels(line) for line in text.splitlines() if line.startswith(_KEPT_PREFIXES)]
    values: dict[str, list[float]] = {}
    for family in text_string_to_metric_families("\n".join(kept) + "\n"):
        for sample in family.samples:
            values.setdefault(sample.name, []).append(float(sample.value))

    def total(name: str) -> float | None:
        return sum(values[name]) if name in values else None

    def peak(name: str) -> float | None:
        return max(values[name]) if name in values else None

    running, queued = total("sglang:num_running_reqs"), total("sglang:num_queue_reqs")
    accept = values.get("sglang:spec_accept_length")
    usage = peak("sglang:full_token_usage")
    return ServerLoad(
        running=int(running) if running is not None else None,
        queued=int(queued) if queued is not None else None,
        token_usage=usage if usage is not None else peak("sglang:token_usage"),
        mamba_usage=peak("sglang:mamba_usage"),
        gen_throughput=total("sglang:gen_throughput"),
        accept_len=sum(accept) / len(accept) if accept else None,
        max_total_num_tokens=_to_int(peak("sglang:max_total_num_tokens")),
        source="/metrics",
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

    return ServerLoad(
        running=total(("num_running_reqs", "num_reqs", "running"), _to_int),
        queued=total(("num_waiting_reqs", "num_queue_reqs", "queued"), _to_int),
        token_usage=peak(("token_usage", "full_token_usage")),
        mamba_usage=peak(("mamba_usage",)),
        gen_throughput=total(("gen_throughput",), _to_float),
        max_total_num_tokens=total(("max_total_num_tokens",), _to_int),
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
    return ServerInfo(
        max_running_effective=_to_int(
            pick("effective_max_running_requests_per_dp", "effective_max_running_requests")
        ),
        max_running_requested=_to_int(top.get("max_running_requests")),
        max_mamba_cache_size=_to_int(pick("max_mamba_cache_size")),
        max_total_num_tokens=_to_int(pick("max_total_num_tokens")),
        version=str(version) if version is not None else None,
    )


class ServerProbe:
    """Probes one server over a shared ``httpx.AsyncClient``; remembers which endpoints exist."""

    def __init__(
        self, client: httpx.AsyncClient, port: int, host: str = "127.0.0.1", timeout: float = 0.8
    ) -> None:
        """Args:
        client: Shared async client (its connection pool serves every server).
        port: The server's HTTP port.
        host: The server's host.
        timeout: Seconds per request; a slower answer counts as TIMEOUT.
        """
        self.client = client
        self.base = f"http://{host}:{port}"
        self.timeout = timeout
        self._missing: set[str] = set()  # paths that answered 404: not asked again

    def reset(self) -> None:
        """Forget which endpoints were missing (call after the server was relaunched)."""
        self._missing.clear()

    async def _get(self, path: str) -> httpx.Response:
        return await self.client.get(self.base + path, timeout=self.timeout)

    async def _first_present(self, paths: Iterable[str]) -> httpx.Response | None:
        """GET the first path not known missing; 404s are remembered and the next one tried."""
        for path in paths:
            if path in self._missing:
                continue
            response = await self._get(path)
            if response.status_code == 404:
                self._missing.add(path)
                continue
            return response
        return None

    def _failure(self, error: httpx.HTTPError, start: float) -> Readiness:
        latency = time.monotonic() - start
        if isinstance(error, httpx.ConnectError):
            return Readiness(ProbeStatus.REFUSED, latency_s=latency, detail=str(error))
        if isinstance(error, httpx.TimeoutException):
            detail = f"no answer within {self.timeout:g}s ({type(error).__name__})"
            return Readiness(ProbeStatus.TIMEOUT, latency_s=latency, detail=detail)
        return Readiness(ProbeStatus.ERROR, latency_s=latency, detail=str(error))

    async def readiness(self) -> Readiness:
        """Probe readiness once (health, then /model_info as the early sign of life).

        Returns:
            READY on 200; UP when HTTP answers otherwise; REFUSED, TIMEOUT or ERROR.
        """
        start = time.monotonic()
        try:
            health = await self._first_present(HEALTH_PATHS)
            if health is not None and health.status_code == 200:
                return Readiness(ProbeStatus.READY, 200, health.url.path, time.monotonic() - start)
            info = await self._first_present(MODEL_INFO_PATHS)
        except httpx.HTTPError as error:
            return self._failure(error, start)
        code = health.status_code if health is not None else None
        endpoint = health.url.path if health is not None else ""
        if info is not None and info.status_code == 200:
            endpoint = endpoint or info.url.path
        return Readiness(ProbeStatus.UP, code, endpoint, time.monotonic() - start)

    async def quick_readiness(self) -> Readiness:
        """Cheap readiness of a server already known ready: ``/ready``, else ``/health``.

        Returns:
            READY on 200; UP on another status (503: paused, unhealthy or draining); REFUSED,
            TIMEOUT or ERROR (also ERROR when neither endpoint exists).
        """
        start = time.monotonic()
        try:
            response = await self._first_present(QUICK_READY_PATHS)
        except httpx.HTTPError as error:
            return self._failure(error, start)
        latency = time.monotonic() - start
        if response is None:
            return Readiness(ProbeStatus.ERROR, latency_s=latency, detail="no /ready or /health")
        status = ProbeStatus.READY if response.status_code == 200 else ProbeStatus.UP
        return Readiness(status, response.status_code, response.url.path, latency)

    async def server_info(self) -> ServerInfo | None:
        """Fetch the effective settings; None when unreachable or not JSON."""
        try:
            response = await self._first_present(SERVER_INFO_PATHS)
            if response is None or response.status_code != 200:
                return None
            return parse_server_info(response.json())
        except (httpx.HTTPError, ValueError):
            return None

    async def load(self) -> ServerLoad | None:
        """Fetch live load from /metrics, else /v1/loads, else /get_load; None when none answer."""
        try:
            response = await self._first_present(LOAD_PATHS)
            if response is None or response.status_code != 200:
                return None
            path = response.url.path
            if path == "/metrics":
                return parse_metrics(response.text)
            return parse_loads_json(response.json(), path)
        except (httpx.HTTPError, ValueError):
            return None

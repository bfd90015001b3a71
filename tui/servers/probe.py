"""Async HTTP probes of one SGLang server: readiness, effective settings and live load.

Every outcome is a frozen value: a timeout is ``TIMEOUT`` (the monitor calls that *stale*), a
refused connection is ``REFUSED`` (nothing listening: starting, or gone), never an exception.

Endpoints, newest first, with the older spellings SGLang still answers or used to:

* readiness: ``/ready`` (0.5.23: ``not is_pause and server_status == Up and not draining``; Up is
  set once the warmup generation succeeded, so a 200 means the server served a request) is cheap
  and answers at once: :meth:`ServerProbe.readiness`. Where ``/ready`` is missing (<= 0.4, and
  0.5.17 to 0.5.19: a real 0.5.17 answered 404), ``/health``: on 0.5.x a one-token generation
  that takes >= 1 s, answering 503 at once while the server starts or drains.
* the generating probe: in 0.5.23 ``/health`` and ``/health_generate`` are one handler that
  submits a one-token generation and checks once a second, after a first one-second sleep, for up
  to ``SGLANG_HEALTH_CHECK_TIMEOUT`` (20 s) (``srt/entrypoints/http_server.py``): a healthy answer
  takes >= 1 s, a stuck one 20 s. :meth:`ServerProbe.health_generate` waits
  ``HEALTH_TIMEOUT_S`` (above SGLang's own) and is meant to run in the background, never inside
  a 1 Hz refresh. It is also what makes SGLang notice a hung scheduler (UnHealthy: ``/ready``
  then answers 503).
* ``/model_info`` (``/get_model_info``) answers as soon as uvicorn is up: never readiness.
* settings: ``/server_info`` (``/get_server_info``) goes through the scheduler, so poll it rarely.
* load: ``/metrics`` (needs ``--enable-metrics``), else ``/v1/loads``, else ``/get_load``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

import httpx

from tui.servers.histogram import Histogram, parse_histograms
from tui.servers.keepalive import Answer, KeepAliveTransport
from tui.servers.payloads import (
    METRIC_NAMES,
    PROGRESS_NAMES,
    ServerInfo,
    ServerLoad,
    parse_loads_json,
    parse_metrics,
    parse_server_info,
)

__all__ = [
    "HEALTH_TIMEOUT_S",
    "METRIC_NAMES",
    "PROGRESS_NAMES",
    "ProbeStatus",
    "Readiness",
    "ServerInfo",
    "ServerLoad",
    "ServerProbe",
    "parse_loads_json",
    "parse_metrics",
    "parse_server_info",
]

HEALTH_PATHS = ("/health_generate", "/health")
READY_PATHS = ("/ready",)
LEGACY_READY_PATHS = ("/health",)

HEALTH_TIMEOUT_S = 25.0
"""The generating probe's timeout: above SGLang's own SGLANG_HEALTH_CHECK_TIMEOUT (20 s), so a
503 from SGLang's check arrives instead of a client-side timeout."""
MODEL_INFO_PATHS = ("/model_info", "/get_model_info")
SERVER_INFO_PATHS = ("/server_info", "/get_server_info")
LOAD_PATHS = ("/metrics", "/v1/loads", "/get_load")


@dataclass(frozen=True, slots=True)
class Reply:
    """One answer to a probe, read whole."""

    status: int
    """The HTTP status."""
    path: str
    """The path that answered."""
    body: bytes
    """The body."""


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


class ServerProbe:
    """Probes one server over a shared ``httpx.AsyncClient``; remembers which endpoints exist."""

    def __init__(
        self,
        client: httpx.AsyncClient,
        port: int,
        host: str = "127.0.0.1",
        timeout: float = 0.8,
        *,
        direct: KeepAliveTransport | None = None,
    ) -> None:
        """Args:
        client: Shared async client (its connection pool serves every server).
        port: The server's HTTP port.
        host: The server's host.
        timeout: Seconds per cheap request; a slower answer counts as TIMEOUT (the
            generating probe waits ``HEALTH_TIMEOUT_S`` instead).
        direct: The client's own transport, to send the GETs to straight
            (``KeepAliveTransport.fetch``): httpx's client adds nothing a probe uses (no auth,
            cookies, redirects) and building and unpacking its request and response objects
            cost more CPU than the exchange itself.
        """
        self.client = client
        self.direct = direct
        self.host = host
        self.port = port
        self.base = f"http://{host}:{port}"
        self.timeout = timeout
        self._missing: set[str] = set()  # paths that answered 404: not asked again
        # The last /metrics body and its reading: an idle server's exposition does not change
        # between polls, and comparing bytes costs far less than scanning them again.
        self._metrics: tuple[bytes, ServerLoad] | None = None
        # That body's latency histograms, once asked for (``latency_histograms``).
        self._histograms: tuple[bytes, dict[str, Histogram]] | None = None

    def reset(self) -> None:
        """Forget which endpoints were missing (call after the server was relaunched)."""
        self._missing.clear()

    async def _get(self, path: str, timeout: float | None = None) -> Reply:
        seconds = timeout or self.timeout
        if self.direct is not None:
            answer = await self.direct.fetch(self.host, self.port, path, seconds)
            return Reply(answer.status, path, answer.body)
        response = await self.client.get(self.base + path, timeout=seconds)
        return Reply(response.status_code, response.url.path, response.content)

    async def _first_present(
        self, paths: Iterable[str], timeout: float | None = None
    ) -> Reply | None:
        """GET the first path not known missing; 404s are remembered and the next one tried."""
        for path in paths:
            if path in self._missing:
                continue
            response = await self._get(path, timeout)
            if response.status == 404:
                self._missing.add(path)
                continue
            return response
        return None

    def _failure(
        self, error: httpx.HTTPError, start: float, timeout: float | None = None
    ) -> Readiness:
        latency = time.monotonic() - start
        if isinstance(error, httpx.ConnectError):
            return Readiness(ProbeStatus.REFUSED, latency_s=latency, detail=str(error))
        if isinstance(error, httpx.TimeoutException):
            detail = f"no answer within {timeout or self.timeout:g}s ({type(error).__name__})"
            return Readiness(ProbeStatus.TIMEOUT, latency_s=latency, detail=detail)
        return Readiness(ProbeStatus.ERROR, latency_s=latency, detail=str(error))

    async def _ask(self, paths: Iterable[str], timeout: float) -> Readiness | None:
        """GET the first present path: READY on 200, UP otherwise; None when all are 404."""
        start = time.monotonic()
        try:
            response = await self._first_present(paths, timeout)
        except httpx.HTTPError as error:
            return self._failure(error, start, timeout)
        if response is None:
            return None
        status = ProbeStatus.READY if response.status == 200 else ProbeStatus.UP
        latency = time.monotonic() - start
        return Readiness(status, response.status, response.path, latency)

    async def ready_endpoint(self) -> Readiness | None:
        """The cheap probe only: ``/ready`` (200 READY; 503 UP: starting, draining, unhealthy).

        Returns:
            The readiness, or None when the server has no ``/ready`` (SGLang <= 0.4).
        """
        return await self._ask(READY_PATHS, self.timeout)

    async def readiness(self) -> Readiness:
        """Readiness in one call: ``/ready``, else ``/health`` (given ``HEALTH_TIMEOUT_S``: on
        SGLang 0.5.17 it generates one token, >= 1 s; the 404 of ``/ready`` is asked once).

        Returns:
            READY on 200; UP when HTTP answers otherwise; REFUSED, TIMEOUT or ERROR.
        """
        quick = await self.ready_endpoint()
        if quick is not None:
            return quick
        legacy = await self._ask(LEGACY_READY_PATHS, HEALTH_TIMEOUT_S)
        return legacy or Readiness(ProbeStatus.ERROR, detail="no /ready or /health")

    async def health_generate(self) -> Readiness:
        """The generating probe: ``/health_generate``, else ``/health``, waiting up to
        ``HEALTH_TIMEOUT_S``. Slow by design (>= 1 s on 0.5.23): run it in the background.

        Returns:
            READY on 200; UP on 503 (starting, draining, or SGLang's check failed: UnHealthy);
            REFUSED, TIMEOUT or ERROR.
        """
        found = await self._ask(HEALTH_PATHS, HEALTH_TIMEOUT_S)
        return found or Readiness(ProbeStatus.ERROR, detail="no /health_generate or /health")

    async def server_info(self) -> ServerInfo | None:
        """Fetch the effective settings; None when unreachable or not JSON."""
        try:
            response = await self._first_present(SERVER_INFO_PATHS)
            if response is None or response.status != 200:
                return None
            return parse_server_info(json.loads(response.body))
        except (httpx.HTTPError, ValueError):
            return None

    async def load(self) -> ServerLoad | None:
        """Fetch live load from /metrics, else /v1/loads, else /get_load; None when none answer."""
        try:
            response = await self._first_present(LOAD_PATHS)
            if response is None or response.status != 200:
                return None
            if response.path == "/metrics":
                return self._metrics_load(response.body)
            return parse_loads_json(json.loads(response.body), response.path)
        except (httpx.HTTPError, ValueError):
            return None

    def steady_target(self) -> tuple[str, int, str] | None:
        """What a ready server's steady load read asks, for a batch outside the event loop
        (``tui.servers.batch_fetch``): (host, port, ``/metrics``); None when the server has
        no ``/metrics`` (its load comes through :meth:`load`'s other paths)."""
        if LOAD_PATHS[0] in self._missing:
            return None
        return (self.host, self.port, LOAD_PATHS[0])

    def read_load(self, answer: Answer) -> ServerLoad | None:
        """The load in the answer to :meth:`steady_target`; None when it holds none (a 404 is
        remembered, as :meth:`load` does). Blocking-safe: no I/O."""
        if answer.status == 404:
            self._missing.add(LOAD_PATHS[0])
        if answer.status != 200:
            return None
        try:
            return self._metrics_load(answer.body)
        except ValueError:
            return None

    def latency_histograms(self) -> dict[str, Histogram]:
        """The latency histograms of the last ``/metrics`` body read (``tui.servers.histogram``).

        Why on demand and not with each load read: a percentile window needs a reading every
        few seconds, the panels need the load every second, and the histograms cost several
        times the gauges to read. Blocking-safe: no I/O.

        Returns:
            By family; empty when no body was read or it holds none.
        """
        last, done = self._metrics, self._histograms
        if last is None:
            return {}
        if done is not None and done[0] is last[0]:
            return done[1]
        try:
            found = parse_histograms(last[0])
        except ValueError:
            found = {}
        self._histograms = (last[0], found)
        return found

    def _metrics_load(self, body: bytes) -> ServerLoad:
        last = self._metrics
        if last is not None and last[0] == body:
            return last[1]
        load = parse_metrics(body)
        self._metrics = (body, load)
        return load

"""The HTTP request counters SGLang exports with ``--enable-metrics``, in both builds.

SGLang 0.5.17 (``srt/utils/common.py``, ``add_prometheus_track_response_middleware``) and 0.5.23
(``srt/observability/http_request_metrics.py``) wrap every HTTP request in the same middleware:
``sglang:http_requests_total{endpoint, method}`` counts a request when it **arrives** (before its
handler runs), ``sglang:http_responses_total{endpoint, status_code, method}`` when its response
starts, and ``sglang:http_requests_active{endpoint, method}`` holds those between. A real 0.5.17
exported them (``tests/fixtures/real_sglang/0.5.17/base/metrics.txt``: 14 ``/generate``
arrived, 2 answered, 12 active). They are what tells a drain that a client is still sending:
a draining server keeps accepting ``/generate`` (only ``/health`` and ``/ready`` answer 503).

The endpoint label is the matched route's path (the simulator's routes take no parameters, so it
is the request's path). A pure ASGI middleware, as SGLang's patched one: the request's
``receive`` passes through, so a handler still notices its client going away.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from starlette.types import ASGIApp, Message, Receive, Scope, Send


@dataclass
class HttpCounts:
    """Every HTTP request the server saw, by (endpoint, method); responses by status too."""

    requests: Counter[tuple[str, str]] = field(default_factory=Counter)
    """Arrived (counted before the handler runs)."""
    responses: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    """(endpoint, status code, method) -> responses started."""
    active: Counter[tuple[str, str]] = field(default_factory=Counter)
    """Arrived and not yet ended."""

    def families(self) -> Iterator[Metric]:
        """The three families, labelled as SGLang labels them."""
        total = CounterMetricFamily(
            "sglang:http_requests",
            "Total number of HTTP requests by endpoint and method",
            labels=("endpoint", "method"),
        )
        for (endpoint, method), count in self.requests.items():
            total.add_metric([endpoint, method], count)
        yield total
        answered = CounterMetricFamily(
            "sglang:http_responses",
            "Total number of HTTP responses by endpoint and status code",
            labels=("endpoint", "status_code", "method"),
        )
        for (endpoint, status, method), count in self.responses.items():
            answered.add_metric([endpoint, status, method], count)
        yield answered
        active = GaugeMetricFamily(
            "sglang:http_requests_active",
            "Number of currently active HTTP requests",
            labels=("endpoint", "method"),
        )
        for (endpoint, method), count in self.active.items():
            active.add_metric([endpoint, method], count)
        yield active


class CountRequests:
    """The ASGI middleware that keeps ``HttpCounts``.

    Args:
        app: The application it wraps.
        counts: Where it counts.
    """

    def __init__(self, app: ASGIApp, counts: HttpCounts) -> None:
        self.app = app
        self.counts = counts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        key = (str(scope.get("path", "")), str(scope.get("method", "")))
        counts = self.counts
        counts.requests[key] += 1
        counts.active[key] += 1

        async def counted(message: Message) -> None:
            if message["type"] == "http.response.start":
                counts.responses[(key[0], str(message["status"]), key[1])] += 1
            await send(message)

        try:
            await self.app(scope, receive, counted)
        finally:
            counts.active[key] -= 1

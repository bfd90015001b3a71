"""History from a Prometheus server that scrapes the agents: the same small read API as the
console's own history store, ``series(node, gpu, metric, since, until, step)``, answered by
Prometheus' HTTP API (``/api/v1/query_range``) for ranges longer than the local store keeps.

``metric`` is an agent metric name (``gpufleet_server_generation_tokens_per_second``...); the
query selects it by its ``node`` and ``gpu`` labels. Failures are one-line ``HistoryError``s.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable

import httpx

from tui.history import HistoryError as Unusable

METRIC_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
"""A Prometheus metric name (nothing else is put into a query)."""
MAX_POINTS = 11_000
"""Prometheus refuses a range of more than 11,000 points per series."""


class HistoryError(Unusable):
    """The history could not be read (one line naming the server and why): a
    ``tui.history.HistoryError``, which the console's chart catches for either source."""


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class PrometheusHistory:
    """Reads series from a Prometheus server.

    Args:
        url: The server's base URL (``http://prometheus:9090``).
        client: HTTP client (default: a new one per call).
        timeout_s: Seconds per query.
    """

    def __init__(self, url: str, client: httpx.Client | None = None, timeout_s: float = 10.0):
        self.url = url.rstrip("/")
        """The server."""
        self._client = client
        self._timeout = timeout_s

    def query(self, node: str, gpu: int | None, metric: str) -> str:
        """The PromQL selector of ``metric`` on ``node`` (and ``gpu``).

        Raises:
            HistoryError: ``metric`` is not a metric name.
        """
        if not METRIC_NAME.match(metric):
            raise HistoryError(f"metric: {metric!r} is not a Prometheus metric name")
        labels = [f'node="{_label(node)}"']
        if gpu is not None:
            labels.append(f'gpu="{int(gpu)}"')
        return f"{metric}{{{','.join(labels)}}}"

    def series(
        self, node: str, gpu: int | None, metric: str, since: float, until: float, step: float
    ) -> list[tuple[float, float]]:
        """The values of ``metric`` for one GPU of one node between two times. Blocking.

        Args:
            node: The node's name (the agent's ``--node``).
            gpu: The GPU on that node (None for a per-node metric such as the job's).
            metric: The metric name.
            since: Start, time.time() seconds.
            until: End.
            step: Seconds between points.

        Returns:
            (time, value) pairs, oldest first; empty when Prometheus has none.

        Raises:
            HistoryError: a bad range, an unreachable server, or an error answer.
        """
        return self._range(self.query(node, gpu, metric), since, until, step)

    def fleet_series(
        self, metric: str, since: float, until: float, step: float
    ) -> list[tuple[float, float]]:
        """The sum of ``metric`` over every node and GPU Prometheus scrapes, between two times.

        Args:
            metric: The metric name (e.g. ``gpufleet_job_output_tokens_per_second``).
            since: Start, time.time() seconds.
            until: End.
            step: Seconds between points.

        Returns:
            (time, value) pairs, oldest first; empty when Prometheus has none.

        Raises:
            HistoryError: a bad metric name or range, an unreachable server, or an error answer.
        """
        if not METRIC_NAME.match(metric):
            raise HistoryError(f"metric: {metric!r} is not a Prometheus metric name")
        return self._range(f"sum({metric})", since, until, step)

    def _range(
        self, query: str, since: float, until: float, step: float
    ) -> list[tuple[float, float]]:
        if not (math.isfinite(since) and math.isfinite(until) and until > since):
            raise HistoryError(f"range: until ({until}) must be after since ({since})")
        if not math.isfinite(step) or step <= 0 or (until - since) / step > MAX_POINTS:
            raise HistoryError(f"step: {step} gives more than {MAX_POINTS} points over the range")
        params = {
            "query": query,
            "start": f"{since:.3f}",
            "end": f"{until:.3f}",
            "step": f"{step:g}",
        }
        try:
            if self._client is not None:
                response = self._client.get(
                    f"{self.url}/api/v1/query_range", params=params, timeout=self._timeout
                )
            else:
                response = httpx.get(
                    f"{self.url}/api/v1/query_range", params=params, timeout=self._timeout
                )
            body = response.json()
        except httpx.HTTPError as error:
            raise HistoryError(f"prometheus {self.url}: {type(error).__name__}: {error}") from None
        except ValueError:
            raise HistoryError(f"prometheus {self.url}: the answer is not JSON") from None
        if response.status_code != 200 or body.get("status") != "success":
            raise HistoryError(
                f"prometheus {self.url}: {body.get('error') or response.status_code}"
            )
        points: list[tuple[float, float]] = []
        for result in body.get("data", {}).get("result", []):
            for stamp, value in result.get("values", []):
                points.append((float(stamp), float(value)))
        points.sort()
        return points


FLEET_METRICS = {
    "out_tok_s": "gpufleet_job_output_tokens_per_second",
    "req_s": "gpufleet_job_requests_per_second",
}
"""The console history's fleet series (``tui.history.samples``) -> the agents' metric."""
CHART_POINTS = 600
"""Points a chart asks for (a braille line of 200 columns shows fewer)."""
LOOKBACK_S = 120 * 86400.0
"""How far back "the whole job" looks for a series' start (Prometheus' retention decides)."""


class PrometheusChart:
    """The console history's read API (``first_time``, ``series``) over a Prometheus server that
    scrapes the agents: for ranges longer than the console's own store keeps, or for a console
    that was not running while the job was (``gpufleet console --prometheus URL``).

    Only fleet series (``gpu`` None) of ``FLEET_METRICS`` are known; anything else is empty.
    Every method blocks; a failure is a ``HistoryError``.
    """

    def __init__(self, history: PrometheusHistory, clock: Callable[[], float] = time.time):
        """Args:
        history: The Prometheus reader.
        clock: time.time() (for tests).
        """
        self.history = history
        """Where the series come from."""
        self._clock = clock

    def series(
        self, gpu: int | None, metric: str, since: float, until: float | None = None
    ) -> list[tuple[float, float]]:
        """One series from ``since`` to ``until`` (default: now), about CHART_POINTS points."""
        name = FLEET_METRICS.get(metric) if gpu is None else None
        end = self._clock() if until is None else until
        if name is None or end <= since:
            return []
        step = max(1.0, (end - since) / CHART_POINTS)
        return self.history.fleet_series(name, since, end, step)

    def first_time(self, gpu: int | None, metric: str) -> float | None:
        """When the series starts in Prometheus (to a step of LOOKBACK_S / CHART_POINTS)."""
        now = self._clock()
        points = self.series(gpu, metric, now - LOOKBACK_S, now)
        return points[0][0] if points else None

"""History from a Prometheus server that scrapes the agents: the same small read API as the
console's own history store, ``series(node, gpu, metric, since, until, step)``, answered by
Prometheus' HTTP API (``/api/v1/query_range``) for ranges longer than the local store keeps.

``metric`` is an agent metric name (``gpufleet_server_generation_tokens_per_second``...); the
query selects it by its ``node`` and ``gpu`` labels. Failures are one-line ``HistoryError``s.
"""

from __future__ import annotations

import math
import re

import httpx

METRIC_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
"""A Prometheus metric name (nothing else is put into a query)."""
MAX_POINTS = 11_000
"""Prometheus refuses a range of more than 11,000 points per series."""


class HistoryError(RuntimeError):
    """The history could not be read (one line naming the server and why)."""


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
        if not (math.isfinite(since) and math.isfinite(until) and until > since):
            raise HistoryError(f"range: until ({until}) must be after since ({since})")
        if not math.isfinite(step) or step <= 0 or (until - since) / step > MAX_POINTS:
            raise HistoryError(f"step: {step} gives more than {MAX_POINTS} points over the range")
        params = {
            "query": self.query(node, gpu, metric),
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

"""Cumulative output tokens per GPU from each server's ``/metrics``.

A counter, not the ``gen_throughput`` gauge: the difference of two readings is exactly the tokens
produced between them, whatever the server's own averaging window. SGLang 0.5.23 counts
``generation_tokens_total`` when a request *finishes* (tokenizer side,
``srt/observability/metrics_collector.py`` ``observe_one_finished_request``): with long requests
it moves in lumps. ``realtime_tokens_total{mode="decode"}`` moves every decode iteration
(scheduler side), so it is read first; older servers without it fall back to the former.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

import httpx

COUNTER = "sglang:generation_tokens_total"
"""SGLang's output-token counter (tokenizer-side; summed over its label sets)."""

REALTIME = "sglang:realtime_tokens_total"
"""SGLang 0.5.23's per-iteration token counter, by ``mode`` (decode, prefill_compute, ...)."""


def parse_counter(text: str, name: str = COUNTER) -> float | None:
    """Sum every sample of ``name`` in a Prometheus text exposition; None when absent."""
    total: float | None = None
    for line in text.splitlines():
        if not line.startswith(name):
            continue
        rest = line[len(name) :]
        if rest and rest[0] not in " {":
            continue  # another metric sharing the prefix
        try:
            value = (
                float(line.rsplit(maxsplit=1)[-1])
                if "}" not in rest
                else float(rest.split("}", 1)[1].split()[0])
            )
        except (IndexError, ValueError):
            continue
        total = value + (total or 0.0)
    return total


def output_tokens(text: str) -> float | None:
    """Output tokens so far: ``realtime_tokens_total{mode="decode"}``, else the finish-time
    ``generation_tokens_total``; None when the server exposes neither."""
    decode = [line for line in text.splitlines() if line.startswith(REALTIME + "{")]
    decode = [line for line in decode if 'mode="decode"' in line]
    if decode:
        return parse_counter("\n".join(decode), REALTIME)
    return parse_counter(text, COUNTER)


class MetricsCounterProbe:
    """Reads ``/metrics`` of each GPU's server (servers need ``--enable-metrics``).

    Args:
        ports: HTTP port of each GPU's server.
        host: Their address.
        client: Shared async client.
        timeout: Seconds per request.
    """

    def __init__(
        self,
        ports: Mapping[int, int],
        host: str,
        client: httpx.AsyncClient,
        timeout: float = 2.0,
    ) -> None:
        self._ports = dict(ports)
        self._host = host
        self._client = client
        self._timeout = timeout

    async def metrics_text(self, gpu: int) -> str | None:
        """The GPU's server's ``/metrics`` body, or None when it did not answer 200."""
        port = self._ports.get(gpu)
        if port is None:
            return None
        try:
            response = await self._client.get(
                f"http://{self._host}:{port}/metrics", timeout=self._timeout
            )
        except httpx.HTTPError:
            return None
        return response.text if response.status_code == 200 else None

    async def _one(self, gpu: int) -> float | None:
        text = await self.metrics_text(gpu)
        return None if text is None else output_tokens(text)

    async def counters(self, gpus: Sequence[int]) -> dict[int, float | None]:
        """Every GPU's counter now, read in parallel; None where a server did not answer."""
        values = await asyncio.gather(*(self._one(g) for g in gpus))
        return dict(zip(gpus, values, strict=True))

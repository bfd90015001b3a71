"""The agent's read routes, each answered once for all the callers that ask together.

``/metrics``, the snapshot, the profile list, the journal and a server log's tail are what
dashboards and consoles poll; 200 of them at once must cost the agent about what one costs, not
200 thread-pool jobs and 200 copies of the answer in memory. Each route goes through a
``Coalesced`` (``tui.agent.coalesce``): one computation per key at a time, its answer kept while
the key holds (a view's number for ``/metrics`` and the snapshot, the journal file's identity,
a log's size), so memory stays bounded whatever the number of clients:

- ``/metrics``, snapshot: one rendering per view (the agent builds one a second), 2 kept;
- journal: one read per journal version and ``last``, 4 kept;
- profile list, log tails: single flight, nothing kept (each answer is read fresh).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tui.agent.coalesce import Coalesced
from tui.agent.codec import encode
from tui.agent.metrics import AgentCollector
from tui.agent.observed_metrics import ObservedCollector
from tui.agent.requests import BadRequest
from tui.agent.server import Agent
from tui.logs.long_lines import tail_lines
from tui.ops.journal import read_journal
from tui.paths import journal_file

API = "/api/v1"
"""Prefix of the control API."""
MAX_LINES = 5000
"""Most log lines one request returns."""
JSON = "application/json"


def int_param(request: Request, name: str, default: int, low: int, high: int) -> int:
    """Query parameter ``name`` as an integer in ``low``-``high`` (``default`` when absent).

    Raises:
        BadRequest: not an integer, or out of range (naming it).
    """
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise BadRequest(f"{name}: {raw!r} is not an integer ({low}-{high})") from None
    if not low <= value <= high:
        raise BadRequest(f"{name}: {value} is outside {low}-{high}")
    return value


def _dumps(doc: Any) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()


def _file_key(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def _path_gpu(request: Request) -> int:
    raw = request.path_params["gpu"]
    if not str(raw).isdigit() or not 0 <= int(raw) <= 255:
        raise BadRequest(f"gpu: {raw!r} is not a GPU index (0-255)")
    return int(raw)


def read_routes(agent: Agent, guarded: Callable[..., Any]) -> list[Route]:
    """The read routes, each behind ``guarded`` (a read token).

    Args:
        agent: The node's agent.
        guarded: The app's guard.

    Returns:
        The routes.
    """
    config = agent.config
    registry = CollectorRegistry(auto_describe=False)
    registry.register(AgentCollector(lambda: agent.view))
    registry.register(ObservedCollector(lambda: agent.view))

    async def render_metrics(polls: int) -> bytes:
        return await asyncio.to_thread(generate_latest, registry)

    async def render_snapshot(key: tuple[int, tuple[str, ...]]) -> bytes:
        view = agent.view
        doc = {
            "node": view.node,
            "readonly": config.readonly,
            "polled_at": view.polled_at,
            "snapshot": encode(view.snapshot),
            "profiles": {str(g): name for g, name in view.profiles.items()},
            "previous": {str(g): name for g, name in view.previous.items()},
            "pipeline": encode(view.pipeline) if view.pipeline is not None else None,
            "operations": list(key[1]),
            # What the many-node console shows of the node (an agent before these sent neither).
            "alerts": [encode(alert) for alert in view.alerts],
            "job_energy": encode(view.job_energy) if view.job_energy is not None else None,
        }
        return await asyncio.to_thread(_dumps, doc)

    async def render_profiles(_: tuple[()]) -> bytes:
        names, current = await asyncio.to_thread(
            lambda: (agent.ops.profile_names(), agent.ops.current_profile())
        )
        return _dumps({"names": names, "current": current})

    async def render_journal(key: tuple[object, int]) -> bytes:
        last = key[1]

        def build() -> bytes:
            read = read_journal()
            return _dumps(
                {
                    "entries": [encode(e) for e in read.entries[-last:]],
                    "skipped": read.skipped,
                    "unreadable": read.unreadable,
                    "partial": read.partial,
                }
            )

        return await asyncio.to_thread(build)

    async def render_tail(key: tuple[str, int, object]) -> bytes:
        path, lines, _ = key
        found = await asyncio.to_thread(tail_lines, path, lines)
        return _dumps(found)

    metrics_once: Coalesced[int, bytes] = Coalesced(render_metrics, keep=2)
    snapshot_once: Coalesced[tuple[int, tuple[str, ...]], bytes] = Coalesced(
        render_snapshot, keep=2
    )
    profiles_once: Coalesced[tuple[()], bytes] = Coalesced(render_profiles)
    journal_once: Coalesced[tuple[object, int], bytes] = Coalesced(render_journal, keep=4)
    tail_once: Coalesced[tuple[str, int, object], bytes] = Coalesced(render_tail)

    async def metrics(request: Request) -> Response:
        return Response(await metrics_once.get(agent.view.polls), media_type=CONTENT_TYPE_LATEST)

    async def snapshot(request: Request) -> Response:
        running = tuple(op.kind for op in agent.operations.running())
        return Response(await snapshot_once.get((agent.view.polls, running)), media_type=JSON)

    async def profiles(request: Request) -> Response:
        return Response(await profiles_once.get(()), media_type=JSON)

    async def journal(request: Request) -> Response:
        last = int_param(request, "last", 200, 1, 10_000)
        key = (_file_key(journal_file()), last)
        return Response(await journal_once.get(key), media_type=JSON)

    async def logs(request: Request) -> Response:
        gpu = _path_gpu(request)
        lines = int_param(request, "lines", 200, 1, MAX_LINES)
        panel = next((p for p in agent.view.snapshot.panels if p.local_index == gpu), None)
        if panel is None or panel.server is None or not panel.server.log_path:
            known = sorted(p.local_index for p in agent.view.snapshot.panels)
            raise BadRequest(f"gpu: {gpu} has no server log on node {config.node} (GPUs {known})")
        path = Path(panel.server.log_path)
        found = await tail_once.get((str(path), lines, _file_key(path)))
        body = b'{"gpu":%d,"path":%s,"lines":%s}' % (gpu, _dumps(str(path)), found)
        return Response(body, media_type=JSON)

    return [
        Route("/metrics", guarded(metrics, metrics=True)),
        Route(f"{API}/snapshot", guarded(snapshot)),
        Route(f"{API}/profiles", guarded(profiles)),
        Route(f"{API}/journal", guarded(journal)),
        Route(f"{API}/logs/{{gpu}}", guarded(logs)),
    ]

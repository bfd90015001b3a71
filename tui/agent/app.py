"""The agent's HTTP app (Starlette, served by uvicorn): ``/metrics`` and the control API.

Every route needs ``Authorization: Bearer <token>`` (401 without it; ``/metrics`` may be opened
with ``--open-metrics``); in read-only mode every write is refused (403). Routes:

======================================  ========================================================
``GET /metrics``                          Prometheus text (``tui.agent.metrics``)
``GET /api/v1/agent``                     node name, modes, operations running
``GET /api/v1/snapshot``                  the newest fleet snapshot, profiles, job status (JSON)
``GET /api/v1/profiles``                  profile names and the one most GPUs run
``GET /api/v1/journal?last=N``            the node's journal, newest last
``GET /api/v1/logs/{gpu}?lines=N``        the last lines of a GPU's server log
``POST /api/v1/operations``               start apply, relaunch, kill, rollback, canary, rollout,
                                          rollout_back or stop_fleet (202, its id)
``GET /api/v1/operations/{id}?after=N``   its state, result and events from number N on; with
                                          ``wait=S`` it answers as soon as there is something new
``GET|PUT /api/v1/profiles/{name}``       a profile read or saved (``tui.agent.profile_api``)
``POST /api/v1/preflight``                a profile checked on the node's calibration
``GET /api/v1/counters?gpus=0,1``         each GPU's tokens and requests counters, read now
``/api/v1/autotune``                      the node's knob search (``tui.agent.autotune_api``)
``/api/v1/pipeline``                      the node's job stopped, started again (``pipeline_api``)
======================================  ========================================================
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tui.agent.autotune_api import autotune_routes
from tui.agent.codec import encode
from tui.agent.counters_api import counters_routes
from tui.agent.metrics import AgentCollector
from tui.agent.pipeline_api import pipeline_routes
from tui.agent.profile_api import profile_routes
from tui.agent.requests import BadRequest, json_object, parse_request
from tui.agent.server import Agent
from tui.ops.journal import read_journal
from tui.servers.tokens import matches

API = "/api/v1"
"""Prefix of the control API."""
MAX_LINES = 5000
"""Most log lines one request returns."""
MAX_WAIT_S = 30.0
"""Longest long-poll."""
LOG_WINDOW_BYTES = 1 << 20
"""How much of a log's end is read for a tail."""

Handler = Callable[[Request], Awaitable[Response]]


def _error(status: int, message: str, **headers: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers or None)


def _int_param(request: Request, name: str, default: int, low: int, high: int) -> int:
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


def build_app(agent: Agent) -> Starlette:
    """The agent's Starlette app; its lifespan runs the agent's view loop.

    Args:
        agent: The node's agent.

    Returns:
        The ASGI app.
    """
    registry = CollectorRegistry(auto_describe=False)
    registry.register(AgentCollector(lambda: agent.view))
    config = agent.config

    def guarded(handler: Handler, *, write: bool = False, metrics: bool = False) -> Handler:
        async def run(request: Request) -> Response:
            if not (metrics and config.open_metrics) and not matches(
                request.headers.get("authorization"), config.token
            ):
                return _error(
                    401, "a bearer token is required (Authorization: Bearer <token>)",
                    **{"WWW-Authenticate": 'Bearer realm="gpufleet-agent"'},
                )  # fmt: skip
            if write and config.readonly:
                return _error(403, f"the agent of node {config.node} is read-only (--readonly)")
            try:
                return await handler(request)
            except BadRequest as error:
                return _error(400, str(error))

        return run

    async def metrics(request: Request) -> Response:
        payload = await asyncio.to_thread(generate_latest, registry)
        return Response(payload, media_type=CONTENT_TYPE_LATEST)

    async def describe(request: Request) -> Response:
        return JSONResponse(agent.describe())

    async def snapshot(request: Request) -> Response:
        view = agent.view
        return JSONResponse(
            {
                "node": view.node,
                "readonly": config.readonly,
                "polled_at": view.polled_at,
                "snapshot": encode(view.snapshot),
                "profiles": {str(g): name for g, name in view.profiles.items()},
                "previous": {str(g): name for g, name in view.previous.items()},
                "pipeline": encode(view.pipeline) if view.pipeline is not None else None,
                "operations": [op.kind for op in agent.operations.running()],
            }
        )

    async def profiles(request: Request) -> Response:
        names, current = await asyncio.to_thread(
            lambda: (agent.ops.profile_names(), agent.ops.current_profile())
        )
        return JSONResponse({"names": names, "current": current})

    async def journal(request: Request) -> Response:
        last = _int_param(request, "last", 200, 1, 10_000)
        read = await asyncio.to_thread(read_journal)
        return JSONResponse(
            {
                "entries": [encode(e) for e in read.entries[-last:]],
                "skipped": read.skipped,
                "unreadable": read.unreadable,
            }
        )

    async def logs(request: Request) -> Response:
        gpu = _path_gpu(request)
        lines = _int_param(request, "lines", 200, 1, MAX_LINES)
        panel = next((p for p in agent.view.snapshot.panels if p.local_index == gpu), None)
        if panel is None or panel.server is None or not panel.server.log_path:
            known = sorted(p.local_index for p in agent.view.snapshot.panels)
            raise BadRequest(f"gpu: {gpu} has no server log on node {config.node} (GPUs {known})")
        path = Path(panel.server.log_path)
        tail = await asyncio.to_thread(_tail, path, lines)
        return JSONResponse({"gpu": gpu, "path": str(path), "lines": tail})

    async def start(request: Request) -> Response:
        op = agent.start(parse_request(json_object(await request.body())))
        return JSONResponse(
            {"id": op.id, "url": f"{API}/operations/{op.id}"},
            status_code=202,
            headers={"Location": f"{API}/operations/{op.id}"},
        )

    async def status(request: Request) -> Response:
        op = agent.operations.get(request.path_params["op_id"])
        if op is None:
            return _error(404, f"no operation {request.path_params['op_id']!r} on this agent")
        after = _int_param(request, "after", 0, 0, 10**9)
        wait = _int_param(request, "wait", 0, 0, int(MAX_WAIT_S))
        if wait:
            await agent.operations.wait(op, after, float(wait))
        return JSONResponse(op.document(after))

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with agent.running():
            yield

    routes = [
        Route("/metrics", guarded(metrics, metrics=True)),
        Route(f"{API}/agent", guarded(describe)),
        Route(f"{API}/snapshot", guarded(snapshot)),
        Route(f"{API}/profiles", guarded(profiles)),
        Route(f"{API}/journal", guarded(journal)),
        Route(f"{API}/logs/{{gpu}}", guarded(logs)),
        Route(f"{API}/operations", guarded(start, write=True), methods=["POST"]),
        Route(f"{API}/operations/{{op_id}}", guarded(status)),
        *profile_routes(agent, guarded),
        *counters_routes(config.node, guarded),
        *autotune_routes(guarded),
        *pipeline_routes(config.status_path, agent.ops.by, guarded),
    ]
    return Starlette(routes=routes, lifespan=lifespan)


def _path_gpu(request: Request) -> int:
    raw = request.path_params["gpu"]
    if not str(raw).isdigit() or not 0 <= int(raw) <= 255:
        raise BadRequest(f"gpu: {raw!r} is not a GPU index (0-255)")
    return int(raw)


def _tail(path: Path, max_lines: int) -> list[str]:
    """The last ``max_lines`` lines of ``path`` (from its last MiB); empty when unreadable."""
    try:
        with path.open("rb") as handle:
            handle.seek(0, 2)
            size = handle.tell()
            handle.seek(max(0, size - LOG_WINDOW_BYTES))
            data = handle.read()
    except OSError:
        return []
    lines = data.decode("utf-8", errors="replace").splitlines()
    if size > LOG_WINDOW_BYTES and lines:
        lines = lines[1:]  # cut in the middle
    return list(deque(lines, maxlen=max_lines))

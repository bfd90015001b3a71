"""The agent's HTTP app (Starlette, served by uvicorn): ``/metrics`` and the control API.

Every route needs ``Authorization: Bearer <token>`` (401 without it; ``/metrics`` may be opened
with ``--open-metrics``) of the route's scope (``tui.servers.tokens``: read for every GET and the
preflight, operate for operations, the job and autotune, admin for saving a profile; 403 below
it); in read-only mode every write is refused (403) and only read tokens are accepted. A body is
read through ``tui.agent.requests.read_body``: past its route's limit the answer is 413 and the
rest of it is never read. Routes:

======================================  ========================================================
``GET /metrics``                          Prometheus text (``tui.agent.metrics``)
``GET /api/v1/agent``                     node name, modes, operations running
``GET /api/v1/snapshot``                  the newest fleet snapshot, profiles, job status (JSON)
``GET /api/v1/profiles``                  profile names and the one most GPUs run
``GET /api/v1/journal?last=N``            the node's journal, newest last
``GET /api/v1/logs/{gpu}?lines=N``        the last lines of a GPU's server log
``POST /api/v1/operations``               start a command (``tui.agent.codec.WIRE_COMMANDS``:
                                          apply, relaunch, kill, rollback, canary, rollout,
                                          rollout_back or stop_fleet; 202, its id)
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

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tui.agent.autotune_api import autotune_routes
from tui.agent.counters_api import counters_routes
from tui.agent.pipeline_api import pipeline_routes
from tui.agent.profile_api import profile_routes
from tui.agent.read_api import API, int_param, read_routes
from tui.agent.requests import BadRequest, BodyTooLarge, json_body
from tui.agent.server import Agent
from tui.servers.tokens import Scope, allows, match

MAX_WAIT_S = 30.0
"""Longest long-poll."""

Handler = Callable[[Request], Awaitable[Response]]


def _error(status: int, message: str, **headers: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers or None)


def build_app(agent: Agent) -> Starlette:
    """The agent's Starlette app; its lifespan runs the agent's view loop.

    Args:
        agent: The node's agent.

    Returns:
        The ASGI app.
    """
    config = agent.config

    def guarded(handler: Handler, *, scope: Scope = "read", metrics: bool = False) -> Handler:
        async def run(request: Request) -> Response:
            if not (metrics and config.open_metrics):
                token = match(request.headers.get("authorization"), config.tokens)
                if token is None:
                    return _error(
                        401, "a bearer token is required (Authorization: Bearer <token>)",
                        **{"WWW-Authenticate": 'Bearer realm="gpufleet-agent"'},
                    )  # fmt: skip
                if config.readonly and token.scope != "read":
                    return _error(
                        403,
                        f"the agent of node {config.node} is read-only (--readonly): it accepts "
                        f"read tokens only, not this {token.scope} token",
                    )
                if scope != "read" and config.readonly:
                    return _error(403, f"the agent of node {config.node} is read-only (--readonly)")
                if not allows(token.scope, scope):
                    return _error(
                        403, f"this token's scope is {token.scope}; this needs {scope} or above"
                    )
                request.state.scope = token.scope  # an operation may need more (its profile)
            try:
                return await handler(request)
            except BodyTooLarge as error:
                # The rest of the body is never read: the connection is closed instead.
                return _error(413, str(error), Connection="close")
            except BadRequest as error:
                return _error(400, str(error))

        return run

    async def describe(request: Request) -> Response:
        return JSONResponse(agent.describe())

    async def start(request: Request) -> Response:
        op = await agent.start(await json_body(request), request.state.scope)
        return JSONResponse(
            {"id": op.id, "url": f"{API}/operations/{op.id}"},
            status_code=202,
            headers={"Location": f"{API}/operations/{op.id}"},
        )

    async def status(request: Request) -> Response:
        op = agent.operations.get(request.path_params["op_id"])
        if op is None:
            return _error(404, f"no operation {request.path_params['op_id']!r} on this agent")
        after = int_param(request, "after", 0, 0, 10**9)
        wait = int_param(request, "wait", 0, 0, int(MAX_WAIT_S))
        if wait:
            await agent.operations.wait(op, after, float(wait))
        return JSONResponse(op.document(after))

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with agent.running():
            yield

    routes = [
        *read_routes(agent, guarded),
        Route(f"{API}/agent", guarded(describe)),
        Route(f"{API}/operations", guarded(start, scope="operate"), methods=["POST"]),
        Route(f"{API}/operations/{{op_id}}", guarded(status)),
        *profile_routes(agent, guarded),
        *counters_routes(agent.counters, config.node, guarded),
        *autotune_routes(guarded),
        *pipeline_routes(config.status_path, agent.ops.by, guarded),
    ]
    return Starlette(routes=routes, lifespan=lifespan)

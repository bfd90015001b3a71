"""The agent's profile routes, for the tuning form of a many-node console: read a profile as the
node would launch it, check an edited one against the node's own calibration (the preflight runs
on the node, so the verdict is the one the node's local form would show), and save one.

A profile crosses the API as its TOML document (``profile_to_dict``) and is judged on arrival by
``profile_from_dict``, the same check a profile file gets, and by the node's API policy
(``tui.agent.policy``: no loader or interpreter variables, only allowed interpreters): a
document that does not fit is refused (400) in one line naming the field, and nothing is
written. A name is a name, never a path (``tui.profiles.store.resolve_name``); saving needs an
admin token (it decides what the node can run), reading and the preflight a read token.

A document is judged in a worker thread, never on the event loop, and names at most
``MAX_GPU + 1`` GPUs (indices 0-``MAX_GPU``, as every other route): four preflights of a
10,000-GPU profile (59 KB, under the body limit) held ``/metrics`` for 26.8 s when the check ran
on the loop.

======================================  ========================================================
``GET /api/v1/profiles/{name}``           the profile as this node launches it (``{"profile"}``)
``PUT /api/v1/profiles/{name}``           save ``{"profile": doc}`` under ``name`` (admin)
``POST /api/v1/preflight``                ``{"profile": doc, "gpus": [...]}``: the predictions
======================================  ========================================================
"""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tui.agent.codec import encode
from tui.agent.policy import PolicyError
from tui.agent.requests import MAX_GPU, BadRequest, json_body, one_line, parse_profile
from tui.agent.server import Agent
from tui.profiles import Profile, ProfileError, profile_to_dict
from tui.profiles.store import NAME

MAX_PROFILE_BYTES = 256 * 1024
"""Largest profile document accepted."""


async def _body(request: Request) -> dict[str, Any]:
    return await json_body(request, MAX_PROFILE_BYTES)


def _name(request: Request) -> str:
    name = str(request.path_params["name"])
    if not NAME.match(name) or name.endswith(".toml"):
        raise BadRequest(f"name: {name!r} must be letters, digits, '.', '_' or '-' (1-200)")
    return name


def _gpus(value: Any) -> tuple[int, ...]:
    if not isinstance(value, list) or not value or len(value) > MAX_GPU + 1:
        raise BadRequest(f"gpus: {value!r} must be a non-empty list of GPU indices (0-{MAX_GPU})")
    for v in value:
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MAX_GPU:
            raise BadRequest(f"gpus: {v!r} is not a GPU index (0-{MAX_GPU})")
    return tuple(sorted(set(value)))


def profile_routes(agent: Agent, guarded: Any) -> list[Route]:
    """The profile routes, each behind ``guarded`` (a token of the route's scope; writes refused
    read-only).

    Args:
        agent: The node's agent.
        guarded: The app's guard (``guarded(handler, scope=...)``).

    Returns:
        The routes.
    """
    ops = agent.ops

    async def read(request: Request) -> Response:
        name = _name(request)
        try:
            profile = await asyncio.to_thread(agent.load_by_name, name)
        except ProfileError as error:
            return JSONResponse({"error": one_line(error)}, status_code=404)
        return JSONResponse({"profile": profile_to_dict(profile)})

    def checked(doc: Any, name: str) -> Profile:
        """The document judged as a profile and held to the node's API policy. Blocking."""
        profile = parse_profile(doc, name)
        try:
            agent.policy.check(profile)
        except PolicyError as error:
            raise BadRequest(str(error)) from None
        return profile

    async def save(request: Request) -> Response:
        name = _name(request)
        body = await _body(request)
        profile = await asyncio.to_thread(checked, body.get("profile"), name)
        if profile.name != name:
            raise BadRequest(f"name: the document names {profile.name!r}, the path {name!r}")
        path = await asyncio.to_thread(ops.save_profile, profile)
        return JSONResponse({"name": profile.name, "path": str(path)})

    async def preflight(request: Request) -> Response:
        body = await _body(request)
        gpus = _gpus(body.get("gpus"))
        profile = await asyncio.to_thread(parse_profile, body.get("profile"), "preflight")
        try:
            items = await agent.backend.preflight(profile, gpus)
        except ValueError as error:  # a GPU outside the profile, a model of unknown size
            raise BadRequest(one_line(error)) from None
        return JSONResponse({"preflight": [encode(item) for item in items]})

    return [
        Route("/api/v1/profiles/{name}", guarded(read), methods=["GET"]),
        Route("/api/v1/profiles/{name}", guarded(save, scope="admin"), methods=["PUT"]),
        Route("/api/v1/preflight", guarded(preflight), methods=["POST"]),
    ]

"""The agent's autotune routes: the node's knob search started, paused, resumed, stopped and
watched through the API, the way ``gpufleet autotune`` does it on the node.

The search runs detached (its own session, like ``gpufleet autotune start --detach``), so it
outlives the agent; pause, resume and stop write the control file the search obeys between
steps. Its options are the CLI's own, checked by the CLI's parser before anything starts: a bad
one is refused (400) in one line naming it.

======================================  ========================================================
``GET /api/v1/autotune``                  the status document and whether its search still runs
``POST /api/v1/autotune``                 ``{"action": "start", "options": {...}}``, or ``pause``,
                                          ``resume``, ``stop`` (writes; 409 when they cannot)
======================================  ========================================================
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import subprocess
import time
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tui.agent.requests import BadRequest, json_body
from tui.autotune.cli import build_parser, options_from
from tui.autotune.detach import search_log, start_detached
from tui.autotune.status import holder_alive, read_status
from tui.autotune.status import request as ask_search
from tui.control.launch import tail_lines
from tui.state.files import StateFileError

ACTIONS = ("start", "pause", "resume", "stop")
"""What the route may be asked."""
START_WAIT_S = 30.0
"""How long a start waits for the search's first status document."""
OPTIONS: dict[str, str] = {
    "knob": "--knob",
    "gpu": "--gpu",
    "wall": "--wall",
    "explore_gpu_seconds": "--explore-gpu-seconds",
    "max_regression": "--max-regression",
    "window": "--window",
    "max_window": "--max-window",
    "warmup": "--warmup",
    "interval": "--interval",
    "min_intervals": "--min-intervals",
    "margin": "--margin",
    "baseline": "--baseline",
    "settle": "--settle",
    "timeout": "--timeout",
    "release_timeout": "--release-timeout",
    "term_timeout": "--term-timeout",
    "drain_timeout": "--drain-timeout",
}
"""A start's options (JSON names) and the ``gpufleet autotune start`` flags they become."""


def start_argv(options: Any) -> list[str]:
    """The ``gpufleet autotune start`` arguments of a start's options, checked by the CLI.

    Args:
        options: The request's ``options`` object (None: every default).

    Returns:
        The arguments (without ``start``).

    Raises:
        BadRequest: an unknown option, a value of the wrong kind, or one the CLI refuses (its
            one-line message).
    """
    options = {} if options is None else options
    if not isinstance(options, dict):
        raise BadRequest("options: must be a JSON object")
    argv: list[str] = []
    for name, value in options.items():
        flag = OPTIONS.get(name)
        if flag is None:
            raise BadRequest(f"options.{name}: unknown option (allowed: {', '.join(OPTIONS)})")
        values = value if name == "knob" and isinstance(value, list) else [value]
        for one in values:
            if isinstance(one, bool) or not isinstance(one, str | int | float):
                raise BadRequest(f"options.{name}: {one!r} must be a number or a string")
            argv += [flag, str(one)]
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors):
            args = build_parser().parse_args(["start", *argv])
        autotune, _ops = options_from(args)
    except SystemExit:
        raise BadRequest(" ".join(errors.getvalue().split()) or "options: refused") from None
    except ValueError as error:
        raise BadRequest(" ".join(str(error).split())) from None
    problems = autotune.budget.errors() + autotune.canary.errors()
    if problems:
        raise BadRequest("; ".join(problems))
    return argv


def _status() -> tuple[dict[str, Any] | None, str]:
    try:
        return read_status(), ""
    except StateFileError as error:
        return None, str(error)


def _last_line() -> str:
    # The log's end only (a search that ran for days wrote a long one), never a FIFO's.
    lines = [line for line in tail_lines(search_log(), 5) if line.strip()]
    return lines[-1].strip() if lines else ""


def autotune_routes(guarded: Any) -> list[Route]:
    """The autotune routes, each behind ``guarded`` (token; writes refused read-only).

    Args:
        guarded: The app's guard (``guarded(handler, scope=...)``).

    Returns:
        The routes.
    """
    started: list[subprocess.Popen[bytes]] = []
    """Searches this agent started (polled, so a finished one is reaped, not left a zombie)."""

    def reap() -> None:
        started[:] = [p for p in started if p.poll() is None]

    async def status(request: Request) -> Response:
        reap()
        doc, error = await asyncio.to_thread(_status)
        running = doc is not None and await asyncio.to_thread(holder_alive, doc)
        return JSONResponse({"status": doc, "running": running, "error": error})

    async def act(http: Request) -> Response:
        reap()
        body = await json_body(http)
        unknown = sorted(set(body) - {"action", "options"})
        if unknown:
            raise BadRequest(f"{unknown[0]}: unknown field (allowed: action, options)")
        action = body.get("action")
        if action not in ACTIONS:
            raise BadRequest(f"action: {action!r} is not one of {', '.join(ACTIONS)}")
        if action != "start" and body.get("options") is not None:
            raise BadRequest(f"options: only a start takes options, not {action}")
        argv = start_argv(body.get("options")) if action == "start" else []
        doc, error = await asyncio.to_thread(_status)
        if error:
            return JSONResponse({"error": error}, status_code=409)
        alive = doc is not None and await asyncio.to_thread(holder_alive, doc)
        if action != "start":
            if not alive:
                return JSONResponse({"error": "no search is running"}, status_code=409)
            await asyncio.to_thread(ask_search, action)
            return JSONResponse({"action": action, "pid": doc.get("pid") if doc else None})
        if alive:
            pid = doc.get("pid") if doc else None
            return JSONResponse({"error": f"a search is running (pid {pid})"}, status_code=409)
        return await _start(argv)

    async def _start(argv: list[str]) -> Response:
        since = time.time()
        proc = await asyncio.to_thread(start_detached, argv)
        started.append(proc)
        deadline = time.monotonic() + START_WAIT_S
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                why = _last_line() or f"the search exited {proc.returncode}"
                return JSONResponse(
                    {"error": f"the search did not start: {why}"},
                    status_code=409 if proc.returncode == 2 else 500,
                )
            doc, _ = await asyncio.to_thread(_status)
            if doc and doc.get("pid") == proc.pid and float(doc.get("started_at", 0)) >= since - 1:
                return JSONResponse({"action": "start", "pid": proc.pid}, status_code=202)
            await asyncio.sleep(0.1)
        return JSONResponse({"action": "start", "pid": proc.pid, "reported": False}, 202)

    return [
        Route("/api/v1/autotune", guarded(status), methods=["GET"]),
        Route("/api/v1/autotune", guarded(act, scope="operate"), methods=["POST"]),
    ]

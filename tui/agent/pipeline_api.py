"""The agent's job routes: the node's ``gpufleet generate`` (a router job included) stopped and
started again through the API, so a many-node console's ``p`` does what it does for a local job.

The agent watches the job's status document (``--status``). A stop SIGTERMs the processes
writing it, each verified by its command line (``tui generate ... --status STATUS``; nothing
else is ever signalled), and remembers that command line and directory; a start runs it again,
detached, and the job resumes from its done record. A job the agent has not stopped (one started
by hand and already ended, or an agent restarted since) cannot be started from here: the answer
says so in one line and what to run instead. Both are journalled on the node.

======================================  ========================================================
``GET /api/v1/pipeline``                  the job: its pids, whether a start can run it again
``POST /api/v1/pipeline``                 ``{"action": "start" | "stop"}`` (writes; 409 when
                                          there is nothing to do)
======================================  ========================================================
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tui.agent.requests import BadRequest, json_body
from tui.ops.entries import simple_entry
from tui.ops.journal import append
from tui.ops.pipeline import find_pipelines, is_pipeline_of, stop_pipelines
from tui.outputs import make_dir, open_log
from tui.paths import pipeline_status_file


@dataclass(frozen=True, slots=True)
class JobCommand:
    """How the job was run, as read from its process before it was stopped."""

    options: tuple[str, ...]
    """Its ``generate`` options (after ``generate``)."""
    cwd: str
    """Its working directory (its relative paths are relative to it)."""


def _command(proc: psutil.Process, status_path: Path) -> JobCommand | None:
    try:
        line = proc.cmdline()
        cwd = proc.cwd()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None
    if not is_pipeline_of(line, status_path, cwd):
        return None
    return JobCommand(tuple(line[line.index("generate") + 1 :]), cwd)


def _start(command: JobCommand, log_path: Path) -> subprocess.Popen[bytes]:
    """Run the job's command again in its own session (like ``generate --detach``)."""
    make_dir(log_path.parent)
    with os.fdopen(open_log(log_path), "ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "tui", "generate", *command.options],
            cwd=command.cwd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )
    return process


def pipeline_routes(status_path: Path | None, by: str, guarded: Any) -> list[Route]:
    """The job routes, each behind ``guarded`` (token; writes refused read-only).

    Args:
        status_path: The job's status document (None: the state directory's).
        by: Who the journal names (``agent:NODE``).
        guarded: The app's guard (``guarded(handler, scope=...)``).

    Returns:
        The routes.
    """
    status = status_path or pipeline_status_file()
    log_path = status.parent / "pipeline-agent.log"
    remembered: list[JobCommand] = []
    children: list[subprocess.Popen[bytes]] = []
    """Jobs this agent started (polled, so one that ended is reaped, not left a zombie)."""

    def running() -> list[psutil.Process]:
        children[:] = [c for c in children if c.poll() is None]
        return find_pipelines(status)

    async def describe(request: Request) -> Response:
        procs = await asyncio.to_thread(running)
        return JSONResponse(
            {
                "status_path": str(status),
                "pids": [p.pid for p in procs],
                "restartable": bool(remembered),
            }
        )

    async def journal(kind: str, started: float, summary: str) -> None:
        entry = simple_entry(kind, started, time.time(), True, (), by, summary)
        await asyncio.to_thread(append, entry)

    async def act(http: Request) -> Response:
        body = await json_body(http)
        if set(body) - {"action"}:
            raise BadRequest('body: must be {"action": "start" | "stop"}')
        action = body.get("action")
        if action not in ("start", "stop"):
            raise BadRequest(f"action: {action!r} is not one of start, stop")
        started = time.time()
        procs = await asyncio.to_thread(running)
        if action == "stop":
            if not procs:
                return JSONResponse({"error": f"no job writes {status}"}, status_code=409)
            command = await asyncio.to_thread(_command, procs[0], status)
            if command is not None:
                remembered[:] = [command]
            pids = await asyncio.to_thread(stop_pipelines, status)
            await journal("pipeline-stop", started, f"stopped pipeline pids {pids}")
            return JSONResponse({"action": "stop", "pids": pids})
        if procs:
            pids = [p.pid for p in procs]
            return JSONResponse({"error": f"the job already runs (pid {pids[0]})"}, 409)
        if not remembered:
            why = (
                "this agent has not stopped the job, so it does not know its command: start it "
                "with gpufleet generate ... --status " + str(status) + " (p then stops and "
                "restarts it)"
            )
            return JSONResponse({"error": why}, status_code=409)
        child = await asyncio.to_thread(_start, remembered[0], log_path)
        children.append(child)
        await journal("pipeline-start", started, f"pipeline pid {child.pid}")
        return JSONResponse({"action": "start", "pid": child.pid}, status_code=202)

    return [
        Route("/api/v1/pipeline", guarded(describe), methods=["GET"]),
        Route("/api/v1/pipeline", guarded(act, scope="operate"), methods=["POST"]),
    ]

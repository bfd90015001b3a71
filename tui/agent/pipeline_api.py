"""The agent's job routes: the node's ``gpufleet generate`` (a router job included) stopped and
started again through the API, so a many-node console's ``p`` does what it does for a local job.

The agent's job is only a job of the agent's own user, started detached (``gpufleet generate
... --status S --detach``, a console's ``p``, or this agent's start) through the one door that
records it (``tui.pipeline.job_record``): a record in the user's private state directory with
the job's id, its options and its directory, and the id in the job's environment. A stop
SIGTERMs the processes of this user that carry that id (nothing else is ever signalled); a start
runs the recorded options again from the recorded directory, under a new id the agent records
itself, and the job resumes from its done record. A job with no record (run in the foreground,
or by another user, whatever its command line says) is not the agent's: the answer says so in
one line and what to run instead. Both are journalled on the node.

Why: the agent took as the job any process whose command line read ``gpufleet generate ...
--status S``, whoever owned it: ``stop`` signalled another user's process, and ``start`` ran, as
root, ``python -m tui generate`` with that user's options in that user's directory.

======================================  ========================================================
``GET /api/v1/pipeline``                  the job: its pids, whether a start can run it again
``POST /api/v1/pipeline``                 ``{"action": "start" | "stop"}`` (writes; 409 when
                                          there is nothing to do)
======================================  ========================================================
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import psutil
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tui.agent.requests import BadRequest, json_body
from tui.ops.entries import simple_entry
from tui.ops.journal import append
from tui.ops.pipeline import stop_processes
from tui.paths import pipeline_status_file
from tui.pipeline.detach import start_recorded
from tui.pipeline.job_record import (
    JobRecord,
    JobRecordError,
    job_processes,
    new_record,
    read_record,
)


def _job(status: Path) -> tuple[JobRecord | None, list[psutil.Process], str]:
    """The recorded job of ``status``, its running processes, and why there is no record ("")."""
    try:
        record = read_record(status)
    except JobRecordError as error:
        return None, [], str(error)
    if record is None:
        return None, [], ""
    return record, job_processes(record), ""


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
    children: list[subprocess.Popen[bytes]] = []
    """Jobs this agent started (polled, so one that ended is reaped, not left a zombie)."""

    def look() -> tuple[JobRecord | None, list[psutil.Process], str]:
        children[:] = [c for c in children if c.poll() is None]
        return _job(status)

    async def describe(request: Request) -> Response:
        record, procs, _ = await asyncio.to_thread(look)
        return JSONResponse(
            {
                "status_path": str(status),
                "pids": [p.pid for p in procs],
                "restartable": record is not None,
            }
        )

    async def journal(kind: str, started: float, summary: str) -> None:
        entry = simple_entry(kind, started, time.time(), True, (), by, summary)
        await asyncio.to_thread(append, entry)

    def not_ours(why: str) -> str:
        said = f" ({why})" if why else ""
        return (
            f"no job of this agent writes {status}{said}: the agent's job is one its user "
            f"started detached, with gpufleet generate ... --status {status} --detach (or p in "
            "a console), never another user's process nor one run in the foreground"
        )

    one_at_a_time = asyncio.Lock()
    """A start asked while a stop waits for the job's exit runs after it (not beside it)."""

    async def act(http: Request) -> Response:
        body = await json_body(http)
        if set(body) - {"action"}:
            raise BadRequest('body: must be {"action": "start" | "stop"}')
        action = body.get("action")
        if action not in ("start", "stop"):
            raise BadRequest(f"action: {action!r} is not one of start, stop")
        async with one_at_a_time:
            return await run(action)

    async def run(action: str) -> Response:
        started = time.time()
        record, procs, why = await asyncio.to_thread(look)
        if action == "stop":
            if not procs:
                return JSONResponse({"error": not_ours(why)}, status_code=409)
            pids = await asyncio.to_thread(stop_processes, procs)
            await journal("pipeline-stop", started, f"stopped pipeline pids {pids}")
            return JSONResponse({"action": "stop", "pids": pids})
        if procs:
            pids = [p.pid for p in procs]
            return JSONResponse({"error": f"the job already runs (pid {pids[0]})"}, 409)
        if record is None:
            return JSONResponse({"error": not_ours(why)}, status_code=409)
        # A new id, recorded by the agent itself: the options are the record's, never another
        # process's.
        again = replace(
            new_record(list(record.options), Path(record.status_path), Path(record.log_path)),
            cwd=record.cwd,
        )
        child = await asyncio.to_thread(start_recorded, again)
        children.append(child)
        await journal("pipeline-start", started, f"pipeline pid {child.pid}")
        return JSONResponse({"action": "start", "pid": child.pid}, status_code=202)

    return [
        Route("/api/v1/pipeline", guarded(describe), methods=["GET"]),
        Route("/api/v1/pipeline", guarded(act, scope="operate"), methods=["POST"]),
    ]

"""The fake OpenAI-compatible endpoint of the pipeline tests (``pipeline_endpoint.py --port P``).

It answers at once, echoing the prompt. ``POST /_control {"mode": ...}`` makes it fail
(``fail500``, ``fail400``, ``hang``, ``down503`` where /health answers 503 too), answer /health as
slowly as SGLang 0.5.23 does (``slowhealth``: 2.5 s, past the old 2 s probe timeout) or recover
(``ok``); ``GET /_stats`` counts the completion requests it received.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route


def serve(port: int) -> None:
    """Serve on 127.0.0.1:``port`` until killed."""
    state: dict[str, Any] = {"mode": "ok", "requests": 0}

    async def control(request: Request) -> Response:
        state["mode"] = (await request.json())["mode"]
        return JSONResponse(state)

    async def stats(request: Request) -> Response:
        return JSONResponse(state)

    async def health(request: Request) -> Response:
        if state["mode"] == "slowhealth":
            await asyncio.sleep(2.5)
        return Response(status_code=503 if state["mode"] == "down503" else 200)

    async def complete(request: Request) -> Response:
        state["requests"] = int(state["requests"]) + 1
        mode = state["mode"]
        if mode == "hang":
            await asyncio.sleep(3600)
        if mode == "slow":
            await asyncio.sleep(0.01)  # a job the client no longer outruns (the tests' signals)
        if mode in ("fail500", "down503"):
            return JSONResponse({"error": "boom"}, status_code=500 if mode == "fail500" else 503)
        if mode == "fail400":
            return JSONResponse({"error": "bad prompt"}, status_code=400)
        body = await request.json()
        text = f"echo {json.dumps(body.get('messages') or body.get('prompt'))}"
        choice: dict[str, object] = {"index": 0, "finish_reason": "stop"}
        if request.url.path.endswith("/chat/completions"):
            choice["message"] = {"role": "assistant", "content": text}
        else:
            choice["text"] = text
        usage = {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8}
        return JSONResponse({"choices": [choice], "usage": usage})

    app = Starlette(
        routes=[
            Route("/_control", control, methods=["POST"]),
            Route("/_stats", stats),
            Route("/health", health),
            Route("/v1/chat/completions", complete, methods=["POST"]),
            Route("/v1/completions", complete, methods=["POST"]),
        ]
    )
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="pipeline_endpoint.py")
    parser.add_argument("--port", type=int, required=True)
    serve(parser.parse_args().port)

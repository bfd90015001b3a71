"""The simulated server's HTTP API (Starlette), shaped like SGLang 0.5.23's ``http_server.py``
(``--sim-build 0.5.17``: no ``/ready``, and the deprecated ``/get_load``, as 0.5.17 answered).

Requests are served from the moment uvicorn listens (SGLang's warmup is itself one), during a
drain too (only ``/health``, ``/health_generate`` and ``/ready`` answer 503 then); every request
in flight is in ``rid_to_state`` until it is answered or its client goes away.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from tui.sglang.builds import SGLANG_0_5_17
from tui.sim import shapes
from tui.sim.health import HealthEnv, health_generate
from tui.sim.http_metrics import CountRequests
from tui.sim.metrics import build_registry, render
from tui.sim.requests import SimRequest
from tui.sim.state import SimState

_WORDS = [
    "the",
    "model",
    "considers",
    "each",
    "step",
    "of",
    "the",
    "problem",
    "and",
    "writes",
    "a",
    "careful",
    "answer",
]


def count_tokens(text: str) -> int:
    """Rough token count of a prompt (4 characters per token)."""
    return max(1, len(text) // 4)


def filler_text(tokens: int) -> str:
    """Deterministic output text of about ``tokens`` tokens (one word each)."""
    return " ".join(_WORDS[i % len(_WORDS)] for i in range(tokens))


class ClientGone(Exception):
    """A request was aborted because its client disconnected (SGLang's "type 1" abort)."""


def _wait_slice_s() -> float:
    """SGLang's ``SGLANG_REQUEST_STATE_WAIT_TIMEOUT`` (``srt/environ.py``, default 4 s)."""
    try:
        return max(0.05, float(os.environ.get("SGLANG_REQUEST_STATE_WAIT_TIMEOUT", "4")))
    except ValueError:
        return 4.0


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"object": "error", "message": message, "code": status}, status_code=status)


async def _json(request: Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ValueError("request body is not valid JSON") from None
    if not isinstance(body, dict):
        raise ValueError("request body must be a JSON object")
    return body


def _int_field(body: dict[str, Any], *names: str) -> int | None:
    for name in names:
        value = body.get(name)
        if value is not None:
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
            return value
    return None


def build_app(
    state: SimState,
    health_env: HealthEnv,
    lifespan: Callable[[Starlette], AbstractAsyncContextManager[None]] | None = None,
) -> Starlette:
    """The Starlette app for one simulated server.

    Args:
        state: the server's shared state.
        health_env: what the health handler reads from the environment.
        lifespan: the app's lifespan (the warmup runs in it, as in SGLang).

    Returns:
        The app (serve it with uvicorn).
    """
    plan, sch = state.plan, state.scheduler
    registry = build_registry(state)

    def deprecated(old: str, new: str) -> None:
        state.emit(
            f"Endpoint '{old}' is deprecated and will be removed in a future version. "
            f"Please use '{new}' instead.",
            info=False,
        )

    async def model_info(request: Request) -> Response:
        if request.url.path == "/get_model_info":
            deprecated("/get_model_info", "/model_info")
        return JSONResponse(shapes.model_info_body(state))

    async def health(request: Request) -> Response:
        return Response(status_code=await health_generate(state, request.url.path, health_env))

    async def ready(request: Request) -> Response:
        return Response(status_code=200 if state.is_ready() else 503)

    async def server_info(request: Request) -> Response:
        if request.url.path == "/get_server_info":
            deprecated("/get_server_info", "/server_info")
        return JSONResponse(shapes.server_info_body(state))

    async def loads(request: Request) -> Response:
        try:
            body = shapes.loads_body(state, request.query_params.get("include"))
        except ValueError as exc:
            return _error(400, str(exc))
        if request.query_params.get("format") == "prometheus":
            return PlainTextResponse(
                shapes.loads_prometheus(body), media_type="text/plain; version=0.0.4"
            )
        return JSONResponse(body)

    async def get_load(request: Request) -> Response:
        deprecated("/get_load", "/v1/loads")
        return JSONResponse(shapes.get_load_body(state))

    async def metrics(request: Request) -> Response:
        return Response(render(registry), media_type="text/plain; version=0.0.4; charset=utf-8")

    async def freeze_gc(request: Request) -> Response:
        return Response(status_code=200)

    async def models(request: Request) -> Response:
        return JSONResponse(
            {
                "object": "list",
                "data": [
                    {
                        "id": state.served_model_name,
                        "object": "model",
                        "created": int(time.time()),
                        "owned_by": "sglang",
                        "root": state.model_path,
                        "max_model_len": plan.context_len,
                    }
                ],
            }
        )

    max_input = min(plan.context_len - 1, plan.max_total_num_tokens - 1) - 5

    async def run_request(
        request: Request, prompt_tokens: int, max_tokens: int | None, ignore_eos: bool
    ) -> SimRequest:
        if prompt_tokens >= max_input:
            raise ValueError(
                f"Input length ({prompt_tokens} tokens) exceeds the maximum allowed length "
                f"({max_input} tokens). Use a shorter input or enable --allow-auto-truncate."
            )
        state.handle_loop()
        rid = uuid.uuid4().hex
        state.rid_to_state[rid] = time.time()
        req = sch.submit(rid, prompt_tokens, max_tokens, ignore_eos)
        try:
            while True:
                # SGLang's tokenizer manager waits for a request's output in slices of
                # SGLANG_REQUEST_STATE_WAIT_TIMEOUT (4 s) and, between slices, aborts a request
                # whose client has gone (``_stream_one_response``'s "type 1"): a stopped client
                # frees its slot within ~4 s instead of holding a drain until it finishes.
                done, _ = await asyncio.wait({req.done}, timeout=_wait_slice_s())
                if done:
                    break
                if await request.is_disconnected():
                    _abort(req)
                    state.emit(
                        "[http_server] Error: Request is disconnected from the client side "
                        f"(type 1). Abort request obj.rid='{rid}'",
                        info=False,
                    )
                    raise ClientGone(rid)
        except asyncio.CancelledError:
            _abort(req)
            raise
        finally:
            state.rid_to_state.pop(rid, None)
        return req

    def _abort(req: SimRequest) -> None:
        state.counters["aborted"] = state.counters.get("aborted", 0) + 1
        sch.abort(req)

    async def serve(request: Request, kind: str) -> Response:
        try:
            body = await _json(request)
            if kind == "generate":
                params = body.get("sampling_params") or {}
                text = body.get("text") or ""
                ids = body.get("input_ids")
                prompt = len(ids) if isinstance(ids, list) else count_tokens(str(text))
                max_tokens = _int_field(params, "max_new_tokens")
                ignore_eos = bool(params.get("ignore_eos", False))
            elif kind == "chat":
                messages = body.get("messages")
                if not isinstance(messages, list) or not messages:
                    raise ValueError("messages must be a non-empty list")
                prompt = sum(count_tokens(str(m.get("content", ""))) + 4 for m in messages)
                max_tokens = _int_field(body, "max_completion_tokens", "max_tokens")
                ignore_eos = bool(body.get("ignore_eos", False))
            else:
                prompt = count_tokens(str(body.get("prompt", "")))
                max_tokens = _int_field(body, "max_tokens")
                ignore_eos = bool(body.get("ignore_eos", False))
            started = time.monotonic()
            req = await run_request(request, prompt, max_tokens, ignore_eos)
        except ClientGone:
            return _error(400, "client disconnected")  # nobody reads it: the socket is gone
        except ValueError as exc:
            return _error(400, str(exc))
        return _answer(state, req, body, kind, started)

    async def generate(request: Request) -> Response:
        return await serve(request, "generate")

    async def chat(request: Request) -> Response:
        return await serve(request, "chat")

    async def completions(request: Request) -> Response:
        return await serve(request, "completion")

    v0517 = plan.build == SGLANG_0_5_17
    routes = [
        Route("/model_info", model_info),
        Route("/get_model_info", model_info),
        Route("/health", health),
        Route("/health_generate", health),
        # 0.5.17 has no /ready (a real one answered 404) but still the legacy /get_load.
        Route("/get_load", get_load) if v0517 else Route("/ready", ready),
        Route("/server_info", server_info),
        Route("/get_server_info", server_info),
        Route("/v1/loads", loads),
        Route("/v1/models", models),
        Route("/freeze_gc", freeze_gc, methods=["POST"]),
        Route("/generate", generate, methods=["POST"]),
        Route("/v1/chat/completions", chat, methods=["POST"]),
        Route("/v1/completions", completions, methods=["POST"]),
    ]
    middleware = []
    if state.enable_metrics:
        routes.append(Route("/metrics", metrics))
        # SGLang counts every request when it arrives, a draining server's included.
        middleware.append(Middleware(CountRequests, counts=state.http))
    return Starlette(routes=routes, middleware=middleware, lifespan=lifespan)


def _answer(
    state: SimState, req: SimRequest, body: dict[str, Any], kind: str, started: float
) -> Response:
    """The response body of a finished generation, in the endpoint's OpenAI/SGLang shape."""
    text = filler_text(req.target_tokens)
    finish = "length" if req.capped else "stop"
    usage = {
        "prompt_tokens": req.prompt_tokens,
        "completion_tokens": req.target_tokens,
        "total_tokens": req.prompt_tokens + req.target_tokens,
    }
    name = body.get("model") or state.served_model_name
    if kind == "generate":
        return JSONResponse(
            {
                "text": text,
                "meta_info": {
                    "id": req.rid,
                    "finish_reason": {"type": finish},
                    "prompt_tokens": req.prompt_tokens,
                    "completion_tokens": req.target_tokens,
                    "cached_tokens": 0,
                    "e2e_latency": time.monotonic() - started,
                },
            }
        )
    obj = "chat.completion" if kind == "chat" else "text_completion"
    if body.get("stream"):
        return StreamingResponse(
            _stream(req, name, kind, text, finish, usage), media_type="text/event-stream"
        )
    choice: dict[str, Any] = {"index": 0, "finish_reason": finish, "logprobs": None}
    if kind == "chat":
        choice["message"] = {"role": "assistant", "content": text, "reasoning_content": None}
    else:
        choice["text"] = text
    return JSONResponse(
        {
            "id": req.rid,
            "object": obj,
            "created": int(time.time()),
            "model": name,
            "choices": [choice],
            "usage": usage,
        }
    )


async def _stream(
    req: SimRequest, name: str, kind: str, text: str, finish: str, usage: dict[str, int]
) -> AsyncIterator[bytes]:
    """SSE chunks of a finished request: the content, the finish reason with usage, [DONE]."""
    obj = "chat.completion.chunk" if kind == "chat" else "text_completion"

    def chunk(delta: dict[str, Any], reason: str | None, with_usage: bool = False) -> bytes:
        choice: dict[str, Any] = {"index": 0, "finish_reason": reason}
        if kind == "chat":
            choice["delta"] = delta
        else:
            choice["text"] = delta.get("content", "")
        payload: dict[str, Any] = {
            "id": req.rid,
            "object": obj,
            "created": int(time.time()),
            "model": name,
            "choices": [choice],
        }
        if with_usage:
            payload["usage"] = usage
        return f"data: {json.dumps(payload)}\n\n".encode()

    yield chunk({"role": "assistant", "content": text}, None)
    yield chunk({}, finish, with_usage=True)
    yield b"data: [DONE]\n\n"

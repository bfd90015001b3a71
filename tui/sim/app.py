"""The simulated server's HTTP API (Starlette), shaped like SGLang 0.5.23's ``http_server.py``."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tui.sglang.models import GIB
from tui.sim.metrics import build_registry, render
from tui.sim.scheduler import DrainingError, SimRequest
from tui.sim.state import SGLANG_VERSION, SimState

HEALTH_TIMEOUT_S = 20.0
"""SGLANG_HEALTH_CHECK_TIMEOUT's default."""

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


def build_app(state: SimState) -> Starlette:
    """The Starlette app for one simulated server.

    Args:
        state: the server's shared state.

    Returns:
        The app (serve it with uvicorn).
    """
    plan, sch = state.plan, state.scheduler
    registry = build_registry(state)

    def model_info_body() -> dict[str, Any]:
        return {
            "model_path": state.model_path,
            "served_model_name": state.served_model_name,
            "tokenizer_path": state.model_path,
            "is_generation": True,
            "preferred_sampling_params": None,
            "weight_version": "default",
            "load_format": "auto",
            "reasoning_parser": None,
            "tool_call_parser": None,
            "disaggregation_mode": "null",
            "has_image_understanding": False,
            "has_audio_understanding": False,
            "model_type": "qwen3_5" if plan.is_hybrid_mamba else "llama",
            "architectures": [state.model.architecture],
        }

    async def model_info(request: Request) -> Response:
        return JSONResponse(model_info_body())

    async def health(request: Request) -> Response:
        if not state.ready:
            return Response(status_code=503)
        if sch.running:
            return Response(status_code=200)  # a busy scheduler answers the probe at once
        try:
            req = sch.submit(f"HEALTH_CHECK_{uuid.uuid4().hex}", 1, 1, True)
            await asyncio.wait_for(asyncio.shield(req.done), HEALTH_TIMEOUT_S)
        except (DrainingError, TimeoutError):
            return Response(status_code=503)
        return Response(status_code=200)

    async def ready(request: Request) -> Response:
        return Response(status_code=200 if state.ready else 503)

    def memory_usage() -> dict[str, Any]:
        return {
            "weight": round((plan.weight_bytes + plan.draft_weight_bytes) / GIB, 2),
            "kv_cache": round(plan.kv_bytes / GIB, 2),
            "graph": round(plan.graph_bytes / GIB, 2),
            "token_capacity": plan.max_total_num_tokens,
        }

    async def server_info(request: Request) -> Response:
        internal = dict(state.server_args)
        internal.update(
            max_mamba_cache_size=plan.max_mamba_cache_size or None,
            effective_max_running_requests_per_dp=plan.max_running_requests,
            last_gen_throughput=sch.last_gen_throughput,
            memory_usage=memory_usage(),
            avg_spec_accept_length=sch.accept if plan.speculative else None,
        )
        body = dict(state.server_args)
        body.update(
            launch_command=state.launch_command,
            status="ready" if state.ready else state.status,
            max_total_num_tokens=plan.max_total_num_tokens,
            max_req_input_len=plan.max_total_num_tokens - 5,
            startup_time=state.startup_time,
            internal_states=[internal],
            version=SGLANG_VERSION,
        )
        return JSONResponse(body)

    async def loads(request: Request) -> Response:
        load = {
            "dp_rank": 0,
            "num_running_reqs": len(sch.running),
            "num_waiting_reqs": len(sch.waiting),
            "num_waiting_uncached_tokens": sum(r.prompt_tokens for r in sch.waiting),
            "num_used_tokens": sch.used_tokens(),
            "num_total_tokens": plan.max_total_num_tokens,
            "num_active_tokens": sch.used_tokens(),
            "max_total_num_tokens": plan.max_total_num_tokens,
            "max_running_requests": plan.max_running_requests,
            "token_usage": sch.token_usage(),
            "gen_throughput": sch.last_gen_throughput,
            "cache_hit_rate": 0.0,
            "utilization": sch.utilization() / 100.0,
            "total_prefill_uncached_tokens": sch.prompt_tokens_total,
            "total_prefill_busy_us": 0,
            "memory": {
                "weight_gb": memory_usage()["weight"],
                "kv_cache_gb": memory_usage()["kv_cache"],
                "graph_gb": memory_usage()["graph"],
                "token_capacity": plan.max_total_num_tokens,
            },
            "speculative": {
                "accept_length": sch.accept if plan.speculative else None,
                "accept_rate": (sch.accept - 1) / max(plan.num_draft_tokens - 1, 1)
                if plan.speculative
                else None,
            },
            "queues": {"waiting": len(sch.waiting), "grammar": 0, "paused": 0, "retracted": 0},
        }
        return JSONResponse(
            {
                "timestamp": time.time(),
                "version": SGLANG_VERSION,
                "accelerator": "cuda",
                "num_accelerators": 1,
                "loads": [load],
            }
        )

    async def metrics(request: Request) -> Response:
        return Response(render(registry), media_type="text/plain; version=0.0.4; charset=utf-8")

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

    async def run_request(
        prompt_tokens: int, max_tokens: int | None, ignore_eos: bool
    ) -> SimRequest:
        if prompt_tokens > plan.context_len:
            raise ValueError(
                f"Input length ({prompt_tokens} tokens) exceeds the maximum allowed length "
                f"({plan.context_len} tokens). Use a shorter input or enable --allow-auto-truncate."
            )
        req = sch.submit(uuid.uuid4().hex, prompt_tokens, max_tokens, ignore_eos)
        try:
            await asyncio.shield(req.done)
        except asyncio.CancelledError:
            state.counters["aborted"] = state.counters.get("aborted", 0) + 1
            raise
        return req

    async def serve(request: Request, kind: str) -> Response:
        if state.status != "ready":
            return _error(503, "The server is not ready or is shutting down.")
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
            req = await run_request(prompt, max_tokens, ignore_eos)
        except ValueError as exc:
            return _error(400, str(exc))
        except DrainingError as exc:
            return _error(503, str(exc))
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

    async def generate(request: Request) -> Response:
        return await serve(request, "generate")

    async def chat(request: Request) -> Response:
        return await serve(request, "chat")

    async def completions(request: Request) -> Response:
        return await serve(request, "completion")

    routes = [
        Route("/model_info", model_info),
        Route("/get_model_info", model_info),
        Route("/health", health),
        Route("/health_generate", health),
        Route("/ready", ready),
        Route("/server_info", server_info),
        Route("/get_server_info", server_info),
        Route("/v1/loads", loads),
        Route("/v1/models", models),
        Route("/generate", generate, methods=["POST"]),
        Route("/v1/chat/completions", chat, methods=["POST"]),
        Route("/v1/completions", completions, methods=["POST"]),
    ]
    if state.enable_metrics:
        routes.append(Route("/metrics", metrics))
    return Starlette(routes=routes)


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

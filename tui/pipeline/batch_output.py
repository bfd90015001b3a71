"""Output and error records: OpenAI Batch output lines, plus the pipeline's own fields.

A result line is what OpenAI's Batch API and ``vllm run-batch`` write::

    {"id": "batch_req_...", "custom_id": "q-17",
     "response": {"status_code": 200, "request_id": "...", "body": {...the completion...}},
     "error": null,
     "index": 17, "text": "...", "prompt_tokens": 9, "completion_tokens": 64,
     "server": "http://127.0.0.1:30000", "started_at": 1733.1, "latency_s": 2.5,
     "finish_reason": "length"}

``index`` is the id's number in the output directory's job index (stable across edits of the
prompts file); the fields after it are the pipeline's own. A prompt that used up its retries
goes to ``failures.jsonl`` as an OpenAI Batch error line (``response`` null, ``error`` set).
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

from tui.pipeline.batch_input import Prompt


def record_id(custom_id: str) -> str:
    """The record's ``id``: stable for one custom_id (a rerun of the same prompt keeps it)."""
    digest = hashlib.blake2b(custom_id.encode("utf-8", "surrogatepass"), digest_size=12)
    return "batch_req_" + digest.hexdigest()


def output_record(
    prompt: Prompt, serial: int, content: bytes, server: str, started_at: float, latency: float
) -> tuple[bytes, int]:
    """One result line from a completion response.

    Args:
        prompt: the prompt it answers.
        serial: the prompt's number in the job index.
        content: the response body (JSON of a chat completion or a completion).
        server: the base URL of the server that answered.
        started_at: ``time.time()`` when the request was sent.
        latency: seconds until the whole answer arrived.

    Returns:
        (the JSON line with its newline, completion tokens).

    Raises:
        ValueError, KeyError, IndexError, TypeError: the response is not a completion.
    """
    data: dict[str, Any] = json.loads(content)
    choice = data["choices"][0]
    message = choice.get("message")
    text = message["content"] if message is not None else choice["text"]
    usage = data.get("usage") or {}
    completion_tokens = int(usage.get("completion_tokens", 0))
    head = {"id": record_id(prompt.custom_id), "custom_id": prompt.custom_id}
    ours = {
        "error": None,
        "index": serial,
        "text": text,
        "prompt_tokens": int(usage.get("prompt_tokens", 0)),
        "completion_tokens": completion_tokens,
        "server": server,
        "started_at": round(started_at, 3),
        "latency_s": round(latency, 4),
        "finish_reason": choice.get("finish_reason"),
    }
    request_id = json.dumps(str(data.get("id", ""))).encode()
    body = content.strip()
    if b"\n" in body:  # a pretty-printed answer: one line is the record's first duty
        body = json.dumps(data).encode()
    # The body as the server sent it (parsed above, so valid JSON): encoding it again cost more
    # than the rest of the record.
    line = (
        json.dumps(head)[:-1].encode()
        + b', "response": {"status_code": 200, "request_id": '
        + request_id
        + b', "body": '
        + body
        + b"}, "
        + json.dumps(ours)[1:].encode()
        + b"\n"
    )
    return line, completion_tokens


def error_record(custom_id: str, serial: int, reason: str, attempts: int) -> bytes:
    """One line of ``failures.jsonl``: a prompt that used up its retries.

    Args:
        custom_id: the prompt's id.
        serial: its number in the job index.
        reason: the last failure, in plain words.
        attempts: how many times it was sent.

    Returns:
        The JSON line with its newline.
    """
    record = {
        "id": record_id(custom_id),
        "custom_id": custom_id,
        "response": None,
        "error": {"code": "failed_after_retries", "message": reason},
        "index": serial,
        "attempts": attempts,
        "at": time.time(),
    }
    return json.dumps(record).encode() + b"\n"

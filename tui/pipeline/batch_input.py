"""One line of the prompts file: an OpenAI Batch request (or the older bare format) and its id.

The OpenAI Batch input format (what ``vllm run-batch``, OpenAI's ``/v1/batches`` and Ray Data LLM
read; SGLang 0.5.23 no longer serves ``/v1/batches``) is one JSON object a line::

    {"custom_id": "q-17", "method": "POST", "url": "/v1/chat/completions",
     "body": {"model": "m", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 64}}

``custom_id`` is the prompt's identity: resume, the done record and the S3 manifest are keyed by
it, so lines may be inserted, removed or reordered between runs. The older bare format,
``{"messages": [...]}`` or ``{"prompt": "..."}``, is still read; its id is derived from the
line's content (``gf-`` and 20 hex digits of a BLAKE2b digest of its canonical JSON), so it too
survives edits elsewhere in the file; a repeated identical line gets ``-2``, ``-3``... in order.

Every check here is bounded: a line's nesting depth is limited (``MAX_DEPTH``) and a line nested
deeper than the JSON parser can follow is a named bad line, never a RecursionError.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

MAX_DEPTH = 64
"""Deepest nesting of objects and arrays allowed in one line (a chat prompt needs 4)."""
MAX_ID_CHARS = 512
"""Longest ``custom_id`` accepted (OpenAI's own limit is 64 characters)."""
ENDPOINTS = ("/v1/chat/completions", "/v1/completions")
"""The ``url`` values served: SGLang's OpenAI-compatible chat and completion endpoints."""
DERIVED_PREFIX = "gf-"
"""Prefix of the ids derived from the content of bare-format lines."""


@dataclass(frozen=True, slots=True)
class Prompt:
    """One validated request of the prompts file."""

    custom_id: str
    """Its identity (given, or derived from the content of a bare-format line)."""
    url: str
    """The endpoint path it is sent to (one of ``ENDPOINTS``)."""
    body: dict[str, Any]
    """The request body as written (``model`` and ``max_tokens`` are filled in when sent)."""
    derived: bool = False
    """Whether ``custom_id`` was derived from the content (bare format)."""


def id_hash(custom_id: str) -> int:
    """The 64-bit hash of an id that the job index stores (never 0: 0 marks "no id").

    Args:
        custom_id: the id.

    Returns:
        A non-zero 64-bit integer.
    """
    digest = hashlib.blake2b(custom_id.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "little") or 1


def repeated_id(base: str, occurrence: int) -> str:
    """The id of the ``occurrence``-th identical bare-format line (the first keeps ``base``)."""
    return base if occurrence <= 1 else f"{base}-{occurrence}"


def _depth_over(obj: Any, limit: int) -> bool:
    """Whether ``obj`` nests objects/arrays deeper than ``limit`` (iterative: no recursion)."""
    stack: list[tuple[Any, int]] = [(obj, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(item, dict):
            stack.extend((value, depth + 1) for value in item.values() if _nests(value))
        elif isinstance(item, list):
            stack.extend((value, depth + 1) for value in item if _nests(value))
    return False


def _nests(value: object) -> bool:
    return isinstance(value, dict | list)


def _decode(raw: bytes) -> Any | str:
    """Parse one line; a str return is why it is not JSON."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"not UTF-8 (byte 0x{raw[exc.start]:02x} at column {exc.start + 1})"
    # A line with fewer brackets than the limit cannot nest deeper: the common case skips the walk.
    brackets = text.count("[") + text.count("{")
    try:
        obj = json.loads(text)
    except RecursionError:
        return f"nested deeper than {MAX_DEPTH} levels"
    except ValueError as exc:
        return f"not valid JSON ({exc})"
    if brackets > MAX_DEPTH and _depth_over(obj, MAX_DEPTH):
        return f"nested deeper than {MAX_DEPTH} levels"
    return obj


def _messages_problem(messages: object, field: str) -> str | None:
    if not isinstance(messages, list) or not messages:
        return f"field '{field}' must be a non-empty list of {{role, content}} objects"
    for position, message in enumerate(messages):
        if not isinstance(message, dict) or "role" not in message or "content" not in message:
            return f"field '{field}'[{position}] must be an object with 'role' and 'content'"
    return None


def _prompt_problem(prompt: object, field: str) -> str | None:
    if isinstance(prompt, str):
        return None
    if isinstance(prompt, list) and prompt and all(isinstance(p, str | int) for p in prompt):
        return None
    return f"field '{field}' must be a string (or a list of strings or token ids)"


def _positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _batch_line(obj: dict[str, Any]) -> Prompt | str:
    custom_id = obj["custom_id"]
    if not isinstance(custom_id, str) or not custom_id.strip():
        return "field 'custom_id' must be a non-empty string"
    if len(custom_id) > MAX_ID_CHARS:
        return f"field 'custom_id' is {len(custom_id)} characters: at most {MAX_ID_CHARS}"
    if obj.get("method", "POST") != "POST":
        return f"field 'method' must be \"POST\", got {obj['method']!r}"
    url = obj.get("url")
    if url not in ENDPOINTS:
        return f"field 'url' must be one of {', '.join(ENDPOINTS)}, got {url!r}"
    body = obj.get("body")
    if not isinstance(body, dict):
        return "field 'body' must be an object (the request body)"
    if url == ENDPOINTS[0]:
        problem = _messages_problem(body.get("messages"), "body.messages")
    else:
        problem = _prompt_problem(body.get("prompt"), "body.prompt")
    if problem is None and body.get("stream"):
        problem = "field 'body.stream' must be false: each answer is stored whole"
    for name in ("max_tokens", "max_completion_tokens"):
        value = body.get(name)
        if problem is None and value is not None and not _positive_int(value):
            problem = f"field 'body.{name}' must be an integer >= 1, got {value!r}"
    return problem if problem is not None else Prompt(custom_id, str(url), body)


def _bare_line(obj: dict[str, Any]) -> Prompt | str:
    if "messages" in obj:
        problem = _messages_problem(obj["messages"], "messages")
        url, body = ENDPOINTS[0], {"messages": obj["messages"]}
    elif "prompt" in obj:
        problem = _prompt_problem(obj["prompt"], "prompt")
        url, body = ENDPOINTS[1], {"prompt": obj["prompt"]}
    else:
        return "needs 'custom_id', 'url' and 'body' (OpenAI Batch), or a 'messages' or 'prompt'"
    if problem is not None:
        return problem
    canonical = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    digest = hashlib.blake2b(canonical.encode("utf-8", "surrogatepass"), digest_size=10)
    return Prompt(DERIVED_PREFIX + digest.hexdigest(), url, body, derived=True)


def parse_prompt(raw: bytes) -> Prompt | str:
    """Validate one line of the prompts file.

    Args:
        raw: the line's bytes (its newline may be included).

    Returns:
        The prompt, or a one-line reason why the line is not one. A bare-format line's id is the
        first occurrence's (see :func:`repeated_id`).
    """
    obj = _decode(raw)
    if isinstance(obj, str):
        return obj
    if not isinstance(obj, dict):
        return f"expected a JSON object, got {type(obj).__name__}"
    if "custom_id" in obj:
        return _batch_line(obj)
    return _bare_line(obj)


def request_for(prompt: Prompt, model: str, max_tokens: int) -> tuple[str, bytes]:
    """The request to send for one prompt: its body with ``model`` and a length limit filled in.

    Args:
        prompt: a validated prompt.
        model: the model name used when the body names none.
        max_tokens: the completion limit used when the body sets none.

    Returns:
        (endpoint path, JSON body bytes).
    """
    body = dict(prompt.body)
    body.setdefault("model", model)
    if "max_tokens" not in body and "max_completion_tokens" not in body:
        body["max_tokens"] = max_tokens
    return prompt.url, json.dumps(body).encode()

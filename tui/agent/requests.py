"""Reading what a caller sends the agent: a body (bounded while it is read), a JSON object, a
profile document judged like a profile file. The operations themselves are commands, checked by
the codec (``tui.agent.codec.decode_command``).

What does not fit is refused with one line naming the field and what is allowed (HTTP 400);
nothing is started.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from tui.agent.codec import MAX_GPU
from tui.inputs import parse_json
from tui.profiles import Profile, ProfileError, profile_from_dict


class BadRequest(ValueError):
    """The request does not fit (the message names the field and what is allowed)."""


class BodyTooLarge(BadRequest):
    """The body is larger than the route accepts (413); the rest of it was not read."""


MAX_BODY_BYTES = 64 * 1024
"""Largest request body accepted (a profile's route allows more)."""


async def read_body(request: Request, limit: int = MAX_BODY_BYTES) -> bytes:
    """The one reading of a request body: at most ``limit`` bytes, enforced while reading.

    A ``Content-Length`` over the limit is refused before a byte is read; a body without one
    (chunked) is read chunk by chunk and refused as soon as it passes the limit, so a 400 MiB
    upload costs at most ``limit`` bytes of memory, never the whole body.

    Raises:
        BodyTooLarge: over ``limit`` (the caller answers 413 and closes the connection).
        BadRequest: a ``Content-Length`` that is not a number.
    """
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.strip().isdigit():
            raise BadRequest(f"Content-Length: {declared[:20]!r} is not a number of bytes")
        if int(declared) > limit:
            raise BodyTooLarge(f"body: larger than {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(f"body: larger than {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def json_object(raw: bytes, limit: int = MAX_BODY_BYTES) -> dict[str, Any]:
    """A body's bytes as a JSON object (strict: no NaN, no 1e999, not nested deeply).

    Raises:
        BadRequest: too large, not JSON, or not an object (one line naming the body).
    """
    if len(raw) > limit:
        raise BodyTooLarge(f"body: larger than {limit} bytes")
    try:
        parsed = parse_json(raw or b"null")
    except ValueError as error:
        raise BadRequest(f"body: not JSON ({error})"[:300]) from None
    if not isinstance(parsed, dict):
        raise BadRequest("body: must be a JSON object")
    return parsed


async def json_body(request: Request, limit: int = MAX_BODY_BYTES) -> dict[str, Any]:
    """``json_object(await read_body(request, limit))``: every JSON route's body."""
    return json_object(await read_body(request, limit), limit)


def _bounded(doc: dict[str, Any]) -> None:
    """Refuse a document naming more GPUs than the API accepts, before it is parsed."""
    most = MAX_GPU + 1
    fleet = doc.get("fleet")
    sizes: list[tuple[str, Any]] = [("gpu", doc.get("gpu"))]
    if isinstance(fleet, dict):
        sizes += [("fleet.gpus", fleet.get("gpus")), ("fleet.ports", fleet.get("ports"))]
    for field, value in sizes:
        if isinstance(value, list | dict) and len(value) > most:
            raise BadRequest(
                f"profile: {field}: {len(value)} entries; at most {most} through the agent"
            )


def parse_profile(doc: Any, name: str = "profile") -> Profile:
    """The profile a request carries, judged like a profile file. Blocking (the check of a
    large document takes a while): run it in a thread.

    Args:
        doc: The ``profile`` field (a TOML document as JSON).
        name: The name it is saved or judged under.

    Raises:
        BadRequest: not a document, more GPUs than ``MAX_GPU + 1`` or an index past
            ``MAX_GPU``, or a profile with problems (one line, naming the field).
    """
    if not isinstance(doc, dict):
        raise BadRequest("profile: must be a profile document (a JSON object)")
    _bounded(doc)
    try:
        profile = profile_from_dict(doc, default_name=name, source="profile")
    except ProfileError as error:
        raise BadRequest(one_line(error)) from None
    past = [g for g in profile.gpus if g > MAX_GPU]
    if past:
        raise BadRequest(f"profile: fleet.gpus: GPU {past[0]} is not a GPU index (0-{MAX_GPU})")
    return profile


def one_line(error: Exception) -> str:
    """An error's message on one line."""
    return " ".join(str(error).split())

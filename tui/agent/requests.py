"""What a caller may ask the agent to do: each operation's arguments, checked before anything runs.

A request that does not fit is refused with one line naming the field and what is allowed (HTTP
400); nothing is started.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, get_args

from starlette.requests import Request

from tui.control.stop import StopMode
from tui.inputs import parse_json
from tui.profiles.store import NAME

KINDS = ("apply", "relaunch", "kill", "rollback", "canary", "rollout", "rollout_back", "stop_fleet")
"""Every operation the API runs."""
MODES: tuple[str, ...] = get_args(StopMode)
"""How a server may be stopped."""
FIELDS = ("kind", "profile", "gpus", "gpu", "mode", "batch", "measure", "expect", "drain_s")
"""Every field a request may have."""
MAX_GPU = 255
"""Largest GPU index accepted."""
MAX_BATCH = 64
"""Largest rollout batch accepted."""
MAX_NAME = 200
"""Longest profile name accepted."""


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


@dataclass(frozen=True, slots=True)
class OperationRequest:
    """One checked request."""

    kind: str
    """One of ``KINDS``."""
    profile: str | None = None
    """Profile name (apply, canary, rollout)."""
    gpus: tuple[int, ...] | None = None
    """GPUs (None: the operation's default, e.g. every GPU)."""
    gpu: int | None = None
    """The canary's GPU."""
    mode: StopMode = "drain"
    """How servers are stopped."""
    batch: int = 1
    """Rollout batch size."""
    measure: bool | None = None
    """Whether an apply measures throughput (None: the agent's default)."""
    expect: str | None = None
    """A rollback's guard: only if every GPU still runs this profile (``FleetOps.rollback``)."""
    drain_s: float | None = None
    """A kill's drain deadline, the operator's (None: the profiles' ``[stop]``, else 60 s)."""

    def args(self) -> dict[str, Any]:
        """The request as sent back in the operation's status."""
        out: dict[str, Any] = {"kind": self.kind, "mode": self.mode}
        if self.profile is not None:
            out["profile"] = self.profile
        if self.gpus is not None:
            out["gpus"] = list(self.gpus)
        if self.gpu is not None:
            out["gpu"] = self.gpu
        if self.kind in ("rollout", "rollout_back"):
            out["batch"] = self.batch
        if self.expect is not None:
            out["expect"] = self.expect
        if self.drain_s is not None:
            out["drain_s"] = self.drain_s
        return out


def _gpu(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_GPU:
        raise BadRequest(f"{name}: {value!r} is not a GPU index (0-{MAX_GPU})")
    return value


def _gpus(value: Any) -> tuple[int, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not value or len(value) > MAX_GPU + 1:
        raise BadRequest(f"gpus: {value!r} must be a non-empty list of GPU indices (0-{MAX_GPU})")
    return tuple(sorted({_gpu(v, "gpus") for v in value}))


def _profile(value: Any, required: bool, field: str = "profile") -> str | None:
    if value is None and not required:
        return None
    # A name, never a path: the same rule as GET /api/v1/profiles/{name} (the node looks it up
    # in its own profile directories only).
    if not isinstance(value, str) or not NAME.match(value) or value.endswith(".toml"):
        shown = repr(value)[:80]
        raise BadRequest(
            f"{field}: {shown} must be a profile name: letters, digits, '.', '_' or '-' "
            f"(1-{MAX_NAME}), not a path"
        )
    return value


def parse_request(body: Any) -> OperationRequest:
    """Check a request body (parsed JSON).

    Raises:
        BadRequest: naming the field and what is allowed.
    """
    if not isinstance(body, Mapping):
        raise BadRequest("body: must be a JSON object")
    unknown = sorted(set(body) - set(FIELDS))
    if unknown:
        raise BadRequest(f"{unknown[0]}: unknown field (allowed: {', '.join(FIELDS)})")
    kind = body.get("kind")
    if kind not in KINDS:
        raise BadRequest(f"kind: {kind!r} is not one of {', '.join(KINDS)}")
    mode = body.get("mode", "drain")
    if mode not in MODES:
        raise BadRequest(f"mode: {mode!r} is not one of {', '.join(MODES)}")
    batch = body.get("batch", 1)
    if isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= MAX_BATCH:
        raise BadRequest(f"batch: {batch!r} must be an integer in 1-{MAX_BATCH}")
    measure = body.get("measure")
    if measure is not None and not isinstance(measure, bool):
        raise BadRequest(f"measure: {measure!r} must be true, false or absent")
    needs_profile = kind in ("apply", "canary", "rollout")
    gpu = _gpu(body["gpu"], "gpu") if body.get("gpu") is not None else None
    if kind == "canary" and gpu is None:
        raise BadRequest("gpu: a canary needs its GPU (0-255)")
    gpus = _gpus(body.get("gpus"))
    expect = _profile(body.get("expect"), False, "expect")
    if expect is not None and kind != "rollback":
        raise BadRequest(f"expect: only a rollback takes it, not {kind}")
    if kind in ("relaunch", "kill") and gpus is None:
        raise BadRequest(f"gpus: {kind} needs a non-empty list of GPU indices")
    drain_s = body.get("drain_s")
    if drain_s is not None:
        if kind != "kill":
            raise BadRequest(f"drain_s: only a kill takes it, not {kind}")
        if isinstance(drain_s, bool) or not isinstance(drain_s, int | float):
            raise BadRequest(f"drain_s: {drain_s!r} must be seconds in (0, 1000000]")
        if not 0 < drain_s <= 10**6:
            raise BadRequest(f"drain_s: {drain_s!r} must be seconds in (0, 1000000]")
    return OperationRequest(
        kind=kind,
        profile=_profile(body.get("profile"), needs_profile),
        gpus=gpus,
        gpu=gpu,
        mode=mode,
        batch=batch,
        measure=measure,
        expect=expect,
        drain_s=None if drain_s is None else float(drain_s),
    )

"""``/health`` and ``/health_generate``: one handler, exactly as SGLang 0.5.23's.

``srt/entrypoints/http_server.py`` ``health_generate``: 503 during a drain (with an INFO line) and
while starting; with ``SGLANG_DIAG_BYPASS_HEALTH_GENERATE`` both paths are 200 at once; with
``SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION=false`` a plain ``/health`` is 200;
otherwise it submits a one-token generation (rid ``HEALTH_CHECK_<uuid>``) and checks once a
second, after a first ``await asyncio.sleep(1)``, whether any output came back from the scheduler
since it began: the first check that sees one answers 200 (and sets the server Up); after
``SGLANG_HEALTH_CHECK_TIMEOUT`` seconds (default 20) it logs ``Health check failed...``, sets the
server UnHealthy and answers 503. A healthy answer therefore takes at least one second.

These are wall seconds, not scaled by ``--sim-speed``: they are what a client's timeout meets,
and a faster simulated health would hide exactly what a real server does to a 0.8 s probe.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
import uuid
import warnings
from collections.abc import Mapping
from dataclasses import dataclass

from tui.sim import logfmt
from tui.sim.requests import HEALTH_CHECK_RID_PREFIX
from tui.sim.state import ServerStatus, SimState

CHECK_INTERVAL_S = 1.0
"""The handler's ``await asyncio.sleep(1)`` between checks (wall seconds)."""


@dataclass(frozen=True, slots=True)
class HealthEnv:
    """The environment the handler reads, as SGLang parses it."""

    timeout_s: int = 20
    """``SGLANG_HEALTH_CHECK_TIMEOUT`` (``int(os.getenv(...))``)."""
    generation: bool = True
    """``SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION`` (an EnvBool, default true)."""
    bypass: bool = False
    """``SGLANG_DIAG_BYPASS_HEALTH_GENERATE`` (an EnvBool, default false): 200 without a
    generation, for a driver that balances a DP batch before health traffic."""


_TRUE = ("true", "1", "yes", "y")
_FALSE = ("false", "0", "no", "n")


def read_health_env(env: dict[str, str] | None = None) -> HealthEnv:
    """Read ``SGLANG_HEALTH_CHECK_TIMEOUT``, ``SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION`` and
    ``SGLANG_DIAG_BYPASS_HEALTH_GENERATE``.

    Args:
        env: the environment (default ``os.environ``).

    Returns:
        The values.

    Raises:
        ValueError: ``SGLANG_HEALTH_CHECK_TIMEOUT`` is no whole number: one line naming it
            (SGLang dies with a traceback: it is ``int(os.getenv(...))`` at import). A boolean
            that is none warns and keeps its default, as SGLang's ``EnvBool`` does.
    """
    source = os.environ if env is None else env
    raw = source.get("SGLANG_HEALTH_CHECK_TIMEOUT", "20")
    try:
        timeout = int(raw)
    except ValueError:
        raise ValueError(
            f"SGLANG_HEALTH_CHECK_TIMEOUT={raw!r}: must be a whole number of seconds (>= 0)"
        ) from None
    if timeout < 0:
        raise ValueError(f"SGLANG_HEALTH_CHECK_TIMEOUT={raw!r}: must be >= 0")
    generation = _env_bool(source, "SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION", True)
    bypass = _env_bool(source, "SGLANG_DIAG_BYPASS_HEALTH_GENERATE", False)
    return HealthEnv(timeout, generation, bypass)


def _env_bool(source: Mapping[str, str], name: str, default: bool) -> bool:
    """SGLang's ``EnvBool``: true/1/yes/y or false/0/no/n, any case; another value warns, as
    ``EnvField.get`` does, and the default holds (the server starts)."""
    if name not in source:
        return default
    flag = source[name].lower()
    if flag not in _TRUE + _FALSE:
        warnings.warn(
            f'Invalid value for {name}: "{flag}" is not a valid boolean value, '
            f'using default "{default}"',
            stacklevel=2,
        )
        return default
    return flag in _TRUE


async def health_generate(state: SimState, path: str, env: HealthEnv) -> int:
    """Answer one ``/health`` or ``/health_generate`` request.

    Args:
        state: the server.
        path: which of the two paths was asked (only ``/health`` may skip the generation).
        env: the environment the handler reads.

    Returns:
        The HTTP status (200 or 503).
    """
    if state.gracefully_exit:
        state.emit("Health check request received during shutdown. Returning 503.")
        return 503
    if state.server_status is ServerStatus.STARTING:
        return 503
    if env.bypass:
        return 200
    if not env.generation and path == "/health":
        return 200
    rid = f"{HEALTH_CHECK_RID_PREFIX}_{uuid.uuid4().hex}"
    state.rid_to_state[rid] = time.time()
    req = state.scheduler.submit(rid, 1, 1, False, log_metrics=False)
    tic = time.time()
    try:
        while time.time() < tic + env.timeout_s:
            await asyncio.sleep(CHECK_INTERVAL_S)
            if state.last_receive_tstamp > tic:
                state.server_status = ServerStatus.UP
                return 200
        state.emit(
            logfmt.health_failed_line(env.timeout_s, tic, state.last_receive_tstamp), info=False
        )
        state.server_status = ServerStatus.UNHEALTHY
        return 503
    finally:
        state.rid_to_state.pop(rid, None)
        with contextlib.suppress(Exception):
            state.scheduler.abort(req)

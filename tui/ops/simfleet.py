"""A fleet of simulated SGLang servers for the demo and the tests (``gpufleet sim-fleet``).

It is started and stopped through the operations core (``gpufleet sim-fleet``,
``tui.ops.cli.sim_fleet``) like a real fleet: the same profile format, process groups, fleet
state and GPU-release wait, with the simulated driver's records as the GPU source. The default
fleet is ``profiles/sim-baseline.toml`` (7 GPUs, ports 30000-30006, simulated B200s), or a
built-in equivalent when that file is not found.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import httpx

from tui.control.identity import IdentityMismatch, verify
from tui.profiles import Problem, Profile, ProfileError, load_named, profile_from_dict
from tui.state.fleet_state import ProcessRecord

DEFAULT_PROFILE = "sim-baseline"
"""Profile ``gpufleet sim-fleet`` starts when none is named."""

BUILTIN: dict[str, object] = {
    "name": "sim-default",
    "note": "Built-in simulated 7x B200 fleet (used when profiles/sim-baseline.toml is missing).",
    "engine": {"kind": "sim", "sim_gpu": "b200", "sim_model": "qwen3.6-27b", "sim_speed": 20.0},
    "fleet": {
        "gpus": list(range(7)),
        "base_port": 30000,
        "host": "127.0.0.1",
        "log_dir": "{state}/sim-fleet/logs",
    },
    "server": {
        "model_path": "Qwen/Qwen3.6-27B-FP8",
        "mamba_full_memory_ratio": 0.4,
        "mamba_radix_cache_strategy": "extra_buffer",
        "speculative_algorithm": "EAGLE",
        "speculative_num_steps": 3,
        "speculative_eagle_topk": 1,
        "speculative_num_draft_tokens": 4,
        "extra_flags": {"enable_metrics": True},
    },
}
"""The default fleet, in profile form, for when no profile file can be found."""


def sim_profile(name: str | None = None) -> Profile:
    """The simulated fleet's profile: ``name`` (a name or file), else the default.

    Raises:
        ProfileError: not found, invalid, or not a ``sim`` engine profile.
    """
    if name is None:
        try:
            return load_named(DEFAULT_PROFILE)
        except ProfileError:
            return profile_from_dict(BUILTIN, "sim-default")
    profile = load_named(name)
    if profile.engine.kind != "sim":
        raise ProfileError(
            [Problem("engine.kind", profile.engine.kind, "sim-fleet starts only 'sim' profiles")],
            name,
        )
    return profile


def probe_host(host: str) -> str:
    """Address to probe a server bound to ``host`` at (a wildcard bind answers on loopback)."""
    return "127.0.0.1" if host in ("0.0.0.0", "::", "") else host


def health(record: ProcessRecord, timeout: float = 1.0) -> int | None:
    """HTTP status of ``GET /ready`` on the recorded server, None when it does not answer.

    ``/ready``, not ``/health``: SGLang 0.5.23's ``/health`` runs a generation and answers after
    a second at the earliest; ``/ready`` says the same (warmup done, not draining) at once.
    """
    url = f"http://{probe_host(record.host)}:{record.port}/ready"
    try:
        return httpx.get(url, timeout=timeout).status_code
    except httpx.HTTPError:
        return None


@dataclass(frozen=True, slots=True)
class Readiness:
    """Whether one server became ready in time."""

    gpu: int
    """GPU index."""
    ready: bool
    """``/ready`` answered 200 before the deadline."""
    message: str
    """Time to ready, or why not."""


def _wait_one(record: ProcessRecord, deadline: float, started: float) -> Readiness:
    pause = threading.Event()
    while time.monotonic() < deadline:
        if health(record, max(0.1, min(1.0, deadline - time.monotonic()))) == 200:
            return Readiness(record.gpu, True, f"ready in {time.monotonic() - started:.1f}s")
        try:
            if not verify(record).alive:
                return Readiness(record.gpu, False, f"exited before ready; see {record.log_path}")
        except IdentityMismatch as exc:
            return Readiness(record.gpu, False, str(exc))
        pause.wait(0.1)
    return Readiness(record.gpu, False, "not ready before the deadline")


def wait_ready(records: Sequence[ProcessRecord], timeout: float) -> list[Readiness]:
    """Poll every server's ``/ready`` (in parallel) until 200, its exit, or ``timeout``.

    Returns:
        One readiness per record, in order.
    """
    if not records:
        return []
    started = time.monotonic()
    deadline = started + timeout
    with ThreadPoolExecutor(max_workers=len(records)) as pool:
        return list(pool.map(lambda r: _wait_one(r, deadline, started), records))

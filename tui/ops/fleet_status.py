"""The fleet and its job as one document: what ``gpufleet status`` prints (JSON or text).

Built from one monitor snapshot (``tui.fleet.monitor``) and the pipeline's status document
(``tui.pipeline.status``); docs/status.md documents it. The exit code says
whether every server is ready (0), some are not (1: a server the fleet state does not record on
its GPU's port, ``unknown``, counts as not ready), or nothing of the fleet answers or runs (2).
"""

from __future__ import annotations

import textwrap
from typing import Any

from tui.fleet.snapshot import FleetSnapshot, GpuPanel, ServerState
from tui.ops.observed import (
    fleet_observed,
    gpu_observed,
    job_energy_document,
    job_energy_lines,
    observed_lines,
)
from tui.pipeline.energy import JobEnergy, Price
from tui.pipeline.status import PipelineStatus

SCHEMA = 2
"""Version of the document. 2: ``requested`` and ``profile_differs`` give each value as the
profile types it (``80``, ``0.88``, ``true``), no longer as a string (``"80"``)."""

EXIT_READY = 0
"""Every server of the fleet is ready."""
EXIT_NOT_READY = 1
"""Some server is not ready (starting, failed, stuck, stopped, crashed, ...)."""
EXIT_UNREACHABLE = 2
"""No fleet is known, or no server of it runs or answers."""
EXIT_BAD_INPUT = 3
"""Bad command-line input or a damaged state file: nothing was read."""

RUNNING_STATES = frozenset(
    {
        ServerState.STARTING,
        ServerState.READY,
        ServerState.STALE,
        ServerState.STUCK,
        ServerState.STOPPING,
        ServerState.UNKNOWN,
    }
)
"""States in which a server's process runs or its port answers."""


def _round(value: float | None, digits: int = 1) -> float | None:
    return None if value is None else round(value, digits)


def gpu_document(panel: GpuPanel, now: float) -> dict[str, Any]:
    """One GPU's part of the document.

    Args:
        panel: The GPU and its server, from the snapshot.
        now: time.time() of the document (ages are counted to it).

    Returns:
        A JSON-ready dict (docs/status.md lists each field).
    """
    server, gpu = panel.server, panel.gpu
    doc: dict[str, Any] = {
        "gpu": panel.gpu_index,
        "device": panel.gpu_index if panel.device is None else panel.device,
        "state": server.state.value if server else "absent",
        "port": server.port if server else None,
        "pid": server.pid if server else None,
        "phase": server.phase if server else "",
        "memory_used_bytes": gpu.memory_used if gpu else None,
        "memory_total_bytes": gpu.memory_total if gpu else None,
        "utilization": gpu.utilization_gpu if gpu else None,
    }
    doc.update(gpu_observed(panel))  # pools, spec, latency, energy (tui.ops.observed)
    if server is None:
        return doc
    if server.state is ServerState.UNKNOWN:
        # What serves the port is not the fleet's recorded server: name it, count it not ready.
        doc["unknown"] = {"pid": server.pid, "cmdline": list(server.cmdline)}
    running = server.profile
    doc.update(
        profile=running.name if running else None,
        profile_differs={k: running.value(k) for k, _ in running.differs} if running else {},
        requested=dict(running.values) if running else {},
        effective={
            "max_running_requests": server.max_running_effective,
            "server_arg_max_running_requests": server.max_running_requested,
            "capped": server.capped,
            "kv_tokens": server.kv_tokens,
            "mamba_slots": server.mamba_slots,
        },
        running=server.running,
        queued=server.queued,
        kv_usage=server.token_usage,
        mamba_usage=server.mamba_usage,
        gen_tokens_per_s=_round(server.gen_throughput),
        accept_len=server.accept_len,
        ages_s={
            "load": _round(server.load_age_s),
            "gen_tokens_per_s": _round(server.throughput_age_s),
            "ready_for": _round(now - server.ready_at) if server.ready_at else None,
        },
        error=server.last_error if server.error_fatal else None,
        stuck_for_s=_round(server.stuck_for_s),
        exit_status=server.exit_status,
    )
    return doc


def job_document(
    job: PipelineStatus | None,
    now: float,
    energy: JobEnergy | None = None,
    price: Price | None = None,
) -> dict[str, Any] | None:
    """The job's part: the pipeline's status document with its age and its energy ledger (with
    its cost at ``price``); None when there is none."""
    if job is None:
        return None
    return {
        "state": job.state,
        "pid": job.pid,
        "done": job.done,
        "total": job.total,
        "failed": job.failed,
        "in_flight": job.in_flight,
        "requests_per_s_1m": job.rate_1m.requests_per_s,
        "output_tokens_per_s_1m": job.rate_1m.output_tokens_per_s,
        "eta_s": job.eta_s,
        "no_server_since": job.no_server_since,
        "message": job.message,
        "age_s": _round(max(now - job.updated_at, 0.0)),
        "energy": job_energy_document(energy, price, job.eta_s),
    }


def exit_code(snapshot: FleetSnapshot) -> int:
    """0 when every server is ready, 2 when none runs or answers (or none is known), else 1."""
    states = [p.server.state for p in snapshot.panels if p.server is not None]
    if not states or not any(s in RUNNING_STATES for s in states):
        return EXIT_UNREACHABLE
    return EXIT_READY if all(s is ServerState.READY for s in states) else EXIT_NOT_READY


def status_document(
    snapshot: FleetSnapshot,
    job: PipelineStatus | None,
    now: float,
    energy: JobEnergy | None = None,
    price: Price | None = None,
) -> dict[str, Any]:
    """The whole document: the fleet's GPUs, the job, and the exit code it implies.

    Args:
        snapshot: One monitor poll.
        job: The pipeline's status document (None when there is none).
        now: time.time() of the document.
        energy: The job's energy ledger (``tui.pipeline.energy``), when there is one.
        price: The operator's price per kWh (the job's cost), when set.

    Returns:
        ``{"schema", "taken_at", "exit_code", "ready", "gpus": [...], "fleet": {...},
        "job": {...}|null}``.
    """
    code = exit_code(snapshot)
    ready = sum(
        1 for p in snapshot.panels if p.server is not None and p.server.state is ServerState.READY
    )
    return {
        "schema": SCHEMA,
        "taken_at": round(snapshot.taken_at, 3),
        "exit_code": code,
        "ready": ready,
        "servers": sum(1 for p in snapshot.panels if p.server is not None),
        "gpus": [gpu_document(p, now) for p in snapshot.panels],
        "fleet": fleet_observed(snapshot),
        "job": job_document(job, now, energy, price),
    }


def _num(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.0f}" if value >= 100 else f"{value:.2g}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def _pct(value: object) -> str:
    return f"{value * 100:.0f}%" if isinstance(value, int | float) else "-"


DEFAULT_WIDTH = 100
"""Columns the table is laid out for when the terminal's width is not known."""


def _profile_words(gpu: dict[str, Any]) -> tuple[str, str]:
    """The GPU's profile name and, apart, the knobs it asks differently from the fleet's."""
    differs = ", ".join(f"{k} {_value(v)}" for k, v in gpu["profile_differs"].items())
    return gpu["profile"] or "-", f"({differs})" if differs else ""


def _value(value: object) -> str:
    return "auto" if value is None else str(value)


def format_text(doc: dict[str, Any], width: int = DEFAULT_WIDTH) -> list[str]:
    """The document as lines for a terminal: a header, one line per GPU, the job.

    The profile column is as wide as its longest entry when the terminal has the room (it was
    cut at 22 characters: ``ux-m120-all (max_runni``); else it holds the names, and the knobs a
    GPU asks differently follow on a line of their own, wrapped to ``width``. Nothing is cut. A
    ``dev`` column (the card each slot runs on) follows ``GPU`` when some slot's card is not its
    own number (servers sharing a card, ``[gpu.N] device``): two rows of one card otherwise read
    as two cards.

    Args:
        doc: ``status_document``'s result.
        width: The terminal's columns.

    Returns:
        The lines.
    """
    servers = [g for g in doc["gpus"] if g.get("profile_differs") is not None]
    words = {g["gpu"]: _profile_words(g) for g in servers}
    whole = {gpu: f"{name} {knobs}".rstrip() for gpu, (name, knobs) in words.items()}
    shared = any(g.get("device", g["gpu"]) != g["gpu"] for g in doc["gpus"])
    dev_width = 4 if shared else 0  # 'dev' and its space
    fixed = 20 + 47 + dev_width  # the columns around the profile's, with their spaces
    widest = max((len(text) for text in whole.values()), default=7)
    apart = fixed + widest > width  # the knobs go on a line of their own
    column = max([7, *(len(name) for name, _ in words.values())] if apart else [7, widest])
    lines = [f"fleet: {doc['ready']}/{doc['servers']} ready (exit {doc['exit_code']})"]

    def slot(gpu: dict[str, Any]) -> str:
        """``  0`` (and its card, ``  1   0``, when the dev column is shown)."""
        return f"{gpu['gpu']:>3}" + (f" {gpu.get('device', gpu['gpu']):>3}" if shared else "")

    head = f"{'GPU':>3}" + (f" {'dev':>3}" if shared else "")
    head += f" {'state':<9} {'port':>5} {'profile':<{column}} {'eff/asked':>10} "
    head += f"{'run':>4} {'queue':>5} {'KV':>4} {'mamba':>5} {'tok/s':>7} {'age':>5}"
    lines.append(head)
    for gpu in doc["gpus"]:
        if gpu.get("profile_differs") is None:  # no server on this GPU
            lines.append(f"{slot(gpu)} {'absent':<9}")
            continue
        effective = gpu["effective"]
        asked = gpu["requested"].get("max_running_requests")
        asked_text = (asked or "auto") if gpu["profile"] else "-"
        limit = f"{_num(effective['max_running_requests'])}/{asked_text}"
        name, knobs = words[gpu["gpu"]]
        profile = name if apart else whole[gpu["gpu"]]
        age = gpu["ages_s"]["gen_tokens_per_s"]
        lines.append(
            f"{slot(gpu)} {gpu['state']:<9} {gpu['port'] or '-':>5} {profile:<{column}} "
            f"{limit:>10} {_num(gpu['running']):>4} {_num(gpu['queued']):>5} "
            f"{_pct(gpu['kv_usage']):>4} {_pct(gpu['mamba_usage']):>5} "
            f"{_num(gpu['gen_tokens_per_s']):>7} {'-' if age is None else f'{age:.0f}s':>5}"
        )
        if apart and knobs:
            lines += textwrap.wrap(
                knobs,
                width,
                initial_indent=" " * (20 + dev_width),
                subsequent_indent=" " * (21 + dev_width),
            )
        if gpu.get("exit_status"):
            lines.append(f"    crashed: {gpu['exit_status']}")
        if gpu.get("error"):
            lines += textwrap.wrap(
                f"error: {gpu['error']}", width, initial_indent="    ", subsequent_indent="      "
            )
        if gpu.get("unknown"):
            who = gpu["unknown"]
            what = " ".join(who["cmdline"]) or "command line unknown"
            pid = "pid unknown" if who["pid"] is None else f"pid {who['pid']}"
            lines += textwrap.wrap(
                f"unknown: {pid} ({what}) serves the port; not the fleet's record",
                width,
                initial_indent="    ",
                subsequent_indent="      ",
            )
    lines += observed_lines(doc.get("fleet") or {})
    job = doc["job"]
    if job is None:
        lines.append("job: none (no pipeline status document)")
    else:
        eta = "-" if job["eta_s"] is None else f"{job['eta_s']:.0f}s"
        lines.append(
            f"job: {job['state']} {job['done']:,}/{job['total']:,} done, {job['failed']} failed, "
            f"{job['requests_per_s_1m']:.2f} req/s, ETA {eta}, updated {job['age_s']:.0f}s ago"
        )
        lines += job_energy_lines(job.get("energy"))
    return lines

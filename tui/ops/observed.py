"""What the peers show, as ``gpufleet status`` documents it: per GPU each pool, the draft, the
latency percentiles and the energy; for the fleet its latency, energy, the GPUs that stand out
and the alerts firing; for the job its energy and cost (``docs/status.md`` lists each field).

Built from one monitor snapshot (``tui.fleet``), the alerts' journal (the alerts that fired and
have not resolved, as the process that publishes them journalled them: ``tui.ops.alerts``) and
the job's energy ledger (``tui.pipeline.energy``). A one-shot ``status`` reads one scrape: its
latency is every observation since each server started (``window_s`` null), never passed off as
a window.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tui import paths
from tui.fleet.energy import FleetEnergy, GpuEnergy
from tui.fleet.latency import LatencySummary, Percentiles
from tui.fleet.snapshot import FleetSnapshot, GpuPanel
from tui.ops.journal import JournalEntry, read_journal
from tui.pipeline.energy import JobEnergy, Price, job_cost
from tui.words import counted


def _round(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


def _percentiles(found: Percentiles | None) -> dict[str, Any] | None:
    if found is None:
        return None
    return {
        "p50": _round(found.p50),
        "p90": _round(found.p90),
        "p99": _round(found.p99),
        "count": found.count,
    }


def latency_document(latency: LatencySummary | None) -> dict[str, Any] | None:
    """The four latencies' percentiles in seconds with their counts (None: no reading)."""
    if latency is None:
        return None
    return {
        "window_s": _round(latency.window_s, 1),
        **{part: _percentiles(getattr(latency, part)) for part in ("ttft", "itl", "e2e", "queue")},
    }


def energy_document(energy: GpuEnergy | FleetEnergy | None) -> dict[str, Any] | None:
    """Joules since the reader began metering, mean watts and tokens per joule over the window."""
    if energy is None:
        return None
    doc: dict[str, Any] = {
        "joules": _round(energy.joules, 1),
        "window_s": _round(energy.window_s, 1),
        "watts": _round(energy.watts, 1),
        "tokens_per_joule": _round(energy.tokens_per_joule),
    }
    if isinstance(energy, GpuEnergy):
        doc["counter"] = energy.counter
        if energy.shared_with:  # its card's joules, counted once in the fleet's
            doc["shared_with"] = list(energy.shared_with)
    return doc


def gpu_observed(panel: GpuPanel) -> dict[str, Any]:
    """One GPU's part: ``pools``, ``spec``, ``latency``, ``energy``."""
    server = panel.server
    spec = server.spec if server is not None else None
    return {
        "pools": None
        if server is None
        else {
            "kv": server.token_usage,
            "swa": server.swa_usage,
            "mamba": server.mamba_usage,
            "cache_hit_rate": server.cache_hit_rate,
        },
        "spec": None
        if spec is None
        else {
            "algorithm": spec.algorithm,
            "accept_length": _round(spec.accept_length),
            "accept_rate": _round(spec.accept_rate),
            "steps": spec.steps,
            "draft_tokens": spec.draft_tokens,
        },
        "latency": latency_document(server.latency if server is not None else None),
        "energy": energy_document(panel.energy),
    }


def firing_alerts(entries: Iterable[JournalEntry]) -> list[JournalEntry]:
    """The alerts whose last entry says firing (rule and subject), oldest first."""
    last: dict[tuple[object, object], JournalEntry] = {}
    for entry in entries:
        if entry.type == "alert":
            last[(entry.detail.get("rule"), entry.detail.get("subject"))] = entry
    return sorted((e for e in last.values() if e.verdict == "firing"), key=lambda e: e.finished_at)


def fleet_observed(snapshot: FleetSnapshot) -> dict[str, Any]:
    """The fleet's part: ``latency``, ``energy``, ``imbalance``, ``alerts``."""
    alerts = firing_alerts(read_journal(paths.alerts_journal_file()).entries)
    return {
        "latency": latency_document(snapshot.latency),
        "energy": energy_document(snapshot.energy),
        "imbalance": [
            {
                "gpu": o.gpu,
                "reading": o.reading,
                "value": _round(o.value),
                "median": _round(o.median),
                "score": _round(o.score, 2),
                "words": o.words,
            }
            for o in snapshot.imbalance
        ],
        "alerts": [
            {
                "rule": e.detail.get("rule"),
                "subject": e.detail.get("subject"),
                "gpu": e.gpus[0] if e.gpus else None,
                "message": e.detail.get("message", e.summary),
                "since": e.started_at,
                "fired_at": e.finished_at,
            }
            for e in alerts
        ],
    }


def job_energy_document(
    ledger: JobEnergy | None, price: Price | None, eta_s: float | None
) -> dict[str, Any] | None:
    """The job's energy over every run (None: no ledger), with its cost when a price is set."""
    if ledger is None:
        return None
    cost = job_cost(ledger, price, eta_s) if price is not None else None
    return {
        "joules": round(ledger.joules, 1),
        "output_tokens": ledger.output_tokens,
        "tokens_per_joule": _round(ledger.tokens_per_joule),
        "watts": _round(ledger.watts, 1),
        "runs": ledger.runs,
        "gpus": ledger.gpus,
        "counter": ledger.counter,
        "cost": None
        if cost is None
        else {
            "so_far": round(cost.so_far, 4),
            "to_eta": _round(cost.to_eta),
            "currency": cost.currency,
        },
    }


def job_energy_lines(energy: dict[str, Any] | None) -> list[str]:
    """The job's energy (and cost) as a line under its own (none without a ledger)."""
    if energy is None:
        return []
    per_joule = energy["tokens_per_joule"]
    line = (
        f"job energy: {energy['joules'] / 3.6e6:,.2f} kWh for {energy['output_tokens']:,} "
        f"tokens" + (f", {per_joule:.3g} tok/J" if per_joule is not None else "")
    )
    cost = energy.get("cost")
    if cost is not None:
        money = f"{cost['so_far']:,.2f} {cost['currency']}".rstrip()
        line += f", {money} so far"
        if cost["to_eta"] is not None:
            line += f", {cost['to_eta']:,.2f} {cost['currency']}".rstrip() + " to the ETA"
    return [line + f" ({counted(energy['runs'], 'run')})"]


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


def observed_lines(doc: dict[str, Any]) -> list[str]:
    """The fleet's latency, energy, imbalance and alerts as lines under the table."""
    lines = []
    latency = doc.get("latency")
    if latency is not None:
        span = "since start" if latency["window_s"] is None else f"{latency['window_s']:.0f} s"
        parts = []
        for part, name in (("ttft", "TTFT"), ("itl", "ITL"), ("e2e", "E2E"), ("queue", "queue")):
            found = latency.get(part)
            if found is not None and found["count"]:
                parts.append(
                    f"{name} p50 {_seconds(found['p50'])} p90 {_seconds(found['p90'])} "
                    f"p99 {_seconds(found['p99'])} (n={found['count']:,})"
                )
        if parts:
            lines.append(f"latency ({span}): " + "; ".join(parts))
    energy = doc.get("energy")
    if energy is not None and energy["watts"] is not None:
        per_joule = energy["tokens_per_joule"]
        lines.append(
            f"energy: {energy['watts']:,.0f} W"
            + (f", {per_joule:.3g} tok/J" if per_joule is not None else "")
            + f" over {energy['window_s']:.0f} s"
        )
    lines += [f"imbalance: {o['words']}" for o in doc.get("imbalance", ())]
    lines += [f"alert: {a['rule']}: {a['message']}" for a in doc.get("alerts", ())]
    return lines

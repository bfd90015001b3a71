"""The verdict harness's grid (``bench/real_sglang/verdicts_real.py``): its settings, each one
measured directly on a server loaded alone, and what the canary and the autotune are held to.

A setting is the autotune's start with some knobs set (``knobs``; a knob on None keeps
SGLang's automatic value). Measured alone (``measure_alone``): a warm-up, then windows one
after the other, each one rate from the server's own token counter, and the load it held at
each window's end (running + queued: a setting that runs fewer than the client offers queues
the rest). The comparison (``compare``): does the canary's interval cover the grid's difference
of the same two settings; does the autotune's pick reach 0.97 of the grid's best.
"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx

START = {"mem_fraction_static": 0.45, "max_mamba_cache_size": 80, "mamba_full_memory_ratio": 0.4}
"""The autotune's starting point (max running on SGLang's automatic value)."""
GRID = (
    {"max_running_requests": 64, "max_mamba_cache_size": 200},
    {"max_running_requests": 16, "max_mamba_cache_size": 200},
)
"""The grid's points besides the start (measured last): the most telling first."""
FULL_GRID_EXTRA = ({"max_running_requests": 16, "max_mamba_cache_size": 80},)
"""Measured with ``--full-grid`` only: the same batch as (16, 200)."""
CANARY_PAIR = (GRID[0], GRID[1])
"""The canary: max running 64 (candidate) against 16 (control), both Mamba 200."""


def key(setting: dict[str, Any]) -> str:
    """A setting's identity (its knobs on the start's), for matching grid points."""
    return json.dumps(knobs(setting), sort_keys=True)


def knobs(setting: dict[str, Any]) -> dict[str, Any]:
    """A setting on the start's fraction and ratio (a knob on None: SGLang's automatic)."""
    return {k: v for k, v in {**START, **setting}.items() if v is not None}


def label(setting: dict[str, Any]) -> str:
    """``running 64, Mamba 200`` (``running auto`` when SGLang chooses), on the start's."""
    full = knobs(setting)
    running = full.get("max_running_requests", "auto")
    return f"running {running}, Mamba {full.get('max_mamba_cache_size', 'auto')}"


def t95(n: int) -> float:
    """Student's t for a two-sided 95% interval on n - 1 degrees of freedom."""
    from tui.retune.verdict import t_quantile

    return t_quantile(0.95, max(1, n - 1))


def scrape(port: int) -> tuple[float, float, float]:
    """(output tokens so far, running, queued) of one server."""
    from tui.retune.counters import output_tokens, parse_counter
    from tui.rollout.sampling import QUEUED_GAUGE, RUNNING_GAUGE

    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    tokens = output_tokens(text)
    if tokens is None:
        raise RuntimeError(f"port {port}: /metrics has no token counter")
    running = parse_counter(text, RUNNING_GAUGE) or 0.0
    return tokens, running, parse_counter(text, QUEUED_GAUGE) or 0.0


def measure_alone(
    port: int, warmup_s: float, windows: int, window_s: float
) -> tuple[list[float], list[dict[str, float]]]:
    """A warm-up, then ``windows`` back-to-back windows: each one's output tokens/s and the
    load (running, queued) at its end. Blocking (a thread)."""
    deadline = time.monotonic() + warmup_s
    while time.monotonic() < deadline:
        time.sleep(min(0.5, max(0.0, deadline - time.monotonic())))  # the warm-up is a period
    rates: list[float] = []
    loads: list[dict[str, float]] = []
    last, t_last = scrape(port)[0], time.monotonic()
    for _ in range(windows):
        end = t_last + window_s
        while time.monotonic() < end:
            time.sleep(min(0.5, max(0.0, end - time.monotonic())))  # a window is a period
        tokens, running, queued = scrape(port)
        now = time.monotonic()
        rates.append((tokens - last) / (now - t_last))
        loads.append({"running": running, "queued": queued})
        last, t_last = tokens, now
    return rates, loads


def compare(record: dict[str, Any]) -> dict[str, Any]:
    """The canary's interval against the grid's difference; the autotune's pick against the
    grid's best."""
    grid = {key(p["setting"]): p for p in record.get("grid", []) if "mean" in p}
    out: dict[str, Any] = {}
    canary = record.get("canary")
    cand, ctrl = (grid.get(key(s)) for s in CANARY_PAIR)
    if canary and cand and ctrl and canary.get("rel_low") is not None:
        diff = cand["mean"] / ctrl["mean"] - 1.0
        out["grid_difference"] = round(diff, 4)
        out["canary_covers_grid"] = canary["rel_low"] <= diff <= canary["rel_high"]
        out["canary_better"] = canary["verdict"] == "better"
    tune = record.get("autotune")
    if tune and grid:
        best = max(grid.values(), key=lambda p: p["mean"])
        pick = grid.get(key(tune["pick"]))
        if pick is not None:
            out["autotune_pick"] = pick["label"]
            out["grid_best"] = best["label"]
            out["pick_over_best"] = round(pick["mean"] / best["mean"], 4)
            out["pick_reaches_97"] = pick["mean"] >= 0.97 * best["mean"]
    return out


def markdown(record: dict[str, Any]) -> str:
    """The results as the table ``bench/results-real-sglang.md`` takes."""
    from tui.autotune.record import candidate_line

    lines = [
        f"Verdicts on {'simulated 0.5.17 servers' if record['sim'] else 'real SGLang 0.5.17'}, "
        f"{record['date']}, card: {record['card']}",
        "",
        "| grid setting (alone) | tok/s per window | mean (95% CI half) | running+queued at ends |",
        "|---|---|---|---|",
    ]
    for p in record.get("grid", []):
        if p.get("skipped"):
            lines.append(f"| {p['label']} | skipped (deadline) | | |")
            continue
        loads = ", ".join(f"{x['running']:.0f}+{x['queued']:.0f}" for x in p["load"])
        half = "" if p["ci95_half"] is None else f" (±{p['ci95_half']:,.0f})"
        rates = ", ".join(f"{r:,.0f}" for r in p["rates"])
        lines.append(f"| {p['label']} | {rates} | {p['mean']:,.0f}{half} | {loads} |")
    canary = record.get("canary")
    if canary:
        lines += ["", f"Canary ({canary['candidate']} against {canary['control']}):", "", "```"]
        lines += [canary["describe"], "```"]
    tune = record.get("autotune")
    if tune:
        lines += ["", f"Autotune: {tune['reason']}; pick {label(tune['pick'])}", ""]
        lines += [f"- {candidate_line(r)}" for r in tune["records"]]
    lines += ["", "Comparison: " + json.dumps(record.get("comparison", {}))]
    lines += ["", f"Phases (s): {json.dumps(record['phases'])}"]
    return "\n".join(lines) + "\n"

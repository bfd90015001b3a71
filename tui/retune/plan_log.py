"""A real server's allocation lines, and how far a plan may differ from them by print rounding.

``gpufleet plan --log`` compares its prediction with the newest launch in an SGLang log: the memory
the server measured (``Load weight begin. avail mem``: the free memory the plan starts from;
``Load weight end. ... avail mem``: what the weights left) and what it then allocated (the Mamba
and KV lines, the summary's max_running_requests). SGLang prints GB with two decimals, so the two
inputs are each known to +-0.005 GiB; ``tolerance`` turns that into the largest honest difference
in KV tokens and Mamba slots.
"""

from __future__ import annotations

import io
import math
import re
from dataclasses import dataclass
from pathlib import Path

from tui.inputs import open_stream
from tui.logs import events as ev
from tui.logs.parser import parse_line
from tui.sglang.models import GIB
from tui.sglang.plan_types import MemoryPlan

_EXCEPTION = re.compile(r"^(?:torch\.)?[A-Za-z_.]*(?:Error|Exception): ")
"""A traceback's last line: what the server died of (SGLang's own text follows the colon)."""

HALF_CENTI_GIB = 0.005 * GIB
"""The rounding of one printed GB value."""


@dataclass(frozen=True, slots=True)
class LoggedLaunch:
    """The allocation numbers of the newest launch in a log (None: the line was not there)."""

    pre_bytes: int | None
    """``Load weight begin. avail mem`` (the target's)."""
    avail_after_weights_bytes: int | None
    """``Load weight end. ... avail mem`` (the target's)."""
    mamba_slots: int | None
    """``max_mamba_cache_size``."""
    conv_gb: float | None
    """``conv_state size``."""
    ssm_gb: float | None
    """``ssm_state size``."""
    kv_tokens: int | None
    """The target KV line's ``#tokens``."""
    k_gb: float | None
    """Its ``K size`` (or half its ``KV size`` for MLA)."""
    v_gb: float | None
    """Its ``V size``."""
    max_running_requests: int | None
    """The summary line's (effective) max_running_requests."""
    failure: str | None
    """The exception line a launch that never printed its summary line died with
    (``ValueError: Loaded weights leave no GPU memory ...``), else None."""


def read_launch(path: Path) -> LoggedLaunch:
    """Parse the newest launch of one SGLang log (lines after its last ``server_args``).

    Args:
        path: the log file.

    Returns:
        What it printed.

    Raises:
        OSError: the file cannot be read.
        InputError: it is a FIFO, a device or a directory (naming it).
    """
    events: list[ev.LogEvent] = []
    failure: str | None = None
    # The one door: a FIFO or device given as the log is refused (an InputError, a ValueError)
    # instead of waited on or read for ever.
    stream = open_stream(path, "a server log")
    with io.TextIOWrapper(stream, encoding="utf-8", errors="replace") as handle:
        for number, text in enumerate(handle, 1):
            line = text.rstrip("\n")
            if _EXCEPTION.match(line):
                failure = line
            event = parse_line(line, number)
            if event is None:
                continue
            if event.kind == ev.SERVER_ARGS:
                events, failure = [], None
            events.append(event)

    def first(kind: str) -> ev.LogEvent | None:
        return next((e for e in events if e.kind == kind), None)

    def gib(event: ev.LogEvent | None, name: str) -> int | None:
        value = event.get(name) if event is not None else None
        return round(float(value) * GIB) if value is not None else None

    mamba, kv, pool = first(ev.MAMBA_CACHE), first(ev.KV_CACHE), first(ev.POOL)
    kv_gb = kv.get("kv_gb") if kv is not None else None
    return LoggedLaunch(
        pre_bytes=gib(first(ev.WEIGHTS_BEGIN), "avail_mem_gb"),
        avail_after_weights_bytes=gib(first(ev.WEIGHTS), "avail_mem_gb"),
        mamba_slots=mamba.get("max_mamba_cache_size") if mamba is not None else None,
        conv_gb=mamba.get("conv_gb") if mamba is not None else None,
        ssm_gb=mamba.get("ssm_gb") if mamba is not None else None,
        kv_tokens=kv.get("tokens") if kv is not None else None,
        k_gb=kv.get("k_gb", kv_gb / 2 if kv_gb is not None else None) if kv is not None else None,
        v_gb=kv.get("v_gb", kv_gb / 2 if kv_gb is not None else None) if kv is not None else None,
        max_running_requests=pool.get("max_running_requests") if pool is not None else None,
        failure=failure if pool is None else None,  # after the summary: the shutdown's noise
    )


@dataclass(frozen=True, slots=True)
class Tolerance:
    """How far a prediction may honestly be from the log, given the log's own rounding."""

    kv_tokens: int
    """KV tokens."""
    mamba_slots: int
    """Mamba slots (0 when the slots were given explicitly)."""
    max_running_requests: int
    """The effective max_running_requests, through whichever bound set it."""


def tolerance(
    plan: MemoryPlan, cell_bytes: int, per_slot_bytes: int, ratio: float, *, explicit_slots: bool
) -> Tolerance:
    """The rounding bound of one plan made from a log's two printed inputs.

    ``pre`` and ``avail`` are each +-0.005 GiB, so the KV budget ``avail - pre * (1 - f)`` is off
    by up to ``0.005 * (2 - f)`` GiB; an auto-sized Mamba pool takes ``r / (1 + r)`` of it.

    Args:
        plan: the plan.
        cell_bytes: KV bytes per token as budgeted.
        per_slot_bytes: Mamba bytes per slot (0 for a pure-attention model).
        ratio: ``--mamba-full-memory-ratio``.
        explicit_slots: ``--max-mamba-cache-size`` was given (the slots are exact).

    Returns:
        The bounds, in tokens and slots.
    """
    budget = HALF_CENTI_GIB * (2 - plan.mem_fraction_static)
    tokens = math.ceil(budget / cell_bytes) + plan.page_size if cell_bytes else 0
    slots = 0
    if per_slot_bytes and not explicit_slots:
        slots = math.ceil(budget * ratio / (1 + ratio) / per_slot_bytes) + 1
    running = math.ceil(slots / plan.mamba_slots_per_request) if slots else 0
    if plan.max_running_requests == plan.max_total_num_tokens // 2:  # the KV bound set it
        running = max(running, math.ceil(tokens / 2))
    return Tolerance(kv_tokens=tokens, mamba_slots=slots, max_running_requests=running)

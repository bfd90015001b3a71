"""How SGLang bounds max_running_requests: the mamba radix-cache strategy and its slots per
request (``_mamba_radix_cache_resolution``, ``_calculate_mamba_ratio``), and the cap after sizing
the pools (``resolve_max_num_reqs``).

Read from SGLang 0.5.23's ``srt/mem_cache/kv_cache_configurator.py``: the request estimate from
the token capacity, the KV bound ``tokens // 2``, the Mamba cap ``K // ratio`` (a WARNING), the
"too small to serve any requests" RuntimeError, and the KV-capacity WARNING (in 0.5.23 only when
the Mamba cap did not already apply; 0.5.17's is the same). The ``seed`` build printed the KV
warning first and always.
"""

from __future__ import annotations

from dataclasses import dataclass

from tui.sglang.arch_support import supports_extra_buffer, uses_mamba_radix_cache
from tui.sglang.builds import SEED, SGLANG_0_5_17, SGLANG_0_5_23, Build
from tui.sglang.loglines import CAPPED, REDUCED
from tui.sglang.plan_types import PlanFailure


@dataclass(frozen=True, slots=True)
class RunningCap:
    """The effective max_running_requests and how it was reached."""

    effective: int
    """What the summary line prints."""
    capped_by_mamba: bool
    """The Mamba slots lowered it (SGLang's cap WARNING)."""
    reduced_by_kv: bool
    """The KV capacity lowered a requested value."""
    warnings: tuple[str, ...]
    """The WARNING lines, in emission order."""
    failure: PlanFailure | None = None
    """Set when not one request fits the Mamba pool."""


MAMBA = "mamba"
"""Cause of a cap: the Mamba slots (SGLang's cap WARNING, the plan's ``capped_by_mamba``)."""
KV_CACHE = "kv_cache"
"""Cause of a cap: the KV capacity lowered the asked value (SGLang's reduced WARNING)."""
WARNED = "warned"
"""Cause of a cap: a WARNING line said it, the cause not kept (a verify report's cap line)."""
BELOW_ASKED = "below_asked"
"""Cause of a cap no line names: it runs fewer than asked (``/server_info``, the summary)."""


@dataclass(frozen=True, slots=True)
class Capped:
    """Whether, and why, SGLang runs fewer requests at once than the profile asked."""

    asked: int | None
    """``--max-running-requests`` as asked (None: automatic)."""
    effective: int | None
    """What SGLang runs (None: not known yet)."""
    cause: str | None
    """``MAMBA``, ``KV_CACHE``, the log's own cause (``tui.logs``: ``capacity``), ``WARNED`` or
    ``BELOW_ASKED``; None: not capped."""

    def __bool__(self) -> bool:
        return self.cause is not None


def cap_cause(capped_by_mamba: bool, reduced_by_kv: bool) -> str | None:
    """The cause a plan predicts SGLang will warn of (the Mamba cap wins: 0.5.23 then says
    nothing of the KV)."""
    return MAMBA if capped_by_mamba else KV_CACHE if reduced_by_kv else None


def running_capped(asked: int | None, effective: int | None, cause: str | None = None) -> Capped:
    """The one decision of "capped", for the planner, the verify report and the console.

    Args:
        asked: the requested max running requests (None: automatic).
        effective: the effective one (the summary line, ``/server_info``, the plan).
        cause: what SGLang said (its cap or reduced WARNING), or what the plan predicts it will
            say; None: nothing was said.

    Returns:
        Capped when SGLang said so, or when it runs fewer than asked (an automatic value that
        SGLang lowered is capped only when it says so).
    """
    if cause is None and asked is not None and effective is not None and effective < asked:
        cause = BELOW_ASKED
    return Capped(asked, effective, cause)


def resolve_strategy(
    requested: str,
    disable_radix_cache: bool,
    page_size: int,
    overlap: bool,
    *,
    architecture: str = "",
    build: Build = SGLANG_0_5_23,
) -> str:
    """Resolve ``auto`` as ``_mamba_radix_cache_resolution`` does.

    Args:
        requested: the flag value (auto, no_buffer, extra_buffer, extra_buffer_lazy).
        disable_radix_cache: ``--disable-radix-cache``.
        page_size: resolved page size.
        overlap: whether overlap scheduling is wanted.
        architecture: the model's ``architectures[0]`` (empty: one every build resolves).
        build: the build whose architecture lists apply (``tui.sglang.arch_support``).

    Returns:
        The concrete strategy, or ``auto`` when the build leaves it unresolved for this
        architecture (then no extra buffer: 3 slots per request).
    """
    if requested != "auto":
        return requested
    if disable_radix_cache:
        return "no_buffer"
    if architecture and not uses_mamba_radix_cache(architecture, build):
        return "auto"
    extra = not architecture or supports_extra_buffer(architecture, build)
    if (overlap or page_size > 1) and extra:
        return "extra_buffer"
    return "no_buffer"


def slots_per_request(strategy: str, disable_radix_cache: bool, overlap: bool) -> int:
    """Mamba slots one running request reserves (``_calculate_mamba_ratio``).

    Args:
        strategy: resolved radix-cache strategy (no_buffer, extra_buffer, extra_buffer_lazy).
        disable_radix_cache: ``--disable-radix-cache``.
        overlap: whether overlap scheduling is on.

    Returns:
        1 without the radix cache, else 3, +2 for extra_buffer with overlap, +1 without overlap
        or for extra_buffer_lazy.
    """
    if disable_radix_cache:
        return 1
    if strategy == "extra_buffer":
        return 5 if overlap else 4
    if strategy == "extra_buffer_lazy":
        return 4
    return 3


def resolve_running(
    tokens: int,
    context_len: int,
    running: int | None,
    *,
    mamba_slots: int | None,
    ratio: int,
    build: Build,
) -> RunningCap:
    """Bound max_running_requests by the KV pool and the Mamba pool.

    Args:
        tokens: max_total_num_tokens.
        context_len: the model's context length.
        running: the requested value (48 with spec when unset), or None.
        mamba_slots: K for a hybrid model, None otherwise.
        ratio: Mamba slots per request.
        build: which SGLang build's order of warnings.

    Returns:
        The effective value, the flags and warnings, or the failure.
    """
    estimated = min(max(int(tokens / context_len * 512), 2048), 4096)
    # 0.5.17 takes the flag as is (``max_num_reqs // attn_dp_size``); 0.5.23 floors it at 1.
    floor = 0 if build == SGLANG_0_5_17 else 1
    requested = max(floor, running) if running is not None else None
    effective = (
        min(requested, tokens // 2) if requested is not None else min(estimated, tokens // 2)
    )
    reduced = requested is not None and effective < requested
    warnings: list[str] = []
    reduced_line = REDUCED.write(requested=requested, effective=effective)
    if reduced and build == SEED:
        warnings.append(reduced_line)
    capped = False
    if mamba_slots is not None:
        cap = mamba_slots // ratio
        if cap < effective:
            capped = True
            warnings.append(CAPPED.write(cap=cap, slots=mamba_slots, ratio=ratio))
            effective = cap
        if effective <= 0:
            advice = (
                ""
                if build == SEED
                else ". Try: (1) reduce --max-running-requests, (2) increase "
                "--mem-fraction-static, or (3) use GPUs with more memory."
            )
            failure = PlanFailure(
                kind="mamba_too_small",
                exception="RuntimeError",
                message=(
                    "Hybrid (mamba/linear-attention) state cache is too small to serve any "
                    f"requests. max_mamba_cache_size={mamba_slots}, mamba_ratio={ratio}, "
                    f"resulting max_num_reqs={effective}{advice}"
                ),
            )
            return RunningCap(effective, capped, reduced, tuple(warnings), failure)
    if build != SEED:
        reduced = reduced and not capped  # 0.5.23 warns about the KV only when Mamba did not cap
        if reduced:
            warnings.append(reduced_line)
    return RunningCap(effective, capped, reduced, tuple(warnings))

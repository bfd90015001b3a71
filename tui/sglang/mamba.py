"""The Mamba state pool carve-out (``_handle_max_mamba_cache``), part of the memory plan.

Read from SGLang 0.5.23's ``srt/mem_cache/kv_cache_configurator.py``: the pool is sized by one of
three branches (an explicit ``--max-mamba-cache-size``; ``--disable-radix-cache`` with
``--max-running-requests``; else ``rest * r / (1 + r)`` of the budget), the speculative
intermediate caches are charged at ``per_req * (capped_reqs + 1) * D``, and a non-positive size
raises ``Not enough GPU memory for hybrid ...``. 0.5.17's ``_handle_max_mamba_cache`` is the same
but for the ``max(1, ...)`` floors; the ``seed`` build keeps the older arithmetic the seed's
numbers came from (see ``tui.sglang.builds``).
"""

from __future__ import annotations

from dataclasses import dataclass

from tui.sglang.builds import SEED, SGLANG_0_5_17, Build
from tui.sglang.models import GIB, ModelSpec
from tui.sglang.plan_types import PlanFailure

MB = 1024**2


@dataclass(frozen=True, slots=True)
class MambaCarve:
    """The Mamba pool SGLang charges to the KV budget before sizing the KV pool."""

    slots: int
    """K, max_mamba_cache_size (the pool holds K + 1: one padding slot)."""
    conv_bytes: int
    """conv_state, K + 1 slots."""
    ssm_bytes: int
    """ssm_state, K + 1 slots."""
    intermediate_reserve_bytes: int
    """What the speculative intermediate caches were charged (dense conv windows)."""
    intermediate_requests: int
    """Requests the intermediate caches were charged for, padding included (capped + 1)."""
    rest_after_bytes: int
    """The KV budget left after the carve (negative when the pool ate it all)."""
    failure: PlanFailure | None = None
    """Set when not even one slot fits."""

    @property
    def reserve_bytes(self) -> int:
        """Everything carved out of ``rest``."""
        return self.conv_bytes + self.ssm_bytes + self.intermediate_reserve_bytes


_SSM_DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
"""``--mamba-ssm-dtype`` choices (the flag sets SGLANG_MAMBA_SSM_DTYPE, which overrides the
config's ``mamba_ssm_dtype``: ``srt/configs/mamba_utils.py`` ``mamba2_state_dtype``)."""


def ssm_slot_bytes(model: ModelSpec, ssm_dtype: str | None) -> int:
    """One slot's SSM state at ``--mamba-ssm-dtype`` (None: the model's own dtype)."""
    if ssm_dtype not in _SSM_DTYPE_BYTES:
        return model.ssm_state_bytes
    return model.ssm_state_bytes // model.ssm_dtype_bytes * _SSM_DTYPE_BYTES[ssm_dtype]


def _no_memory(slots: int, rest: float, per_slot: int, build: Build) -> PlanFailure:
    if build == SEED:
        advice = (
            "increase --mem-fraction-static, raise --mamba-full-memory-ratio, or use "
            "--mamba-ssm-dtype bfloat16."
        )
        shown = max(slots, 0)
    else:
        advice = (
            "(1) reduce --max-running-requests, (2) increase --mem-fraction-static, "
            "(3) reduce --speculative-num-draft-tokens, or (4) use GPUs with more memory."
        )
        shown = slots  # 0.5.23 prints the computed value, negative or not
    return PlanFailure(
        kind="mamba_no_memory",
        exception="RuntimeError",
        message=(
            "Not enough GPU memory for hybrid (mamba/linear-attention) state cache. "
            f"Computed max_mamba_cache_size={shown} (total_rest_memory="
            f"{rest / GIB:.2f} GB, mamba_cache_per_req={per_slot / MB:.2f} MB). Try: {advice}"
        ),
    )


def carve_mamba(
    model: ModelSpec,
    rest: int,
    *,
    max_mamba_cache_size: int | None,
    ratio: int,
    running: int | None,
    disable_radix_cache: bool,
    mamba_full_memory_ratio: float,
    draft_tokens: int,
    ssm_dtype: str | None,
    build: Build,
) -> MambaCarve:
    """Size the Mamba pool by SGLang's three branches.

    Args:
        model: the model (a non-hybrid model gets an empty carve).
        rest: bytes of KV budget left after weights, slack (and the multimodal reserve).
        max_mamba_cache_size: ``--max-mamba-cache-size`` or None.
        ratio: slots per request (the auto-cap's ratio).
        running: max running requests before the cap (48 with spec when unset), or None.
        disable_radix_cache: ``--disable-radix-cache``.
        mamba_full_memory_ratio: ``--mamba-full-memory-ratio`` (r: r/(1+r) of rest to Mamba).
        draft_tokens: speculative draft tokens D (0 without spec).
        ssm_dtype: ``--mamba-ssm-dtype``.
        build: which SGLang build's arithmetic.

    Returns:
        The carve, with ``failure`` set when not even one slot fits.
    """
    if not model.is_hybrid_mamba:
        return MambaCarve(0, 0, 0, 0, 0, rest)
    per_slot = model.conv_state_bytes + ssm_slot_bytes(model, ssm_dtype)
    asked = (
        rest,
        per_slot,
        max_mamba_cache_size,
        ratio,
        running,
        disable_radix_cache,
        mamba_full_memory_ratio,
        draft_tokens,
    )
    if build == SEED:
        slots, requests = _seed_sizes(*asked)
        if slots <= 0:
            failure = _no_memory(slots, rest, per_slot, build)
            return MambaCarve(max(slots, 0), 0, 0, 0, 0, rest, failure=failure)
        reserve = requests * draft_tokens * per_slot
    else:
        slots, requests = _sizes(*asked, floor=0 if build == SGLANG_0_5_17 else 1)
        reserve = requests * draft_tokens * per_slot if draft_tokens else 0
        if slots <= 0:
            failure = _no_memory(slots, rest - reserve, per_slot, build)
            return MambaCarve(slots, 0, 0, 0, 0, rest - reserve, failure=failure)
    ssm = ssm_slot_bytes(model, ssm_dtype)
    conv_bytes, ssm_bytes = (slots + 1) * model.conv_state_bytes, (slots + 1) * ssm
    rest_after = rest - reserve - conv_bytes - ssm_bytes
    return MambaCarve(slots, conv_bytes, ssm_bytes, reserve, requests, rest_after)


def _sizes(
    rest: int,
    per_slot: int,
    explicit: int | None,
    ratio: int,
    running: int | None,
    disable_radix_cache: bool,
    full_ratio: float,
    draft_tokens: int,
    floor: int = 1,
) -> tuple[int, int]:
    """(K, requests charged for the intermediate caches) as 0.5.23 computes them; ``floor`` 0 is
    0.5.17, which takes ``--max-running-requests`` without 0.5.23's ``max(1, ...)``."""
    requested = max(floor, running) if running is not None else 1
    if explicit is not None:
        return explicit, min(requested, explicit // ratio) + 1
    if disable_radix_cache and running is not None:
        slots = max(floor, running)
        return slots, slots + 1
    budget = rest * full_ratio / (1 + full_ratio)
    if draft_tokens:
        slots = int(
            (budget - per_slot * (1 + draft_tokens)) // (per_slot * (1 + draft_tokens / ratio))
        )
        return slots, min(requested, slots // ratio) + 1
    return int((budget - per_slot) // per_slot), 0


def _seed_sizes(
    rest: int,
    per_slot: int,
    explicit: int | None,
    ratio: int,
    running: int | None,
    disable_radix_cache: bool,
    full_ratio: float,
    draft_tokens: int,
) -> tuple[int, int]:
    """(K, requests charged for the intermediate caches) as the seed build computed them."""
    if explicit is not None:
        return explicit, (
            min(running, explicit // ratio) if running is not None else explicit // ratio
        ) + 1
    if disable_radix_cache and running is not None:
        return running, running + 1
    budget = int(rest * full_ratio / (1 + full_ratio))
    if draft_tokens:
        slots = int(
            (budget - per_slot * (1 + draft_tokens)) // (per_slot * (1 + draft_tokens / ratio))
        )
    else:
        slots = (budget - per_slot) // per_slot
    cap = slots // ratio if slots > 0 else 0
    return slots, (min(running, cap) if running is not None else cap) + 1


def intermediate_allocation(
    model: ModelSpec,
    carve: MambaCarve,
    *,
    effective_running: int,
    draft_tokens: int,
    ssm_dtype: str | None,
    build: Build,
) -> tuple[int, int]:
    """The speculative intermediate caches as allocated: (ssm bytes, conv-window bytes).

    0.5.23 allocates ``spec_state_size + 1`` rows (``spec_state_size`` = the effective max
    running requests) and stores the D draft tokens' conv windows in ``D + window - 1`` columns
    (``srt/mem_cache/memory_pool.py``, ``_allocate_deduplicated_conv_window``); the seed build
    allocated what it charged, dense.

    Returns:
        (intermediate_ssm_state_cache bytes, intermediate_conv_window_cache bytes).
    """
    if not draft_tokens or not model.is_hybrid_mamba:
        return 0, 0
    ssm = ssm_slot_bytes(model, ssm_dtype)
    if build == SEED:
        slots = carve.intermediate_requests * draft_tokens
        return slots * ssm, slots * model.conv_state_bytes
    rows = effective_running + 1
    columns = draft_tokens + model.conv_window - 1
    return rows * draft_tokens * ssm, rows * model.conv_state_bytes * columns // model.conv_window

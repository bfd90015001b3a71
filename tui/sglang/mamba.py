"""The Mamba state pool carve-out (``_handle_max_mamba_cache``), part of the memory plan."""

from __future__ import annotations

from dataclasses import dataclass

from tui.sglang.models import GIB, ModelSpec
from tui.sglang.plan_types import PlanFailure

MB = 1024**2


@dataclass(frozen=True, slots=True)
class MambaCarve:
    """The Mamba pool SGLang allocates before the KV pool."""

    slots: int
    """K, max_mamba_cache_size (the pool holds K + 1: one padding slot)."""
    conv_bytes: int
    """conv_state, K + 1 slots."""
    ssm_bytes: int
    """ssm_state, K + 1 slots."""
    intermediate_ssm_bytes: int
    """Spec-decoding intermediate SSM cache."""
    intermediate_conv_bytes: int
    """Spec-decoding intermediate conv-window cache."""
    failure: PlanFailure | None = None
    """Set when no slot fits."""

    @property
    def total_bytes(self) -> int:
        """Everything carved out of ``rest``."""
        return (
            self.conv_bytes
            + self.ssm_bytes
            + self.intermediate_ssm_bytes
            + (self.intermediate_conv_bytes)
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
) -> MambaCarve:
    """Size the Mamba pool by SGLang's three branches (sglang-ops.md (c)).

    Args:
        model: the model (a non-hybrid model gets an empty carve).
        rest: bytes left after weights and slack.
        max_mamba_cache_size: ``--max-mamba-cache-size`` or None.
        ratio: slots per request (the auto-cap ratio).
        running: max running requests before the cap (48 with spec when unset), or None.
        disable_radix_cache: ``--disable-radix-cache``.
        mamba_full_memory_ratio: ``--mamba-full-memory-ratio`` (r: r/(1+r) of rest to Mamba).
        draft_tokens: speculative draft tokens D (0 without spec).
        ssm_dtype: ``--mamba-ssm-dtype`` (bfloat16/float16 halve the SSM state).

    Returns:
        The carve, with ``failure`` set when not even one slot fits.
    """
    if not model.is_hybrid_mamba:
        return MambaCarve(0, 0, 0, 0, 0)
    ssm_slot = (
        model.ssm_state_bytes // 2
        if ssm_dtype in ("bfloat16", "float16")
        else (model.ssm_state_bytes)
    )
    per_slot = model.conv_state_bytes + ssm_slot
    if max_mamba_cache_size is not None:
        slots = max_mamba_cache_size
        inter = (min(running, slots // ratio) if running is not None else slots // ratio) + 1
    elif disable_radix_cache and running is not None:
        slots = running
        inter = slots + 1
    else:
        budget = int(rest * mamba_full_memory_ratio / (1 + mamba_full_memory_ratio))
        if draft_tokens:
            slots = int(
                (budget - per_slot * (1 + draft_tokens)) // (per_slot * (1 + draft_tokens / ratio))
            )
        else:
            slots = (budget - per_slot) // per_slot
        cap = slots // ratio if slots > 0 else 0
        inter = (min(running, cap) if running is not None else cap) + 1
    if slots <= 0:
        return MambaCarve(
            max(slots, 0),
            0,
            0,
            0,
            0,
            failure=PlanFailure(
                kind="mamba_no_memory",
                exception="RuntimeError",
                message=(
                    "Not enough GPU memory for hybrid (mamba/linear-attention) state cache. "
                    f"Computed max_mamba_cache_size={max(slots, 0)} (total_rest_memory="
                    f"{rest / GIB:.2f} GB, mamba_cache_per_req={per_slot / MB:.2f} MB). Try: "
                    "increase --mem-fraction-static, raise --mamba-full-memory-ratio, or use "
                    "--mamba-ssm-dtype bfloat16."
                ),
            ),
        )
    inter_slots = inter * draft_tokens if draft_tokens else 0
    return MambaCarve(
        slots=slots,
        conv_bytes=(slots + 1) * model.conv_state_bytes,
        ssm_bytes=(slots + 1) * ssm_slot,
        intermediate_ssm_bytes=inter_slots * ssm_slot,
        intermediate_conv_bytes=inter_slots * model.conv_state_bytes,
    )

"""The memory plan's result types and the calibration input (frozen, shared with the preflight)."""

from __future__ import annotations

from dataclasses import dataclass

from tui.sglang.models import CUDA_CONTEXT_BYTES, GIB


@dataclass(frozen=True, slots=True)
class PlanFailure:
    """Why a configuration does not start, in SGLang's own words."""

    kind: str
    """weights_leave_no_memory, not_enough_memory, mamba_no_memory, mamba_too_small,
    cuda_oom_graph or cuda_oom_weights."""
    exception: str
    """Exception class as the traceback prints it (``RuntimeError``, ``torch.OutOfMemoryError``)."""
    message: str
    """SGLang's exact message (what follows ``<exception>: `` in the log)."""
    phase: str = "memory_pool"
    """Startup phase it happens in: load_weights, memory_pool or cuda_graph."""

    @property
    def line(self) -> str:
        """The traceback's last line: ``RuntimeError: Not enough memory. ...``."""
        return f"{self.exception}: {self.message}"


@dataclass(frozen=True, slots=True)
class MemoryPlan:
    """Every number SGLang's startup log prints about memory, and the failure if any."""

    model: str
    """Model name (a key of tui.sglang.models.MODELS)."""
    build: str
    """The SGLang build whose arithmetic and lines this plan follows (``tui.sglang.builds``)."""
    gpu_total_bytes: int
    """Device capacity."""
    pre_bytes: int
    """Free memory right before the weight load."""
    weight_bytes: int
    """Target weights."""
    draft_weight_bytes: int
    """Draft weights (0 without speculative decoding)."""
    avail_after_weights_bytes: int
    """Free memory after weights (``avail``)."""
    before_weights_bytes: int
    """What the server takes after measuring ``pre`` and before its weights (per build,
    ``tui.sglang.memory.ALLOCATED_BEFORE_WEIGHTS``); its ``Load weight begin`` line prints
    ``pre`` minus this."""
    mem_fraction_static: float
    """Resolved fraction."""
    fraction_was_default: bool
    """True when SGLang chose the fraction."""
    slack_bytes: int
    """``pre * (1 - fraction)``: activations and CUDA-graph headroom."""
    rest_bytes: int
    """``avail - slack - multimodal reserve``, before the Mamba pool is carved."""
    multimodal_reserve_bytes: int
    """Reserved out of the KV budget for a multimodal model's later allocations (0.5.23)."""
    page_size: int
    """Resolved page size."""
    context_len: int
    """Resolved context length."""
    chunked_prefill_size: int
    """Resolved chunked prefill size."""
    max_prefill_tokens: int
    """``max_prefill_tokens`` as the summary line prints it."""
    speculative: bool
    """EAGLE/MTP on."""
    num_draft_tokens: int
    """Draft tokens per step (0 without spec)."""
    requested_max_running_requests: int | None
    """The CLI value (what /server_info's top level shows); None when unset."""
    is_hybrid_mamba: bool
    """Whether a Mamba pool exists."""
    max_mamba_cache_size: int = 0
    """Resolved Mamba slots K (without the padding slot)."""
    mamba_slots_per_request: int = 0
    """Slots one request reserves (the auto-cap's ratio)."""
    mamba_strategy: str = ""
    """Resolved radix-cache strategy."""
    conv_state_bytes: int = 0
    """conv_state pool, K+1 slots."""
    ssm_state_bytes: int = 0
    """ssm_state pool, K+1 slots."""
    intermediate_ssm_bytes: int = 0
    """Spec-decoding intermediate SSM cache."""
    intermediate_conv_bytes: int = 0
    """Spec-decoding intermediate conv-window cache, as allocated (compact in 0.5.23)."""
    intermediate_reserve_bytes: int = 0
    """What the intermediate caches were charged to the KV budget (dense windows)."""
    max_total_num_tokens: int = 0
    """KV pool tokens."""
    k_bytes: int = 0
    """Target K pool."""
    v_bytes: int = 0
    """Target V pool."""
    draft_k_bytes: int = 0
    """Draft K pool (second KV line)."""
    draft_v_bytes: int = 0
    """Draft V pool."""
    max_running_requests: int = 0
    """Effective (capped) max running requests: what the summary line prints."""
    capped_by_mamba: bool = False
    """True when the Mamba slots lowered it (SGLang's cap WARNING)."""
    reduced_by_kv: bool = False
    """True when the KV pool lowered it."""
    cuda_graph_max_bs: int = 0
    """Largest decode batch captured."""
    graph_bytes: int = 0
    """CUDA-graph memory."""
    available_after_pools_bytes: int = 0
    """Free memory after every pool (``Memory pool end. avail mem``)."""
    available_gpu_mem_bytes: int = 0
    """Free after graph capture: the summary line's available_gpu_mem."""
    warnings: tuple[str, ...] = ()
    """SGLang's warning lines from pool sizing, in emission order (the spec-decoding reset to
    48 comes from argument resolution and is printed before ``server_args``)."""
    failure: PlanFailure | None = None
    """Set when the configuration fails to start."""

    @property
    def ok(self) -> bool:
        """True when the server starts."""
        return self.failure is None

    @property
    def mamba_bytes(self) -> int:
        """The Mamba pool as allocated (slots, padding and intermediate caches)."""
        return (
            self.conv_state_bytes
            + self.ssm_state_bytes
            + self.intermediate_ssm_bytes
            + self.intermediate_conv_bytes
        )

    @property
    def mamba_reserve_bytes(self) -> int:
        """What the Mamba pool was charged to the KV budget before the KV pool was sized."""
        return self.conv_state_bytes + self.ssm_state_bytes + self.intermediate_reserve_bytes

    @property
    def kv_bytes(self) -> int:
        """Target plus draft KV pools."""
        return self.k_bytes + self.v_bytes + self.draft_k_bytes + self.draft_v_bytes

    @property
    def resident_bytes(self) -> int:
        """What the scheduler process holds on the GPU once started (CUDA context included)."""
        pools = self.mamba_bytes + self.kv_bytes + self.graph_bytes
        weights = self.before_weights_bytes + self.weight_bytes + self.draft_weight_bytes
        return CUDA_CONTEXT_BYTES + weights + pools


PRINT_HALF_STEP_GB = 0.005
"""SGLang prints its allocation sizes with two decimals: each is within half a step."""


@dataclass(frozen=True, slots=True)
class Calibration:
    """Sizes measured from a real server's allocation lines; each set field replaces the spec's."""

    kv_bytes_per_token: int | None = None
    """Target K+V bytes per token."""
    draft_kv_bytes_per_token: int | None = None
    """Draft K+V bytes per token."""
    conv_state_bytes: int | None = None
    """Conv bytes per Mamba slot."""
    ssm_state_bytes: int | None = None
    """SSM bytes per Mamba slot."""
    weight_bytes: int | None = None
    """Target weights."""
    draft_weight_bytes: int | None = None
    """Draft weights."""
    pre_bytes: int | None = None
    """Free memory the server measured before loading weights (``Load weight begin. avail
    mem``): the GPU's capacity less the CUDA context and what was resident then."""
    tolerance: tuple[tuple[str, int], ...] = ()
    """(field, bytes): half the log's print step (0.01 GB) spread over the field's count. A
    model's own size within it agrees with what the server printed and is kept: a small pool
    (0.01 GB over 65 slots) says next to nothing about one slot (seen on a real 0.5.17 server:
    a calibration from 'ssm_state size: 0.01GB' mispredicted 68,056 slots as 43,302)."""

    def tolerance_of(self, name: str) -> int:
        """The tolerance of field ``name`` in bytes (0: none recorded)."""
        return dict(self.tolerance).get(name, 0)

    @classmethod
    def from_log_values(
        cls,
        *,
        kv_tokens: int | None = None,
        k_gb: float | None = None,
        v_gb: float | None = None,
        draft_k_gb: float | None = None,
        draft_v_gb: float | None = None,
        mamba_slots: int | None = None,
        conv_gb: float | None = None,
        ssm_gb: float | None = None,
        weights_gb: float | None = None,
        pre_gb: float | None = None,
    ) -> Calibration:
        """Derive per-unit sizes from the numbers the allocation lines print (GB = GiB).

        Args:
            kv_tokens: ``#tokens`` of the KV lines.
            k_gb, v_gb: target ``K size`` / ``V size``.
            draft_k_gb, draft_v_gb: the second (draft) KV line's sizes.
            mamba_slots: ``max_mamba_cache_size`` (the pool has one more, padding, slot).
            conv_gb, ssm_gb: ``conv_state size`` / ``ssm_state size``.
            weights_gb: ``Load weight end. ... mem usage``.
            pre_gb: ``Load weight begin. avail mem``.

        Returns:
            The calibration (fields left None where an input was missing).
        """

        tolerance: dict[str, int] = {}

        def per(
            name: str, total_gb: float | None, count: int | None, printed: int = 1
        ) -> int | None:
            # ``printed`` values of 2 decimals each were summed: each is +-0.005 GB
            if total_gb is None or not count:
                return None
            tolerance[name] = int(printed * PRINT_HALF_STEP_GB * GIB / count) + 1
            return round(total_gb * GIB / count)

        kv = per(
            "kv_bytes_per_token",
            (k_gb or 0) + (v_gb or 0) if k_gb is not None else None,
            kv_tokens,
            printed=2,
        )
        draft = per(
            "draft_kv_bytes_per_token",
            (draft_k_gb or 0) + (draft_v_gb or 0) if draft_k_gb is not None else None,
            kv_tokens,
            printed=2,
        )
        slots = mamba_slots + 1 if mamba_slots is not None else None
        return cls(
            kv_bytes_per_token=kv,
            draft_kv_bytes_per_token=draft,
            conv_state_bytes=per("conv_state_bytes", conv_gb, slots),
            ssm_state_bytes=per("ssm_state_bytes", ssm_gb, slots),
            weight_bytes=per("weight_bytes", weights_gb, 1),
            pre_bytes=per("pre_bytes", pre_gb, 1),
            tolerance=tuple(sorted(tolerance.items())),
        )

"""SGLang 0.5.23's startup memory plan for one single-GPU server, as a pure function.

Implements sglang-ops.md (c) (``KVCacheConfigurator``, ``pool_configurator.py``,
``_handle_max_mamba_cache``, ``resolve_max_num_reqs``)::

    pre   = free bytes before weight load (capacity - CUDA context - anything else resident)
    avail = pre - weights (- draft weights with EAGLE/MTP)
    slack = pre * (1 - mem_fraction_static)          # activations + CUDA-graph headroom
    rest  = avail - slack                            # <= 0: ValueError "Loaded weights leave ..."
    hybrid: carve (K + 1) Mamba slots (+ the spec-decoding intermediate reserve) out of rest
    max_total_num_tokens = floor(rest / cell / page) * page, min --max-total-tokens
    max_running_requests = min(R, tokens // 2, K // slots_per_request)

After the pools, CUDA-graph capture needs its graph memory plus the chunked-prefill activation
workspace inside what is left; when the fraction leaves less, capture fails with a CUDA OOM (the
#4330 squeeze: too high a fraction OOMs at capture, too low gives "Not enough memory").

The same function serves the simulator and the tuning form's preflight; ``Calibration`` lets the
preflight replace the model's constants with sizes measured from a real server's log.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from tui.sglang.mamba import carve_mamba
from tui.sglang.models import CUDA_CONTEXT_BYTES, GIB, ModelSpec
from tui.sglang.plan_types import Calibration, MemoryPlan, PlanFailure

__all__ = ["Calibration", "MemoryPlan", "PlanFailure", "apply_calibration", "plan_memory"]

SPEC_DEFAULT_MAX_RUNNING = 48
"""``--max-running-requests`` forced with speculative decoding when unset."""

MB = 1024**2


@dataclass(frozen=True, slots=True)
class _Defaults:
    chunked_prefill_size: int
    cuda_graph_max_bs: int


def _gpu_defaults(gpu_total_bytes: int) -> _Defaults:
    # B200-class (>160 GB) gets 16384 / 512, H100/H200 8192 / 256 (memory_hook.py).
    if gpu_total_bytes > 160 * 10**9:
        return _Defaults(16384, 512)
    return _Defaults(8192, 256)


def default_mem_fraction(
    gpu_total_bytes: int, chunked_prefill_size: int, graph_max_bs: int
) -> float:
    """SGLang's automatic ``mem_fraction_static`` (``handle_gpu_memory_settings``).

    Args:
        gpu_total_bytes: device capacity.
        chunked_prefill_size: resolved chunked prefill size.
        graph_max_bs: resolved decode CUDA-graph max batch size.

    Returns:
        The fraction, rounded to 3 decimals.
    """
    gpu_mb = gpu_total_bytes / MB
    reserved = 512 + max(chunked_prefill_size, 2048) * 1.5 + 1 / 8 * 1024 + graph_max_bs * 2
    if gpu_mb > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    return round((gpu_mb - reserved) / gpu_mb, 3)


def slots_per_request(strategy: str, disable_radix_cache: bool, overlap: bool) -> int:
    """Mamba slots one running request reserves (the ``ratio`` of ``resolve_max_num_reqs``).

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


def resolve_strategy(
    requested: str, disable_radix_cache: bool, page_size: int, overlap: bool
) -> str:
    """Resolve ``auto`` as ``_mamba_radix_cache_resolution`` does (hybrids support extra_buffer).

    Args:
        requested: the flag value (auto, no_buffer, extra_buffer, extra_buffer_lazy).
        disable_radix_cache: ``--disable-radix-cache``.
        page_size: resolved page size.
        overlap: whether overlap scheduling is wanted.

    Returns:
        The concrete strategy.
    """
    if requested != "auto":
        return requested
    if not disable_radix_cache and (overlap or page_size > 1):
        return "extra_buffer"
    return "no_buffer"


def apply_calibration(model: ModelSpec, calibration: Calibration | None) -> ModelSpec:
    """Return the model with every size the calibration measured replacing the spec's constant.

    Args:
        model: the spec.
        calibration: measured sizes, or None.

    Returns:
        The (possibly) adjusted spec.
    """
    if calibration is None:
        return model
    changes: dict[str, Any] = {}
    for field in (
        "kv_bytes_per_token",
        "draft_kv_bytes_per_token",
        "conv_state_bytes",
        "ssm_state_bytes",
        "weight_bytes",
        "draft_weight_bytes",
    ):
        value = getattr(calibration, field)
        if value is not None:
            changes[field] = value
    return dataclasses.replace(model, **changes)


def _fail(kind: str, exc: str, message: str, phase: str = "memory_pool") -> PlanFailure:
    return PlanFailure(kind=kind, exception=exc, message=message, phase=phase)


def plan_memory(
    model: ModelSpec,
    gpu_total_bytes: int,
    *,
    other_resident_bytes: int = 0,
    mem_fraction_static: float | None = None,
    max_running_requests: int | None = None,
    max_mamba_cache_size: int | None = None,
    mamba_full_memory_ratio: float = 0.9,
    max_total_tokens: int | None = None,
    page_size: int | None = None,
    context_length: int | None = None,
    chunked_prefill_size: int | None = None,
    cuda_graph_max_bs: int | None = None,
    speculative_algorithm: str | None = None,
    speculative_num_draft_tokens: int | None = None,
    disable_radix_cache: bool = False,
    mamba_radix_cache_strategy: str = "auto",
    disable_overlap_schedule: bool = False,
    mamba_ssm_dtype: str | None = None,
    calibration: Calibration | None = None,
) -> MemoryPlan:
    """Size every pool the way SGLang 0.5.23 does at startup, or say how it fails.

    Args:
        model: the model being served.
        gpu_total_bytes: device capacity (as NVML reports it).
        other_resident_bytes: memory other processes hold on the GPU at launch (shrinks ``pre``).
        mem_fraction_static .. mamba_ssm_dtype: the SGLang flags of the same names (None: unset).
        calibration: measured sizes replacing the model's constants (the preflight's path).

    Returns:
        The plan; ``plan.failure`` is set (and later numbers are zero) when it does not fit.
    """
    model = apply_calibration(model, calibration)
    spec = speculative_algorithm is not None and speculative_algorithm.upper() != "NONE"
    draft_tokens = (speculative_num_draft_tokens or 4) if spec else 0
    defaults = _gpu_defaults(gpu_total_bytes)
    chunked = chunked_prefill_size or defaults.chunked_prefill_size
    graph_max_bs = cuda_graph_max_bs or defaults.cuda_graph_max_bs
    if max_running_requests is not None:
        graph_max_bs = min(graph_max_bs, max_running_requests)
    page = page_size or model.default_page_size
    context_len = context_length or model.context_length
    overlap = not disable_overlap_schedule
    warnings: list[str] = []

    fraction_was_default = mem_fraction_static is None
    fraction = (
        default_mem_fraction(gpu_total_bytes, chunked, graph_max_bs)
        if mem_fraction_static is None
        else mem_fraction_static
    )
    requested_r = max_running_requests
    running_r = max_running_requests
    if spec and running_r is None:
        running_r = SPEC_DEFAULT_MAX_RUNNING
        warnings.append(
            "Max running requests is reset to 48 for speculative decoding. You can override this "
            "by explicitly setting --max-running-requests."
        )

    weights = model.weight_bytes + (model.draft_weight_bytes if spec else 0)
    pre = gpu_total_bytes - CUDA_CONTEXT_BYTES - other_resident_bytes
    avail = pre - weights
    slack = int(pre * (1 - fraction))
    rest = avail - slack
    base: dict[str, Any] = dict(
        model=model.name,
        gpu_total_bytes=gpu_total_bytes,
        pre_bytes=pre,
        weight_bytes=model.weight_bytes,
        draft_weight_bytes=model.draft_weight_bytes if spec else 0,
        avail_after_weights_bytes=avail,
        mem_fraction_static=fraction,
        fraction_was_default=fraction_was_default,
        slack_bytes=slack,
        rest_bytes=rest,
        page_size=page,
        context_len=context_len,
        chunked_prefill_size=chunked,
        speculative=spec,
        num_draft_tokens=draft_tokens,
        requested_max_running_requests=requested_r,
        is_hybrid_mamba=model.is_hybrid_mamba,
    )
    if avail <= 0:
        return MemoryPlan(
            **base,
            warnings=tuple(warnings),
            failure=_fail(
                "cuda_oom_weights",
                "torch.OutOfMemoryError",
                f"CUDA out of memory. Tried to allocate {weights / GIB:.2f} GiB. GPU 0 has a total "
                f"capacity of {gpu_total_bytes / GIB:.2f} GiB of which {max(pre, 0) / GIB:.2f} GiB "
                "is free.",
                phase="load_weights",
            ),
        )
    if rest <= 0:
        minimum = 1 - avail / pre
        return MemoryPlan(
            **base,
            warnings=tuple(warnings),
            failure=_fail(
                "weights_leave_no_memory",
                "ValueError",
                "Loaded weights leave no GPU memory for the KV cache under "
                f"--mem-fraction-static={fraction}. Raise --mem-fraction-static above "
                f"{math.ceil(minimum * 100) / 100:.2f} (minimum viable = 1 - available/pre = "
                f"{minimum:.4f}). If using speculative decoding, draft weights are now counted.",
            ),
        )
    strategy = resolve_strategy(mamba_radix_cache_strategy, disable_radix_cache, page, overlap)
    ratio = slots_per_request(strategy, disable_radix_cache, overlap)
    mamba = carve_mamba(
        model,
        rest,
        max_mamba_cache_size=max_mamba_cache_size,
        ratio=ratio,
        running=running_r,
        disable_radix_cache=disable_radix_cache,
        mamba_full_memory_ratio=mamba_full_memory_ratio,
        draft_tokens=draft_tokens,
        ssm_dtype=mamba_ssm_dtype,
    )
    if mamba.failure is not None:
        return MemoryPlan(**base, warnings=tuple(warnings), failure=mamba.failure)
    rest -= mamba.total_bytes
    not_enough = _fail(
        "not_enough_memory",
        "RuntimeError",
        "Not enough memory. Please try to increase --mem-fraction-static. "
        f"Current value: mem_fraction_static={fraction}",
    )
    mamba_fields: dict[str, Any] = dict(
        max_mamba_cache_size=mamba.slots,
        mamba_slots_per_request=ratio if model.is_hybrid_mamba else 0,
        mamba_strategy=strategy if model.is_hybrid_mamba else "",
        conv_state_bytes=mamba.conv_bytes,
        ssm_state_bytes=mamba.ssm_bytes,
        intermediate_ssm_bytes=mamba.intermediate_ssm_bytes,
        intermediate_conv_bytes=mamba.intermediate_conv_bytes,
    )
    if rest <= 0:
        return MemoryPlan(**base, **mamba_fields, warnings=tuple(warnings), failure=not_enough)
    cell = model.kv_bytes_per_token + (model.draft_kv_bytes_per_token if spec else 0)
    tokens = rest // cell // page * page
    if max_total_tokens is not None:
        if max_total_tokens > tokens:
            warnings.append(
                f"max_total_tokens={max_total_tokens} is larger than the profiled value {tokens}. "
                "Use the profiled value instead."
            )
        tokens = min(tokens, max_total_tokens // page * page)
    if tokens <= 0:
        return MemoryPlan(**base, **mamba_fields, warnings=tuple(warnings), failure=not_enough)

    estimated = min(max(int(tokens / context_len * 512), 2048), 4096)
    effective = (
        min(running_r, tokens // 2) if running_r is not None else min(estimated, tokens // 2)
    )
    reduced_by_kv = running_r is not None and effective < running_r
    if reduced_by_kv:
        warnings.append(
            f"max_running_requests was reduced from the requested {running_r} to {effective} "
            "(per dp worker) due to the available KV cache capacity."
        )
    capped = False
    if model.is_hybrid_mamba:
        cap = mamba.slots // ratio
        if cap <= 0:
            return MemoryPlan(
                **base,
                **mamba_fields,
                warnings=tuple(warnings),
                failure=_fail(
                    "mamba_too_small",
                    "RuntimeError",
                    "Hybrid (mamba/linear-attention) state cache is too small to serve any "
                    f"requests. max_mamba_cache_size={mamba.slots}, mamba_ratio={ratio}, "
                    "resulting max_num_reqs=0",
                ),
            )
        if cap < effective:
            effective = cap
            capped = True
            warnings.append(
                f"max_running_requests is capped to {cap} by the mamba state cache "
                f"(max_mamba_cache_size={mamba.slots}, {ratio} state slots per request). To raise "
                "it: increase --mamba-full-memory-ratio or --max-mamba-cache-size, or halve the "
                "state size with --mamba-ssm-dtype bfloat16."
            )

    kv_each = tokens * model.kv_bytes_per_token // 2
    draft_each = tokens * model.draft_kv_bytes_per_token // 2 if spec else 0
    after_pools = pre - weights - mamba.total_bytes - 2 * kv_each - 2 * draft_each
    capture_bs = min(graph_max_bs, effective)
    graph = model.graph_base_bytes + model.graph_bytes_per_bs * capture_bs
    activations = chunked * model.activation_bytes_per_token
    failure = None
    if after_pools < graph + activations:
        failure = _fail(
            "cuda_oom_graph",
            "torch.OutOfMemoryError",
            f"CUDA out of memory. Tried to allocate {graph / GIB:.2f} GiB. GPU 0 has a total "
            f"capacity of {gpu_total_bytes / GIB:.2f} GiB of which "
            f"{max(after_pools - activations, 0) / MB:.2f} MiB is free. Of the allocated memory "
            f"{(gpu_total_bytes - after_pools) / GIB:.2f} GiB is allocated by PyTorch.",
            phase="cuda_graph",
        )
    return MemoryPlan(
        **base,
        **mamba_fields,
        max_total_num_tokens=tokens,
        k_bytes=kv_each,
        v_bytes=kv_each,
        draft_k_bytes=draft_each,
        draft_v_bytes=draft_each,
        max_running_requests=effective,
        capped_by_mamba=capped,
        reduced_by_kv=reduced_by_kv,
        cuda_graph_max_bs=capture_bs,
        graph_bytes=graph,
        available_after_pools_bytes=after_pools,
        available_gpu_mem_bytes=after_pools - graph,
        warnings=tuple(warnings),
        failure=failure,
    )

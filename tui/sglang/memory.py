"""SGLang's startup memory plan for one single-GPU server, as a pure function.

Follows SGLang 0.5.23's source (``srt/mem_cache/kv_cache_configurator.py``
``_profile_available_bytes`` / ``_handle_max_mamba_cache`` / ``resolve_max_num_reqs``,
``srt/model_executor/pool_configurator.py``, ``srt/mem_cache/memory_pool.py``)::

    pre   = free bytes before weight load (capacity - CUDA context - anything else resident)
    avail = pre - weights (- draft weights with EAGLE/MTP) - what the build takes in between
    slack = pre * (1 - mem_fraction_static)          # activations + CUDA-graph headroom
    rest  = avail - slack - 100 MiB for a multimodal model (0.5.23 only)
    hybrid: carve (K + 1) Mamba slots and the spec-decoding intermediate reserve out of rest
            (K <= 0: RuntimeError "Not enough GPU memory for hybrid ...")
    rest <= 0: ValueError "Loaded weights leave no GPU memory ..."
    max_total_num_tokens = floor(rest / cell / page) * page, min --max-total-tokens
            (<= 0: RuntimeError "Not enough memory. Please try to increase ...")
    max_running_requests = min(R, tokens // 2, K // slots_per_request)

After the pools, CUDA-graph capture needs its graph memory plus the chunked-prefill activation
workspace inside what is left; when the fraction leaves less, capture fails with a CUDA OOM (the
#4330 squeeze: too high a fraction OOMs at capture, too low leaves no KV cache).

``build="0.5.17"`` follows SGLang 0.5.17 (no multimodal reserve, its own radix-cache and draft
lists) and ``build="seed"`` keeps the older arithmetic and texts that reproduce the seed's numbers
(see ``tui.sglang.builds``). The model is a ``ModelSpec``: a hand-written one or one derived from
a config.json (``tui.sglang.modelcfg``). The same function serves the simulator, ``gpufleet
plan`` and the tuning form's preflight; ``Calibration`` lets the preflight replace the model's
constants with sizes measured from a real server's log.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from tui.sglang.builds import SEED, SGLANG_0_5_17, SGLANG_0_5_23, Build
from tui.sglang.caps import resolve_running, resolve_strategy, slots_per_request
from tui.sglang.mamba import carve_mamba, intermediate_allocation
from tui.sglang.models import CUDA_CONTEXT_BYTES, GIB, ModelSpec
from tui.sglang.plan_types import Calibration, MemoryPlan, PlanFailure

__all__ = [
    "Calibration",
    "MemoryPlan",
    "PlanFailure",
    "apply_calibration",
    "plan_memory",
    "slots_per_request",
]

SPEC_DEFAULT_MAX_RUNNING = 48
"""``--max-running-requests`` forced with speculative decoding when unset."""

MB = 1024**2

VLM_CACHE_SIZE_MB = 100
"""``SGLANG_VLM_CACHE_SIZE_MB``'s default: the multimodal reserve of 0.5.23's KV budget."""

ALLOCATED_BEFORE_WEIGHTS: dict[str, int] = {SGLANG_0_5_17: 73_371_448}
"""Memory a server takes after it measures ``pre`` (``pre_model_load_memory``, at the end of its
torch.distributed init) and before its weights load, by build: it shrinks ``avail`` but not the
slack. Fitted on the real 0.5.17 recordings (``tests/fixtures/real_sglang/0.5.17``, an H100,
torch 2.11): the ``base`` and ``cap`` scenarios solve ``pre`` and ``avail`` exactly, and with them
every other scenario's KV tokens and Mamba slots agree to 2 tokens. ~70 MiB, and the server's
``Load weight begin`` line already excludes it. 0.5.23 (unmeasured) and the seed build (its
calibrated weights absorb it): 0."""

DEFAULT_MAX_PREFILL_TOKENS = 16384
"""``--max-prefill-tokens``'s default in 0.5.23 (``srt/arg_groups/fields/schedule.py``)."""


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


def apply_calibration(model: ModelSpec, calibration: Calibration | None) -> ModelSpec:
    """Return the model with every size the calibration measured replacing the spec's constant,
    where they disagree beyond what the log's rounding allows (``Calibration.tolerance``): a
    size the server's print agrees with stays the model's own, exact one.

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
        if value is None:
            continue
        if abs(getattr(model, field) - value) > calibration.tolerance_of(field):
            changes[field] = value
    return dataclasses.replace(model, **changes)


def _fail(kind: str, exc: str, message: str, phase: str = "memory_pool") -> PlanFailure:
    return PlanFailure(kind=kind, exception=exc, message=message, phase=phase)


def _weights_leave_no_memory(fraction: float, avail: int, pre: int, build: Build) -> PlanFailure:
    minimum = 1 - avail / pre
    # 0.5.23 suggests the minimum rounded up to 3 decimals; the seed build printed 2.
    above = (
        f"{math.ceil(minimum * 100) / 100:.2f}"
        if build == SEED
        else f"{math.ceil(minimum * 1000) / 1000:.3f}"
    )
    return _fail(
        "weights_leave_no_memory",
        "ValueError",
        "Loaded weights leave no GPU memory for the KV cache under "
        f"--mem-fraction-static={fraction}. Raise --mem-fraction-static above {above} "
        f"(minimum viable = 1 - available/pre = {minimum:.4f}). If using speculative "
        "decoding, draft weights are now counted.",
    )


def _not_enough(fraction: float, build: Build) -> PlanFailure:
    # 0.5.23's MemoryPoolConfig raises before mem_fraction_static is set on it: no "Current value".
    suffix = f" Current value: mem_fraction_static={fraction}" if build == SEED else ""
    return _fail(
        "not_enough_memory",
        "RuntimeError",
        f"Not enough memory. Please try to increase --mem-fraction-static.{suffix}",
    )


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
    max_prefill_tokens: int | None = None,
    cuda_graph_max_bs: int | None = None,
    speculative_algorithm: str | None = None,
    speculative_num_draft_tokens: int | None = None,
    disable_radix_cache: bool = False,
    mamba_radix_cache_strategy: str = "auto",
    disable_overlap_schedule: bool = False,
    mamba_ssm_dtype: str | None = None,
    disable_cuda_graph: bool = False,
    calibration: Calibration | None = None,
    build: Build = SGLANG_0_5_23,
    pre_bytes: int | None = None,
) -> MemoryPlan:
    """Size every pool the way SGLang does at startup, or say how it fails.

    Args:
        model: the model being served.
        gpu_total_bytes: device capacity (as NVML reports it).
        other_resident_bytes: memory other processes hold on the GPU at launch (shrinks ``pre``).
        mem_fraction_static .. disable_cuda_graph: the SGLang flags of the same names (None:
            unset).
        calibration: measured sizes replacing the model's constants (the preflight's path).
        build: the SGLang build to follow (``tui.sglang.builds``; default 0.5.23).
        pre_bytes: ``pre_model_load_memory`` as a real server measured it (its ``Load weight
            begin. avail mem`` plus ``ALLOCATED_BEFORE_WEIGHTS``); replaces ``gpu_total_bytes`` -
            CUDA context - ``other_resident_bytes``.

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

    fraction = (
        default_mem_fraction(gpu_total_bytes, chunked, graph_max_bs)
        if mem_fraction_static is None
        else mem_fraction_static
    )
    running = max_running_requests
    if spec and running is None:
        running = SPEC_DEFAULT_MAX_RUNNING
        warnings.append(
            "Max running requests is reset to 48 for speculative decoding. You can override this "
            "by explicitly setting --max-running-requests."
        )

    weights = model.weight_bytes + (model.draft_weight_bytes if spec else 0)
    pre = (
        pre_bytes
        if pre_bytes is not None
        else gpu_total_bytes - CUDA_CONTEXT_BYTES - other_resident_bytes
    )
    before_weights = ALLOCATED_BEFORE_WEIGHTS.get(build, 0)
    avail = pre - before_weights - weights
    slack = int(pre * (1 - fraction))
    # Only 0.5.23 reserves it (``mm_runtime_reservation_gb``; 0.5.17 and the seed build have none).
    multimodal = VLM_CACHE_SIZE_MB * MB if model.is_multimodal and build == SGLANG_0_5_23 else 0
    rest = avail - slack - multimodal
    base: dict[str, Any] = dict(
        model=model.name,
        build=build,
        gpu_total_bytes=gpu_total_bytes,
        pre_bytes=pre,
        weight_bytes=model.weight_bytes,
        draft_weight_bytes=model.draft_weight_bytes if spec else 0,
        avail_after_weights_bytes=avail,
        before_weights_bytes=before_weights,
        mem_fraction_static=fraction,
        fraction_was_default=mem_fraction_static is None,
        slack_bytes=slack,
        rest_bytes=rest,
        multimodal_reserve_bytes=multimodal,
        page_size=page,
        context_len=context_len,
        chunked_prefill_size=chunked,
        max_prefill_tokens=(
            chunked if build == SEED else max_prefill_tokens or DEFAULT_MAX_PREFILL_TOKENS
        ),
        speculative=spec,
        num_draft_tokens=draft_tokens,
        requested_max_running_requests=max_running_requests,
        is_hybrid_mamba=model.is_hybrid_mamba,
    )

    def failed(failure: PlanFailure, **fields: Any) -> MemoryPlan:
        return MemoryPlan(**base, **fields, warnings=tuple(warnings), failure=failure)

    if avail <= 0:
        return failed(
            _fail(
                "cuda_oom_weights",
                "torch.OutOfMemoryError",
                f"CUDA out of memory. Tried to allocate {weights / GIB:.2f} GiB. GPU 0 has a total "
                f"capacity of {gpu_total_bytes / GIB:.2f} GiB of which {max(pre, 0) / GIB:.2f} GiB "
                "is free.",
                phase="load_weights",
            )
        )
    if build == SEED and rest <= 0:
        return failed(_weights_leave_no_memory(fraction, avail, pre, build))
    strategy = resolve_strategy(
        mamba_radix_cache_strategy,
        disable_radix_cache,
        page,
        overlap,
        architecture=model.architecture,
        build=build,
    )
    ratio = slots_per_request(strategy, disable_radix_cache, overlap)
    mamba = carve_mamba(
        model,
        rest,
        max_mamba_cache_size=max_mamba_cache_size,
        ratio=ratio,
        running=running,
        disable_radix_cache=disable_radix_cache,
        mamba_full_memory_ratio=mamba_full_memory_ratio,
        draft_tokens=draft_tokens,
        ssm_dtype=mamba_ssm_dtype,
        build=build,
    )
    if mamba.failure is not None:
        return failed(mamba.failure)
    mamba_fields: dict[str, Any] = dict(
        max_mamba_cache_size=mamba.slots,
        mamba_slots_per_request=ratio if model.is_hybrid_mamba else 0,
        mamba_strategy=strategy if model.is_hybrid_mamba else "",
        conv_state_bytes=mamba.conv_bytes,
        ssm_state_bytes=mamba.ssm_bytes,
        intermediate_reserve_bytes=mamba.intermediate_reserve_bytes,
    )
    rest = mamba.rest_after_bytes
    if rest <= 0:
        no_room = (
            _not_enough(fraction, build)
            if build == SEED
            else _weights_leave_no_memory(fraction, avail, pre, build)
        )
        return failed(no_room, **mamba_fields)
    budgeted = spec and build in model.draft_kv_budgeted_builds
    cell = model.kv_bytes_per_token + (model.draft_kv_bytes_per_token if budgeted else 0)
    tokens = rest // cell // page * page
    if max_total_tokens is not None:
        if max_total_tokens > tokens:
            warnings.append(
                f"max_total_tokens={max_total_tokens} is larger than the profiled value {tokens}. "
                "Use the profiled value instead."
            )
        tokens = min(tokens, max_total_tokens // page * page)
    if tokens <= 0:
        return failed(_not_enough(fraction, build), **mamba_fields)

    cap = resolve_running(
        tokens,
        context_len,
        running,
        mamba_slots=mamba.slots if model.is_hybrid_mamba else None,
        ratio=ratio,
        build=build,
    )
    warnings.extend(cap.warnings)
    if cap.failure is not None:
        return failed(cap.failure, **mamba_fields)
    effective = cap.effective
    inter_ssm, inter_conv = intermediate_allocation(
        model,
        mamba,
        effective_running=effective,
        draft_tokens=draft_tokens,
        ssm_dtype=mamba_ssm_dtype,
        build=build,
    )
    mamba_fields.update(intermediate_ssm_bytes=inter_ssm, intermediate_conv_bytes=inter_conv)
    mamba_allocated = mamba.conv_bytes + mamba.ssm_bytes + inter_ssm + inter_conv
    kv_each = tokens * model.kv_bytes_per_token // 2
    draft_each = tokens * model.draft_kv_bytes_per_token // 2 if spec else 0
    after_pools = avail - mamba_allocated - 2 * kv_each - 2 * draft_each
    capture_bs = 0 if disable_cuda_graph else min(graph_max_bs, effective)
    graph = model.graph_base_bytes + model.graph_bytes_per_bs * capture_bs if capture_bs else 0
    activations = chunked * model.activation_bytes_per_token
    failure = None
    if capture_bs and after_pools < graph + activations:
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
        capped_by_mamba=cap.capped_by_mamba,
        reduced_by_kv=cap.reduced_by_kv,
        cuda_graph_max_bs=capture_bs,
        graph_bytes=graph,
        available_after_pools_bytes=after_pools,
        available_gpu_mem_bytes=after_pools - graph,
        warnings=tuple(warnings),
        failure=failure,
    )

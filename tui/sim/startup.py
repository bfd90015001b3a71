"""The scheduler's startup: SGLang's phases and allocation lines, in 0.5.23's order.

``srt/model_executor/model_runner.py`` and ``srt/mem_cache/kv_cache_configurator.py``: memory
baseline, weight load (and the draft's), the multimodal reserve, the max_running_requests
warnings (0.5.23 resolves the cap before allocating any pool), the Mamba line, the KV line(s) and
``Memory pool end``, CUDA-graph capture, then the scheduler's summary line (``srt/managers/
scheduler.py``). The seed build printed the cap warning after the Mamba line. The scheduler child
holds the memory as each phase allocates it; a failure is returned for the caller to crash the
way SGLang's scheduler does.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from tui.sglang.builds import SEED
from tui.sglang.models import CUDA_CONTEXT_BYTES
from tui.sglang.plan_types import MemoryPlan, PlanFailure
from tui.sim import logfmt
from tui.sim.children import SchedulerChild
from tui.sim.config import Emitter, SimConfig

PHASE_SECONDS: dict[str, float] = {
    "import": 5.0,
    "baseline": 1.0,
    "weights": 16.0,
    "draft": 2.0,
    "pools": 1.5,
    "capture": 5.0,
    "warmup": 2.5,
}
"""Real-time length of each startup phase (the seed's servers were ready in ~30-35 s)."""


@dataclass
class StartupTimes:
    """What the engine's startup-timings line and ``/server_info`` report (seconds)."""

    load_weight: float = 0.0
    """Target and draft weight loading."""
    kv_cache_allocation: float = 0.0
    """Pool sizing and allocation."""
    cuda_graph: dict[str, float] = field(
        default_factory=lambda: dict.fromkeys(logfmt.GRAPH_PHASES, 0.0)
    )
    """Capture time per graph phase."""

    def as_dict(self, scheduler_e2e: float, tokenizer_e2e: float) -> dict[str, object]:
        """The engine's ``startup_time`` (``srt/observability/startup_time.py``)."""
        return {
            "load_weight": self.load_weight,
            "kv_cache_allocation": self.kv_cache_allocation,
            "scheduler_e2e": scheduler_e2e,
            "cuda_graph": dict(self.cuda_graph),
            "tokenizer_e2e": tokenizer_e2e,
        }


async def phase(cfg: SimConfig, name: str, fraction: float = 1.0) -> float:
    """Sleep through a startup phase (scaled); returns the simulated seconds it stood for."""
    seconds = PHASE_SECONDS[name] * fraction
    await asyncio.sleep(seconds * cfg.startup_scale)
    return seconds


def real_oom(message: str, where: str) -> PlanFailure:
    """A real CUDA OOM from the GPU-backed child, as SGLang's traceback would end."""
    return PlanFailure("cuda_oom_real", "torch.OutOfMemoryError", message, phase=where)


def pool_warnings(plan: MemoryPlan) -> list[str]:
    """The plan's warnings that SGLang prints around the pools (not the cap's reset notice)."""
    return [w for w in plan.warnings if not w.startswith("Max running requests is reset")]


async def allocate_pools(
    cfg: SimConfig, emit: Emitter, times: StartupTimes, mla: bool, warnings_after_mamba: bool
) -> PlanFailure | None:
    """The pools: the max_running_requests warnings, the Mamba line, the KV pool's line and
    ``Memory pool end`` (then the draft's two, with speculative decoding), the pools phase
    before the draft's lines timed into ``times``.

    Args:
        cfg: the server's configuration.
        emit: the log writer.
        times: its ``kv_cache_allocation`` is set.
        mla: the KV line in its MLA form.
        warnings_after_mamba: the warnings after the Mamba line (the seed build's order), not
            before it.

    Returns:
        The plan's failure when it fails in the memory pool (after the warnings), else None.
    """
    plan = cfg.plan
    if not warnings_after_mamba:
        for warning in pool_warnings(plan):
            emit(warning, info=False)
    if plan.failure is not None and plan.failure.phase == "memory_pool":
        return plan.failure
    if plan.is_hybrid_mamba:
        emit(logfmt.mamba_line(plan))
    if warnings_after_mamba:
        for warning in pool_warnings(plan):
            emit(warning, info=False)
    emit(logfmt.kv_line(plan.max_total_num_tokens, plan.k_bytes, plan.v_bytes, plan.build, mla))
    draft_kv = plan.draft_k_bytes + plan.draft_v_bytes
    emit(logfmt.memory_pool_end_line(plan.available_after_pools_bytes + draft_kv))
    times.kv_cache_allocation = await phase(cfg, "pools")
    if plan.speculative:
        emit(
            logfmt.kv_line(
                plan.max_total_num_tokens, plan.draft_k_bytes, plan.draft_v_bytes, plan.build, mla
            )
        )
        emit(logfmt.memory_pool_end_line(plan.available_after_pools_bytes))
    return None


async def start_scheduler(
    cfg: SimConfig, emit: Emitter, child: SchedulerChild, times: StartupTimes
) -> PlanFailure | None:
    """Run the scheduler's startup phases, printing SGLang's lines in order.

    Args:
        cfg: the server's configuration.
        emit: the log writer.
        child: the scheduler child (it holds the memory).
        times: filled with the phases' durations.

    Returns:
        The failure to crash with, or None when the summary line was printed.
    """
    plan, model = cfg.plan, cfg.model
    child.publish(CUDA_CONTEXT_BYTES, 0.0)
    await child.wait_up()
    emit(logfmt.memory_baseline_line(CUDA_CONTEXT_BYTES))
    await phase(cfg, "baseline")
    begin = plan.pre_bytes - plan.before_weights_bytes
    emit(logfmt.load_weight_begin_line(begin))
    elapsed = await phase(cfg, "weights")
    times.load_weight += elapsed
    if plan.failure is not None and plan.failure.phase == "load_weights" and not cfg.cuda_backing:
        return plan.failure
    after_target = begin - plan.weight_bytes
    emit(logfmt.load_weight_end_line(model, elapsed, after_target, plan.weight_bytes))
    held = CUDA_CONTEXT_BYTES + plan.before_weights_bytes + plan.weight_bytes
    if (oom := child.publish(held, 0.0)) is not None:
        return real_oom(oom, "load_weights")
    if plan.speculative:
        emit(logfmt.load_weight_begin_line(after_target))
        elapsed = await phase(cfg, "draft")
        times.load_weight += elapsed
        emit(
            logfmt.load_weight_end_line(
                model, elapsed, plan.avail_after_weights_bytes, plan.draft_weight_bytes, draft=True
            )
        )
    if plan.multimodal_reserve_bytes:
        emit(logfmt.multimodal_reserve_line(plan.multimodal_reserve_bytes))
    mla, seed = model.kv_layout == "mla", plan.build == SEED
    if (failure := await allocate_pools(cfg, emit, times, mla, seed)) is not None:
        return failure
    if (oom := child.publish(plan.resident_bytes - plan.graph_bytes, 0.0)) is not None:
        return real_oom(oom, "memory_pool")
    if cfg.cuda_backing:
        # Capture for real: the graphs plus the chunked-prefill activations must fit in what the
        # static fraction left free; if they do not, the allocation fails as SGLang's does.
        peak = plan.resident_bytes + model.activation_bytes_per_token * plan.chunked_prefill_size
        if (oom := child.publish(peak, 0.0)) is not None:
            return real_oom(oom, "cuda_graph")
    return await _capture(cfg, emit, child, times)


async def _capture(
    cfg: SimConfig, emit: Emitter, child: SchedulerChild, times: StartupTimes
) -> PlanFailure | None:
    plan = cfg.plan
    names = logfmt.graph_names(plan)
    avail = plan.available_after_pools_bytes
    for name in names:
        emit(logfmt.capture_begin_line(name, avail))
        elapsed = await phase(cfg, "capture", 1 / len(names))
        times.cuda_graph[logfmt.graph_phase(name)] = elapsed
        failure = plan.failure
        if failure is not None and failure.phase == "cuda_graph" and not cfg.cuda_backing:
            return failure
        used = plan.graph_bytes // len(names)
        avail -= used
        emit(logfmt.capture_end_line(name, plan.cuda_graph_max_bs, elapsed, used, avail))
    child.publish(plan.resident_bytes, 0.0)
    emit(logfmt.summary_line(plan))
    return None

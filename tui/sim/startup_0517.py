"""The scheduler's startup in SGLang 0.5.17's order and words (``--sim-build 0.5.17``).

What a real 0.5.17 server printed (``tests/fixtures/real_sglang/0.5.17``), line kind by line kind:
``Init torch distributed begin.`` and ``... ends. elapsed=.., mem usage=..`` (no ``Memory baseline
taken``), ``Load weight begin`` / ``Load weight end`` (no ``dtype=`` for an unquantised model); with
speculative decoding the same four lines again for the draft (``type=...MTP``); no multimodal
reserve line; the max_running_requests cap warning before the Mamba line; the Mamba line, the KV
line and ``Memory pool end`` (twice the last two with a draft); the hybrid model's kernel lines
(per worker); then either ``Disable prefill CUDA graph because ...`` (per worker, with
``--disable-cuda-graph``) or the prefill graphs by token count and the decode graphs by batch size
with their tqdm bars; the summary line; the tree cache's lines. The memory numbers are the
planner's for the plan's build (``tui.sglang.memory``).
"""

from __future__ import annotations

from tui.sglang.models import CUDA_CONTEXT_BYTES
from tui.sglang.plan_types import PlanFailure
from tui.sim import lines_0517 as lines
from tui.sim import logfmt
from tui.sim.children import SchedulerChild
from tui.sim.config import Emitter, SimConfig
from tui.sim.startup import StartupTimes, allocate_pools, phase, real_oom


def graphs_disabled(cfg: SimConfig) -> bool:
    """``--disable-cuda-graph`` (or both graph backends ``disabled``): nothing is captured."""
    args = cfg.server_args
    both_off = (
        args.get("cuda_graph_backend_decode") == "disabled"
        and args.get("cuda_graph_backend_prefill") == "disabled"
    )
    return bool(args.get("disable_cuda_graph")) or both_off


async def start_scheduler_0517(
    cfg: SimConfig, emit: Emitter, child: SchedulerChild, times: StartupTimes
) -> PlanFailure | None:
    """``tui.sim.startup.start_scheduler`` (same arguments, same return) in SGLang 0.5.17's order
    and words."""
    plan, model = cfg.plan, cfg.model
    child.publish(CUDA_CONTEXT_BYTES, 0.0)
    await child.wait_up()
    emit(lines.dist_init_begin_line())
    elapsed = await phase(cfg, "baseline")
    emit(lines.dist_init_end_line(elapsed, CUDA_CONTEXT_BYTES))
    emit(logfmt.load_weight_begin_line(plan.pre_bytes))
    elapsed = await phase(cfg, "weights")
    times.load_weight += elapsed
    if plan.failure is not None and plan.failure.phase == "load_weights" and not cfg.cuda_backing:
        return plan.failure
    after_target = plan.pre_bytes - plan.weight_bytes
    emit(lines.load_weight_end_line(model, elapsed, after_target, plan.weight_bytes))
    if (oom := child.publish(CUDA_CONTEXT_BYTES + plan.weight_bytes, 0.0)) is not None:
        return real_oom(oom, "load_weights")
    if plan.speculative:
        # The draft worker: its own (empty) torch distributed init, then its weights.
        emit(lines.dist_init_begin_line())
        emit(lines.dist_init_end_line(0.0, 0))
        emit(logfmt.load_weight_begin_line(after_target))
        elapsed = await phase(cfg, "draft")
        times.load_weight += elapsed
        after_draft = plan.avail_after_weights_bytes
        emit(
            lines.load_weight_end_line(
                model, elapsed, after_draft, plan.draft_weight_bytes, draft=True
            )
        )
    # The cap warning before the Mamba line, the KV line in its pre-MLA form.
    if (failure := await allocate_pools(cfg, emit, times, False, False)) is not None:
        return failure
    if (oom := child.publish(plan.resident_bytes - plan.graph_bytes, 0.0)) is not None:
        return real_oom(oom, "memory_pool")
    if plan.is_hybrid_mamba:
        for line in lines.hybrid_backend_lines(plan.speculative):
            emit(line)
    if graphs_disabled(cfg):
        for _ in range(2 if plan.speculative else 1):
            emit(lines.prefill_graph_disabled_line())
    else:
        if cfg.cuda_backing:
            activations = model.activation_bytes_per_token * plan.chunked_prefill_size
            peak = plan.resident_bytes + activations
            if (oom := child.publish(peak, 0.0)) is not None:
                return real_oom(oom, "cuda_graph")
        failure = await _capture(cfg, emit, times)
        if failure is not None:
            return failure
    child.publish(plan.resident_bytes, 0.0)
    emit(logfmt.summary_line(plan))
    if plan.is_hybrid_mamba:
        radix = not cfg.server_args.get("disable_radix_cache")
        for line in lines.tree_cache_lines(radix):
            emit(line)
    return None


async def _capture(cfg: SimConfig, emit: Emitter, times: StartupTimes) -> PlanFailure | None:
    """The graphs 0.5.17 captures: the target's prefill graphs by token count (not with a draft),
    then the decode graphs by batch size (with a draft: the target's verify graphs and the
    draft's), each with its tqdm bar."""
    plan = cfg.plan
    spec = plan.speculative
    avail = plan.available_after_pools_bytes
    max_bs = max(plan.cuda_graph_max_bs, 1)
    graphs: list[tuple[str, bool, list[int], int]] = []
    if not spec:
        tokens = lines.prefill_capture_sizes(plan.chunked_prefill_size)
        graphs.append(("target prefill", True, tokens, 0))
        graphs.append(("target decode", False, lines.decode_capture_sizes(max_bs, False), 1))
    else:
        sizes = lines.decode_capture_sizes(max_bs, True)
        graphs += [
            ("target verify", False, sizes, plan.num_draft_tokens),
            ("draft decode", False, sizes, 1),
            ("draft extend", False, sizes, plan.num_draft_tokens),
        ]
    used_each = plan.graph_bytes // len(graphs)
    for name, prefill, sizes, per_req in graphs:
        if prefill:
            emit(lines.prefill_capture_begin_line(sizes, avail))
        else:
            emit(lines.decode_capture_begin_line(name, per_req, sizes, avail))
        emit.raw(lines.capture_bar_start(len(sizes)))
        step = used_each // max(len(sizes), 1)
        elapsed = 0.0
        for done, size in enumerate(reversed(sizes)):
            emit.raw(lines.capture_bar(prefill, size, avail, done, len(sizes)))
            elapsed += await phase(cfg, "capture", 1 / (len(graphs) * len(sizes)))
            avail -= step
        emit.raw(lines.capture_bar(prefill, sizes[0], avail, len(sizes), len(sizes)) + "\n")
        failure = plan.failure
        if failure is not None and failure.phase == "cuda_graph" and not cfg.cuda_backing:
            return failure
        times.cuda_graph[logfmt.graph_phase(name)] = elapsed
        emit(lines.capture_end_line(name, elapsed, used_each, avail))
    return None

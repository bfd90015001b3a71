"""The JSON bodies of the simulated server's informational endpoints, in 0.5.23's shapes.

* ``/model_info``: ``srt/entrypoints/http_server.py`` ``model_info``.
* ``/server_info``: ``build_server_info`` (``srt/utils/common.py``: the resolved args,
  ``launch_command``, the scheduler's init info ``status/max_total_num_tokens/max_req_input_len/
  startup_time``, ``kv_events``) plus ``startup_time``, ``internal_states`` (per DP rank: the
  resolved args, ``effective_max_running_requests_per_dp``, ``last_gen_throughput``,
  ``memory_usage`` from ``scheduler_components/memory_usage.py``: ``weight``, ``kvcache``,
  ``startup_available``, ``token_capacity``, ``token_capacity_swa``, ``graph`` per phase),
  ``version`` and ``frontend``.
* ``/v1/loads``: ``srt/entrypoints/v1_loads.py`` over ``managers/load_snapshot.py``
  ``LoadSnapshot.to_dict``: an ISO timestamp, the accelerator's name, and per rank the core
  scalars then the ``memory``, ``speculative`` (only once a speculative step ran),
  ``disaggregation`` and ``queues`` sections; ``include=`` selects sections.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from tui.sglang.builds import SGLANG_0_5_17
from tui.sglang.models import GIB
from tui.sim import logfmt
from tui.sim.state import SGLANG_VERSION, SimState, sglang_version

LOAD_SECTIONS = frozenset({"core", "memory", "spec", "lora", "disagg", "queues", "all"})
"""``include=`` values ``/v1/loads`` accepts."""


def model_info_body(state: SimState) -> dict[str, Any]:
    """``/model_info``."""
    return {
        "model_path": state.model_path,
        "served_model_name": state.served_model_name,
        "tokenizer_path": state.model_path,
        "is_generation": True,
        "preferred_sampling_params": None,
        "weight_version": "default",
        "load_format": "auto",
        "reasoning_parser": None,
        "tool_call_parser": None,
        "disaggregation_mode": "null",
        "has_image_understanding": state.model.is_multimodal,
        "has_audio_understanding": False,
        "model_type": "qwen3_5" if state.plan.is_hybrid_mamba else "llama",
        "architectures": [state.model.architecture],
    }


def graph_memory(state: SimState) -> dict[str, float]:
    """Captured graph memory (GB) per phase, every phase present."""
    plan = state.plan
    names = logfmt.graph_names(plan)
    usage = dict.fromkeys(logfmt.GRAPH_PHASES, 0.0)
    for name in names:
        usage[logfmt.graph_phase(name)] = round(plan.graph_bytes / len(names) / GIB, 3)
    return usage


def memory_usage(state: SimState) -> dict[str, Any]:
    """``internal_states[i].memory_usage``."""
    plan = state.plan
    return {
        "weight": round((plan.weight_bytes + plan.draft_weight_bytes) / GIB, 3),
        "kvcache": round(plan.kv_bytes / GIB, 3),
        "startup_available": round(plan.available_gpu_mem_bytes / GIB, 3),
        "token_capacity": plan.max_total_num_tokens,
        "token_capacity_swa": None,
        "graph": graph_memory(state),
    }


def server_info_body(state: SimState) -> dict[str, Any]:
    """``/server_info`` (and the deprecated ``/get_server_info``)."""
    if state.plan.build == SGLANG_0_5_17:
        return _server_info_0517(state)
    plan, sch = state.plan, state.scheduler
    internal = dict(state.server_args)
    internal.update(
        max_mamba_cache_size=plan.max_mamba_cache_size or None,
        world_size=1,
        startup_time=state.startup_time,
        effective_max_running_requests_per_dp=plan.max_running_requests,
        last_gen_throughput=sch.last_gen_throughput,
        memory_usage=memory_usage(state),
    )
    if plan.speculative:
        internal["avg_spec_accept_length"] = sch.accept
    body = dict(state.server_args)
    body.update(
        launch_command=state.launch_command,
        status="ready",
        max_total_num_tokens=plan.max_total_num_tokens,
        max_req_input_len=plan.max_total_num_tokens - 5,
        kv_events=None,
        startup_time=state.startup_time,
        internal_states=[internal],
        version=SGLANG_VERSION,
        frontend="python",
    )
    return body


def _server_info_0517(state: SimState) -> dict[str, Any]:
    """0.5.17's ``/server_info`` as a real one answered (``tests/fixtures/real_sglang/0.5.17``):
    the server args (``max_running_requests`` as given, or 48 once reset for speculative
    decoding; ``max_mamba_cache_size`` as given), the scheduler's ``status``,
    ``max_total_num_tokens`` and ``max_req_input_len``, ``startup_time``, ``version`` and
    ``kv_events``; no ``launch_command`` nor ``frontend``. Each internal state repeats the args
    with the resolved Mamba pool, ``startup_time``, ``last_gen_throughput``, ``memory_usage`` and
    ``effective_max_running_requests_per_dp`` (no ``world_size``, no ``avg_spec_accept_length``)."""
    plan, sch = state.plan, state.scheduler
    internal = dict(state.server_args)
    internal.update(
        max_mamba_cache_size=plan.max_mamba_cache_size or None,
        startup_time=state.startup_time,
        last_gen_throughput=sch.last_gen_throughput,
        memory_usage=memory_usage(state),
        effective_max_running_requests_per_dp=plan.max_running_requests,
    )
    body = dict(state.server_args)
    body.update(
        status="ready",
        max_total_num_tokens=plan.max_total_num_tokens,
        max_req_input_len=min(plan.context_len - 1, plan.max_total_num_tokens - 1) - 5,
        startup_time=state.startup_time,
        internal_states=[internal],
        version=sglang_version(plan.build),
        kv_events=None,
    )
    return body


def get_load_body(state: SimState) -> list[dict[str, Any]]:
    """``/get_load`` (0.5.17: a shim over ``/v1/loads``' core section; ``num_reqs`` counts the
    running and the waiting requests, ``ts_tic`` is ``time.perf_counter()``)."""
    sch = state.scheduler
    used = sch.used_tokens()
    total = used + sum(r.prefill_left for r in sch.waiting)
    return [
        {
            "dp_rank": 0,
            "num_reqs": len(sch.running) + len(sch.waiting),
            "num_waiting_reqs": len(sch.waiting),
            "num_tokens": total,
            "num_pending_tokens": total - used,
            "ts_tic": time.perf_counter(),
        }
    ]


def _load(state: SimState) -> dict[str, Any]:
    plan, sch = state.plan, state.scheduler
    used = sch.used_tokens()
    waiting_tokens = sum(r.prefill_left for r in sch.waiting)
    load: dict[str, Any] = {
        "timestamp": time.time(),
        "dp_rank": 0,
        "num_running_reqs": len(sch.running),
        "num_waiting_reqs": len(sch.waiting),
        "num_waiting_uncached_tokens": waiting_tokens,
        "num_used_tokens": used,
        "num_total_tokens": used + waiting_tokens,
        "num_active_tokens": used + waiting_tokens,
        "num_prealloc_ready_tokens": 0,
        "max_total_num_tokens": plan.max_total_num_tokens,
        "max_running_requests": plan.max_running_requests,
        "token_usage": round(sch.token_usage(), 4),
        "gen_throughput": round(sch.last_gen_throughput, 2),
        "cache_hit_rate": 0.0,
        "utilization": round(sch.utilization() / 100.0, 4),
        "total_prefill_uncached_tokens": int(sch.realtime_tokens["prefill_compute"]),
        "total_prefill_busy_us": 0,
        "decode_moments": None,
    }
    load["memory"] = {
        "weight_gb": round((plan.weight_bytes + plan.draft_weight_bytes) / GIB, 3),
        "kv_cache_gb": round(plan.kv_bytes / GIB, 3),
        "graph_gb": round(plan.graph_bytes / GIB, 3),
        "token_capacity": plan.max_total_num_tokens,
    }
    if plan.speculative and sch.steps > 0:
        load["speculative"] = {
            "accept_length": sch.accept,
            "accept_rate": (sch.accept - 1) / max(plan.num_draft_tokens - 1, 1),
        }
    load["disaggregation"] = {
        "mode": "null",
        "prefill_bootstrap_queue_reqs": 0,
        "prefill_inflight_queue_reqs": 0,
        "decode_prealloc_queue_reqs": 0,
        "decode_transfer_queue_reqs": 0,
        "decode_retracted_queue_reqs": 0,
        "kv_transfer_speed_gb_s": 0.0,
        "kv_transfer_latency_ms": 0.0,
    }
    load["queues"] = {
        "waiting": len(sch.waiting),
        "grammar": 0,
        "paused": 0,
        "retracted": sch.last_retracted,
        "prealloc_ready": 0,
    }
    return load


def loads_body(state: SimState, include: str | None) -> dict[str, Any]:
    """``/v1/loads`` (``include``: comma-separated sections, default all).

    Raises:
        ValueError: an unknown section, with SGLang's message.
    """
    load = _load(state)
    if include:
        wanted = {s.strip() for s in include.split(",")}
        if not wanted <= LOAD_SECTIONS:
            raise ValueError(
                f"Invalid include sections: {wanted - LOAD_SECTIONS}. "
                f"Valid options: {sorted(LOAD_SECTIONS)}"
            )
        if "all" not in wanted:
            names = {"memory": "memory", "speculative": "spec", "lora": "lora"}
            names |= {"disaggregation": "disagg", "queues": "queues"}
            for section, name in names.items():
                if name not in wanted:
                    load.pop(section, None)
    return {
        "timestamp": datetime.now(UTC).isoformat(),
        "version": sglang_version(state.plan.build),
        "accelerator": state.gpu_name,
        "num_accelerators": 1,
        "loads": [load],
    }


def loads_prometheus(body: dict[str, Any]) -> str:
    """``/v1/loads?format=prometheus``: every numeric scalar as a ``sglang_*`` gauge."""
    prefixes = {"speculative": "spec", "disaggregation": "disagg"}
    samples: dict[str, list[tuple[int, float]]] = {}
    for load in body["loads"]:
        rank = load["dp_rank"]
        for key, value in load.items():
            if key == "dp_rank":
                continue
            if isinstance(value, dict):
                for sub, sub_value in value.items():
                    if isinstance(sub_value, int | float) and not isinstance(sub_value, bool):
                        name = f"sglang_{prefixes.get(key, key)}_{sub}"
                        samples.setdefault(name, []).append((rank, sub_value))
            elif isinstance(value, int | float) and not isinstance(value, bool):
                samples.setdefault(f"sglang_{key}", []).append((rank, value))
    lines = []
    for name, values in samples.items():
        lines.append(f"# TYPE {name} gauge")
        lines.extend(f'{name}{{dp_rank="{rank}"}} {value}' for rank, value in values)
    return "\n".join(lines) + "\n"

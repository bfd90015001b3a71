"""Which SGLang build the memory planner and the simulator imitate.

* ``0.5.23`` (the default): SGLang 0.5.23 as its source reads. ``KVCacheConfigurator``
  (``srt/mem_cache/kv_cache_configurator.py``) reserves 100 MiB for a multimodal model's runtime
  allocations, carves the Mamba pool *before* the "Loaded weights leave no GPU memory" check (so
  an auto-sized pool that gets nothing raises ``Not enough GPU memory for hybrid...`` and an
  explicit ``--max-mamba-cache-size`` that eats the rest raises the ``ValueError``), resolves
  max_running_requests (the cap WARNING) before any pool is allocated, stores the speculative
  intermediate conv window compactly (``srt/mem_cache/memory_pool.py``: D + K - 2 columns instead
  of D * (K - 1)), prints ``dtype:`` in the KV line and ``max_prefill_tokens=16384`` (the flag's
  default) in the summary line.
* ``0.5.17``: the build the integrator's GPU machine runs (the newest that pins torch 2.11). Read
  against 0.5.23 file by file, its arithmetic is 0.5.23's but for: no multimodal reserve
  (``mm_runtime_reservation_gb`` does not exist yet: ``rest = avail - slack``); no ``max(1, ...)``
  floor on the requested max_running_requests (``requested // attn_dp``) nor on the slots the
  ``--disable-radix-cache`` branch takes; the mamba radix-cache strategy resolves only for the
  architectures of its own lists (``srt/arg_groups/overrides.py``: ``Qwen3_5ForCausalLM`` is in
  neither, so its ``auto`` stays unresolved: 3 slots per request, no extra buffer); and an
  EAGLE/MTP draft counts in the token budget only when a draft model path is set
  (``model_runner_components/spec_aux_hidden_state.py``). Its texts (the cap warning, the
  failures, the KV and Mamba lines, the summary line) are 0.5.23's word for word.
* ``seed``: the older build the seed's servers ran (``/work/shared/seed`` story, 2026-05-09): no
  multimodal reserve, the ValueError checked before the Mamba carve and "Not enough memory" after
  it, a dense intermediate conv window (0.45GB where 0.5.23 prints 0.23GB), no ``dtype:`` in the KV
  line, the cap warning after the Mamba line. Its formulas reproduce the seed's allocation lines
  exactly (798,080 KV tokens with the aggressive flags on a B200); ``--sim-build seed`` pins it.
"""

from __future__ import annotations

from typing import Literal

Build = Literal["0.5.23", "0.5.17", "seed"]
"""An SGLang build the planner knows."""

SGLANG_0_5_23: Build = "0.5.23"
"""SGLang 0.5.23, the default."""

SGLANG_0_5_17: Build = "0.5.17"
"""SGLang 0.5.17, the real server of the GPU machine."""

SEED: Build = "seed"
"""The older build that printed the seed story's allocation lines."""

BUILDS: tuple[Build, ...] = (SGLANG_0_5_23, SGLANG_0_5_17, SEED)
"""Every build, default first (the ``--sim-build`` choices)."""

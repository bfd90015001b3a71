"""Typed events parsed from SGLang server log lines.

One :class:`LogEvent` per recognised line. ``kind`` names what the line says; ``fields`` holds the
numbers and labels it carries, under stable snake_case names (the contract printed by
``gpufleet logs parse``). Extra fields may appear; listed ones never change meaning.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

FieldValue = int | float | str | bool
"""A parsed field: counts are ``int``, sizes/ratios ``float``, labels ``str``, flags ``bool``."""

DECODE = "decode"
"""A ``Decode batch`` stats line: running_req, queue_req, gen_throughput, token_usage, ..."""
PREFILL = "prefill"
"""A ``Prefill batch`` (or v0.1 ``new fill batch``) line: new_seq, new_token, cached_token, ..."""
KV_CACHE = "kv_cache"
"""``KV Cache is allocated``: tokens, k_gb, v_gb or kv_gb, dtype when printed."""
MAMBA_CACHE = "mamba_cache"
"""``Mamba Cache is allocated``: max_mamba_cache_size, conv_gb, ssm_gb, intermediate_*_gb."""
POOL = "pool"
"""The ``max_total_num_tokens=...`` summary: the effective sizes the scheduler runs with."""
WEIGHTS = "weights"
"""``Load weight end``: mem_usage_gb, avail_mem_gb, elapsed_s, type, dtype or quant; ``draft``
True for a speculative draft's (``type=...MTP``, ``...NextN``, ``...Eagle...``)."""
WEIGHTS_BEGIN = "weights_begin"
"""``Load weight begin``: avail_mem_gb before the weights."""
MEMORY_BASELINE = "memory_baseline"
"""``Memory baseline taken`` / ``Init torch distributed ends``: mem_usage_gb."""
MEMORY_POOL_END = "memory_pool_end"
"""``Memory pool end``: avail_mem_gb after a pool (target or draft)."""
GRAPH_CAPTURE = "graph_capture"
"""CUDA graph capture: ``stage`` begin/end/bs, ``graph`` name, avail_mem_gb, elapsed_s, backend,
num_bs/max_bs (decode) or num_sizes/max_tokens (0.5.17's prefill graphs); ``stage`` disabled for
``Disable prefill CUDA graph because ...`` (``reason``)."""
CAP = "cap"
"""SGLang lowered max_running_requests (mamba state cache, or KV capacity)."""
RESET_48 = "reset_48"
"""``Max running requests is reset to 48 for speculative decoding``."""
PROFILED = "profiled"
"""``max_total_tokens=U is larger than the profiled value P``: the KV pool came out smaller."""
SERVER_ARGS = "server_args"
"""The ``server_args=`` line that opens every launch."""
UVICORN = "uvicorn"
"""uvicorn lifecycle lines: ``event`` started/waiting/startup_complete/running."""
ACCESS = "access"
"""An HTTP access line (``"POST /generate HTTP/1.1" 200``): frequent, not a rare event."""
SHUTDOWN = "shutdown"
"""Shutdown lines: ``event`` sigterm (``SIGTERM received``), draining (``Gracefully exiting...
Remaining number of requests N``, ``remaining``), force_exit (``Signal SIGTERM received while
health check failed. Force exiting.``)."""
READY = "ready"
"""``The server is fired up and ready to roll!``."""
ERROR = "error"
"""An OOM, crash or refused-start line: ``reason`` says which (see :data:`ERROR_REASONS`) and
``fatal`` whether the server is going down or cannot serve (False: one request failed)."""
DIST_INIT = "dist_init"
"""``Init torch distributed begin.``: a worker starts (the target's, then the draft's)."""
PROGRESS = "progress"
"""A tqdm bar: desc, percent, done, total; a CUDA-graph capture bar adds ``graph`` (prefill by
num_tokens, decode by bs), num_tokens or bs, avail_mem_gb."""
STARTUP_TIMINGS = "startup_timings"
"""``Engine startup timings (s): ...``: load_weight_s, kv_cache_allocation_s, scheduler_e2e_s,
cuda_graph_s (all graphs), tokenizer_e2e_s."""
TREE_CACHE = "tree_cache"
"""The prefix cache: ``stage`` init (``components``) or ready (``impl``, ``hybrid_ssm``, ...)."""
BACKEND = "backend"
"""The kernels a hybrid model runs with: ``what`` (linear_attention, gdn_kernel,
hybrid_linear_attention) and each choice (decode, prefill, verify, ...)."""
DEPRECATED = "deprecated"
"""A deprecated ``flag`` or ``endpoint`` was used, with its ``replacement`` when printed."""
WARNING = "warning"
"""A Python warning (``file.py:N: UserWarning: ...``): category, file, message."""
KILL_TREE = "kill_tree"
"""``kill_process_tree called``: parent_pid, include_parent (True: the process SIGKILLs itself,
exit code -9), pid."""
CRASH_DIAGNOSTICS = "crash_diagnostics"
"""The SIGQUIT handler's diagnostics: ``stage`` sleeping (``seconds``) or skipped."""
PRESSURE = "pressure"
"""Memory pressure the server survives for now: ``KV cache pool is full. Retract requests.``
(``reason`` retract, ``retracted_reqs``), the bare ``Prefill/Decode out of memory`` logger line
(``reason`` prefill_oom / decode_oom, ``tokens`` it tried to allocate); ``fatal`` is False."""

KINDS: frozenset[str] = frozenset(
    {
        DECODE,
        PREFILL,
        KV_CACHE,
        MAMBA_CACHE,
        POOL,
        WEIGHTS,
        WEIGHTS_BEGIN,
        MEMORY_BASELINE,
        MEMORY_POOL_END,
        GRAPH_CAPTURE,
        CAP,
        RESET_48,
        PROFILED,
        SERVER_ARGS,
        UVICORN,
        ACCESS,
        SHUTDOWN,
        READY,
        ERROR,
        PRESSURE,
        DIST_INIT,
        PROGRESS,
        STARTUP_TIMINGS,
        TREE_CACHE,
        BACKEND,
        DEPRECATED,
        WARNING,
        KILL_TREE,
        CRASH_DIAGNOSTICS,
    }
)
"""Every kind the parser emits."""

FREQUENT_KINDS: frozenset[str] = frozenset({DECODE, PREFILL, ACCESS})
"""Kinds printed all the time under load; the fast ingest path counts them, keeps the last."""

RARE_KINDS: frozenset[str] = KINDS - FREQUENT_KINDS
"""Kinds the console must never miss (allocations, caps, readiness, errors, ...)."""

ERROR_REASONS: frozenset[str] = frozenset(
    {
        "oom",
        "scheduler_exception",
        "sigquit",
        "killed",
        "illegal_memory_access",
        "warmup_failed",
        "health_check_failed",
        "watchdog_timeout",
        "port_in_use",
        "input_too_long",
        "subprocess_crashed",
        "detokenizer_exception",
        "scheduler_straggler",
        "bad_arguments",
        "exception",
    }
)
"""Values of an error event's ``reason`` field; ``exception`` is any other Python exception line."""

PRESSURE_REASONS: frozenset[str] = frozenset({"retract", "prefill_oom", "decode_oom"})
"""Values of a pressure event's ``reason`` field."""


def _frozen_fields(values: Mapping[str, FieldValue]) -> Mapping[str, FieldValue]:
    return MappingProxyType(dict(values))


@dataclass(frozen=True, slots=True)
class LogEvent:
    """One recognised log line."""

    kind: str
    """What the line says: one of :data:`KINDS`."""
    fields: Mapping[str, FieldValue] = field(default_factory=dict)
    """Parsed values under stable snake_case names (read-only)."""
    text: str = ""
    """The line's message without timestamp, rank tag or prefix junk."""
    stamp: str | None = None
    """The timestamp as printed (``2026-04-05 20:02:51`` or time-only ``16:43:29``), if any."""
    ranks: str | None = None
    """The rank tag as printed (``TP0``, ``DP1 TP1 EP1``), if any."""
    line: int = 0
    """1-based line number in the file when known, else 0."""

    def __post_init__(self) -> None:
        # A read-only copy, so a shared event can never be edited by one of its readers.
        if not isinstance(self.fields, MappingProxyType):
            object.__setattr__(self, "fields", _frozen_fields(self.fields))

    def get(self, name: str, default: Any = None) -> Any:
        """Return one field, or ``default`` when the line did not carry it."""
        return self.fields.get(name, default)

    def with_line(self, line: int) -> LogEvent:
        """Return the same event numbered ``line`` (1-based; 0 = unknown)."""
        return LogEvent(self.kind, self.fields, self.text, self.stamp, self.ranks, line)

    def to_dict(self) -> dict[str, Any]:
        """Return the flat JSON form: line, kind, the fields, stamp, ranks, text.

        Returns:
            A dict whose field keys never clash with the four envelope keys.
        """
        out: dict[str, Any] = {"line": self.line, "kind": self.kind}
        for key, value in self.fields.items():
            if key not in ("line", "kind", "stamp", "ranks", "text"):
                out[key] = value
        if self.stamp is not None:
            out["stamp"] = self.stamp
        if self.ranks is not None:
            out["ranks"] = self.ranks
        out["text"] = self.text
        return out

    def to_json(self) -> str:
        """Return :meth:`to_dict` as one line of JSON."""
        return json.dumps(self.to_dict(), ensure_ascii=False, separators=(", ", ": "))

"""The SGLang log lines gpufleet reads, one row each: how SGLang writes it and how it is read.

The simulator writes each line from its row's ``template`` (``tui.sim.logfmt``, and the planner's
cap warnings in ``tui.sglang.caps``); the log parser (``tui.logs.parser``) knows a line by its
row's ``marker`` and reads its fields with the row's ``fields``. One row, so a line the simulator
writes is a line the parser reads: ``tests/core/test_log_lines.py`` writes every row and parses it,
and the real lines of ``tests/fixtures/real_sglang`` are read by the same rows.

Each row is named for the claim of ``tui.sglang.releases`` that says which releases print it
(``mamba_line``, ``ready_line``...), or for what it is where no release differs
(``memory_pool_end``). ``event`` is the event kind the parser gives it (``tui.logs.events``).
The templates are 0.5.23's text; a release's variants (the seed build's KV line without
``dtype:``, 0.5.17's weights line without one) are the template's parameters.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

_GB = r"\s*([-\d.]+)\s*GB"


@dataclass(frozen=True)
class LogLine:
    """One kind of SGLang log line."""

    name: str
    """The release claim that has it (``tui.sglang.releases``), or what it is."""
    event: str
    """The event kind the parser gives it."""
    marker: str
    """A regular expression every such line matches (and no other line the parser reads)."""
    template: str
    """``str.format`` text the simulator writes (0.5.23's words)."""
    fields: tuple[tuple[str, str], ...] = ()
    """(field, regular expression whose first matching group is its value), for the parser."""

    @cached_property
    def pattern(self) -> re.Pattern[str]:
        """``marker``, compiled."""
        return re.compile(self.marker)

    @cached_property
    def field_patterns(self) -> tuple[tuple[str, re.Pattern[str]], ...]:
        """``fields``, compiled."""
        return tuple((name, re.compile(regex)) for name, regex in self.fields)

    def write(self, **values: object) -> str:
        """The line, as SGLang prints it, with ``values`` in the template."""
        return self.template.format(**values)

    def read(self, message: str) -> dict[str, str] | None:
        """Each field's text as printed (None: not a line of this kind)."""
        if not self.pattern.search(message):
            return None
        out: dict[str, str] = {}
        for name, pattern in self.field_patterns:
            match = pattern.search(message)
            if match:
                out[name] = next(g for g in match.groups() if g is not None)
        return out


AVAIL_MEM = r"avail(?:able)? mem(?:ory)?\s*=" + _GB
"""``avail mem=X GB`` (older eras: ``available memory=``)."""
MEM_USAGE = r"mem usage\s*=" + _GB
"""``mem usage=X GB``."""

WEIGHTS = LogLine(
    "weights_line",
    "weights",
    r"Load weight end",
    "Load weight end. elapsed={elapsed_s:.2f} s, type={arch}, {quant}"
    "avail mem={avail_gb} GB, mem usage={usage_gb} GB.",
    (
        ("elapsed_s", r"elapsed=\s*([\d.]+)\s*s"),
        ("type", r"\btype=\s*([\w.]+)"),
        ("dtype", r"\bdtype=\s*([\w.]+)"),
        ("quant", r"\bquant=\s*([\w.]+)"),
        ("fmt", r"\bfmt=\s*([\w.]+)"),
        ("avail_mem_gb", AVAIL_MEM),
        ("mem_usage_gb", MEM_USAGE),
    ),
)
"""``Load weight end``; ``quant`` is ``quant=fp8, fmt=e4m3, ``, ``dtype=torch.bfloat16, `` or
empty (0.5.17's unquantised model)."""

MAMBA = LogLine(
    "mamba_line",
    "mamba_cache",
    r"Mamba Cache is allocated",
    "Mamba Cache is allocated. max_mamba_cache_size: {slots}, "
    "conv_state size: {conv_gb}GB, ssm_state size: {ssm_gb}GB {speculative}",
    (
        ("max_mamba_cache_size", r"max_mamba_cache_size[:=]\s*(\d+)"),
        ("conv_gb", r"(?<!_)\bconv_state size:" + _GB),
        ("ssm_gb", r"(?<!_)\bssm_state size:" + _GB),
        ("intermediate_ssm_gb", r"intermediate_ssm_state_cache size:" + _GB),
        ("intermediate_conv_gb", r"intermediate_conv_window_cache size:" + _GB),
    ),
)
"""The Mamba pool, with SGLang's trailing space; ``speculative`` is ``MAMBA_SPECULATIVE`` or
empty."""

MAMBA_SPECULATIVE = (
    "intermediate_ssm_state_cache size: {ssm_gb}GB "
    "intermediate_conv_window_cache size: {conv_gb}GB "
)
"""The Mamba line's speculative-decoding parts."""

KV = LogLine(
    "kv_line_dtype",
    "kv_cache",
    r"KV Cache (?:is allocated|VA upper bound)",
    "KV Cache is allocated. {dtype}#tokens: {tokens}, {sizes}",
    (
        ("tokens", r"#tokens?:\s*(\d+)"),
        ("k_gb", r"\bK size:" + _GB),
        ("v_gb", r"\bV size:" + _GB),
        ("kv_gb", r"\bKV size:" + _GB),
        ("dtype", r"dtype:\s*([\w.]+)"),
    ),
)
"""A KV pool; ``dtype`` is ``dtype: torch.bfloat16, `` (empty in the seed build), ``sizes``
``K size: X GB, V size: Y GB`` or an MLA pool's ``KV size: X GB``."""

MEMORY_POOL_END = LogLine(
    "memory_pool_end",
    "memory_pool_end",
    r"Memory pool end",
    "Memory pool end. avail mem={avail_gb} GB",
    (("avail_mem_gb", AVAIL_MEM), ("mem_usage_gb", MEM_USAGE)),
)
"""After each pool (the target's, the draft's)."""

SUMMARY = LogLine(
    "pool_line",
    "pool",
    r"max_total_num_tokens?=\s*-?\d",
    "max_total_num_tokens={tokens}, chunked_prefill_size={chunked_prefill_size}, "
    "max_prefill_tokens={max_prefill_tokens}, max_running_requests={max_running_requests}, "
    "context_len={context_len}, available_gpu_mem={avail_gb} GB",
)
"""The scheduler's summary: the parser reads every ``key=value`` of it (a release may add some)."""

CAPPED = LogLine(
    "cap_warning",
    "cap",
    r"max_running_requests\s+(?:is|was)\s+capped\s+to\s+(\d+)",
    "max_running_requests is capped to {cap} by the mamba state cache "
    "(max_mamba_cache_size={slots}, {ratio} state slots per request). To raise it: increase "
    "--mamba-full-memory-ratio or --max-mamba-cache-size, or halve the state size with "
    "--mamba-ssm-dtype bfloat16.",
    (
        ("max_running_requests", r"capped\s+to\s+(\d+)"),
        ("max_mamba_cache_size", r"max_mamba_cache_size[:=]\s*(\d+)"),
        ("slots_per_request", r"(\d+)\s+state\s+slots?\s+per\s+request"),
    ),
)
"""The Mamba slots capped max running requests (a WARNING)."""

REDUCED = LogLine(
    "kv_reduced_warning",
    "cap",
    r"max_running_requests\s+was\s+reduced\s+from\s+the\s+requested\s+(\d+)\s+to\s+(\d+)",
    "max_running_requests was reduced from the requested {requested} to {effective} "
    "(per dp worker) due to the available KV cache capacity.",
    (
        ("requested", r"the\s+requested\s+(\d+)"),
        ("max_running_requests", r"the\s+requested\s+\d+\s+to\s+(\d+)"),
    ),
)
"""The KV capacity lowered the asked max running requests (a WARNING)."""

READY = LogLine(
    "ready_line",
    "ready",
    r"fired up and ready to roll",
    "The server is fired up and ready to roll!",
)
"""Readiness (the same text in every release)."""

LINES: tuple[LogLine, ...] = (
    WEIGHTS,
    MAMBA,
    KV,
    MEMORY_POOL_END,
    SUMMARY,
    CAPPED,
    REDUCED,
    READY,
)
"""Every row, for the tests that write and read them all."""

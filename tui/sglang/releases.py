"""What each SGLang release gpufleet knows has: endpoints, health, log lines, metrics (no I/O).

Every claim below was read from the releases' own source (their wheels: ``sglang/srt/...``) and
names the file and the text that shows it. ``tests/core/test_sglang_releases.py`` holds each claim
to the source of every release, 0.5.17 to 0.5.23: the text is found in exactly the releases the
claim says have it. A claim with neither ``since`` nor ``until`` is the same in all of them: worth
knowing too (0.5.17's batch lines, Mamba line and cap warning read as 0.5.23's do).

Flags are not here: each release's flag table (``tui.sglang.flagtable``) is that release's
parser itself, and ``aliases`` below reads the deprecated aliases out of it.

Consumers ask ``release(version).ready_endpoint`` (typed) or ``has(version, "ready_endpoint")``.
``python -m tui.sglang.releases_doc`` prints the differences as the Markdown tables of
``docs/sglang-versions.md``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from functools import cache

from tui.sglang.flagtable.table import known_versions, load_table, version_key

_HTTP = "sglang/srt/entrypoints/http_server.py"
_GRAPHS = "sglang/srt/model_executor/model_runner_components/cuda_graph_setup.py"
_POOLS = "sglang/srt/mem_cache/memory_pool.py"
_CAPS = "sglang/srt/mem_cache/kv_cache_configurator.py"
_REPORTER = "sglang/srt/managers/scheduler_components/metrics_reporter.py"
_USAGE = "sglang/srt/managers/scheduler_components/pool_stats_observer.py"
_METRICS = "sglang/srt/observability/metrics_collector.py"

CONSOLE_METRICS = (
    "sglang:num_running_reqs",
    "sglang:num_queue_reqs",
    "sglang:gen_throughput",
    "sglang:token_usage",
    "sglang:full_token_usage",
    "sglang:swa_token_usage",
    "sglang:mamba_usage",
    "sglang:cache_hit_rate",
    "sglang:spec_accept_length",
    "sglang:spec_accept_rate",
    "sglang:spec_num_steps",
    "sglang:max_total_num_tokens",
    "sglang:realtime_tokens_total",
    "sglang:generation_tokens_total",
    "sglang:prompt_tokens_total",
    "sglang:num_requests_total",
)
"""The ``/metrics`` gauges and counters the console reads (``tui.servers.payloads.METRIC_NAMES``):
the ``console_metrics`` claim holds every release to having each of them."""

CONSOLE_HISTOGRAMS = (
    "sglang:time_to_first_token_seconds",
    "sglang:inter_token_latency_seconds",
    "sglang:e2e_request_latency_seconds",
    "sglang:queue_time_seconds",
)
"""The latency histograms the console reads (``tui.servers.histogram.LATENCY_FAMILIES``), held to
every release by the same claim."""


@dataclass(frozen=True, slots=True)
class Claim:
    """One thing some releases have, and where their source shows it."""

    name: str
    """Identifier (a field of ``Release``)."""
    says: str
    """What it is, in words (the docs table's row)."""
    sources: tuple[str, ...]
    """Files of the wheel the evidence is in (any one of them: code moves between releases)."""
    evidence: tuple[str, ...]
    """Regular expressions all found in one source exactly in the releases that have it."""
    since: str | None = None
    """The first release with it; None: every release gpufleet knows."""
    until: str | None = None
    """The last release with it; None: still in the newest."""

    def holds(self, version: str) -> bool:
        """Whether release ``version`` has it."""
        key = version_key(version)
        after = self.since is None or key >= version_key(self.since)
        before = self.until is None or key <= version_key(self.until)
        return after and before

    def found_in(self, text: str) -> bool:
        """Whether one source's text shows it (every evidence pattern is in it)."""
        return all(re.search(pattern, text) for pattern in self.evidence)


CLAIMS: tuple[Claim, ...] = (
    # --- HTTP ---------------------------------------------------------------------------------
    Claim(
        "ready_endpoint",
        "`GET /ready`: 200 once warmed up and not paused, draining or unhealthy, at once",
        (_HTTP,),
        (r'@app\.get\("/ready"\)',),
        since="0.5.20",
    ),
    Claim(
        "health_endpoints",
        "`GET /health` and `/health_generate`: one handler",
        (_HTTP,),
        (r'@app\.get\("/health"\)\n@app\.get\("/health_generate"\)',),
    ),
    Claim(
        "health_generates",
        "`/health` generates one token (>= 1 s, up to 20 s) unless "
        "SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION=0",
        ("sglang/srt/environ.py",),
        (r"SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION = EnvBool\(True\)",),
    ),
    Claim(
        "health_503_while_starting",
        "`/health` answers 503 until the warmup request succeeded",
        (_HTTP,),
        (r"server_status == ServerStatus\.Starting:\n\s+return Response\(status_code=503\)",),
    ),
    Claim(
        "get_load_endpoint",
        "`GET /get_load` (deprecated shim of `/v1/loads`)",
        (_HTTP,),
        (r'@app\.get\("/get_load"\)',),
        until="0.5.20",
    ),
    Claim(
        "v1_loads_endpoint",
        "`GET /v1/loads`",
        ("sglang/srt/entrypoints/v1_loads.py",),
        (r'@router\.get\("/v1/loads"\)',),
    ),
    Claim(
        "server_info_endpoint",
        "`GET /server_info`, and the older `/get_server_info`",
        (_HTTP,),
        (r'@app\.get\("/server_info"\)', r'@app\.get\("/get_server_info"\)'),
    ),
    Claim(
        "server_info_version",
        "`/server_info` has `version` and `internal_states` (one per DP rank)",
        (_HTTP,),
        (r'"version": __version__,', r'"internal_states": internal_states,'),
    ),
    Claim(
        "server_info_effective_max_running",
        "`internal_states[i].effective_max_running_requests_per_dp` (the capped value)",
        (
            "sglang/srt/managers/scheduler.py",
            "sglang/srt/managers/scheduler_components/internal_state.py",
        ),
        (r'"effective_max_running_requests_per_dp"',),
    ),
    Claim(
        "server_info_frontend",
        '`/server_info` has `frontend: "python"`',
        (_HTTP,),
        (r'"frontend": "python"',),
        since="0.5.21",
    ),
    Claim(
        "metrics_endpoint",
        "`GET /metrics` (Prometheus, with `--enable-metrics`)",
        ("sglang/srt/utils/common.py",),
        (r'Mount\("/metrics", make_asgi_app\(',),
    ),
    # --- startup log lines --------------------------------------------------------------------
    Claim(
        "weights_line",
        "`Load weight end. elapsed=S s, type=T, [quant], avail mem=X GB, mem usage=Y GB.`",
        ("sglang/srt/model_executor/model_runner.py",),
        (r'f"Load weight end\. "\n\s+f"elapsed=\{self\.weight_load_time:\.2f\} s, "\n\s+f"type=',),
    ),
    Claim(
        "mamba_line",
        "`Mamba Cache is allocated. max_mamba_cache_size: K, conv_state size: ..GB, "
        "ssm_state size: ..GB `",
        (_POOLS,),
        (
            r'f"Mamba Cache is allocated\. "\n\s+f"max_mamba_cache_size: \{size\}, "\n'
            r'\s+f"conv_state size: ',
        ),
    ),
    Claim(
        "kv_line_dtype",
        "`KV Cache is allocated. dtype: D, #tokens: N, K size: X GB, V size: Y GB`",
        (_POOLS,),
        (r"allocated'?\}?\. dtype: \{self\.dtype\}, ",),
    ),
    Claim(
        "kv_line_va_upper_bound",
        "the KV line may read `KV Cache VA upper bound.` (with "
        "SGLANG_ENABLE_POST_CAPTURE_KV_SIZING, off by default)",
        (_POOLS,),
        (r"'VA upper bound' if self\.post_capture_active else 'is allocated'",),
        since="0.5.18",
    ),
    Claim(
        "cap_warning",
        "`max_running_requests is capped to R by the mamba state cache (max_mamba_cache_size=K, "
        "S state slots per request). To raise it: ...`",
        (_CAPS,),
        (r'"max_running_requests is capped to %d by the mamba state "',),
    ),
    Claim(
        "kv_reduced_warning",
        "`max_running_requests was reduced from the requested R to N ...` (KV capacity)",
        (_CAPS,),
        (r"max_running_requests was reduced from the requested",),
    ),
    Claim(
        "pool_line",
        "`max_total_num_tokens=T, chunked_prefill_size=C, max_prefill_tokens=P, "
        "max_running_requests=R, context_len=L, ...`",
        ("sglang/srt/managers/scheduler.py",),
        (r'f"max_total_num_tokens=\{self\.max_total_num_tokens\}, "',),
    ),
    Claim(
        "graph_begin_bs",
        "`Capture <graph> CUDA graph begin. backend=.., num_tokens_per_req=.., bs=[..], "
        "avail mem=..` (the batch sizes on the begin line)",
        (_GRAPHS,),
        (r'f"bs=\{capture_bs\}, avail mem=',),
        until="0.5.21",
    ),
    Claim(
        "graph_end_bs",
        "`Capture <graph> CUDA graph end. bs=[..], elapsed=S s, mem usage=..` (the batch sizes "
        "on the end line)",
        (_GRAPHS,),
        (r'end\. "\n\s+f"bs=\{runner\.capture_bs\}, "',),
        since="0.5.22",
    ),
    Claim(
        "ready_line",
        "`The server is fired up and ready to roll!`",
        (_HTTP,),
        (r"The server is fired up and ready to roll!",),
    ),
    # --- batch lines --------------------------------------------------------------------------
    Claim(
        "decode_line",
        "`Decode batch[ iter], #running-req: R, <usage parts>, ..., <graph>: B, gen throughput "
        "(token/s): T, #queue-req: Q`",
        (_REPORTER,),
        (
            r'f"Decode batch\{iter_msg\}, #running-req: \{num_running_reqs\}, \{token_usage_msg\}"',
            r"\{self\._graph_backend_label\}: \{can_run_cuda_graph\}",
        ),
    ),
    Claim(
        "prefill_line",
        "`Prefill batch[ iter], #new-seq: .., #new-token: .., #cached-token: .., ..., "
        "#pending-token: .., ...`",
        (_REPORTER,),
        (r'f"Prefill batch\{iter_msg\}, "', r'f"#pending-token: '),
    ),
    Claim(
        "mamba_usage_parts",
        "hybrid models' usage parts: `#full token: N, full token usage: X, mamba num: M, "
        "mamba usage: Y`",
        (_USAGE,),
        (r'f"mamba num: \{self\.mamba_num_used\}",\n\s+f"mamba usage: \{self\.mamba_usage',),
    ),
    Claim(
        "prefill_replay_token",
        "prefill lines may carry `#replay-token: N`",
        (_REPORTER,),
        (r'f"#replay-token: ',),
        since="0.5.21",
    ),
    Claim(
        "decode_host_receive_req",
        "disaggregated decode lines may carry `#host-receive-req: N`",
        (_REPORTER,),
        (r'f"#host-receive-req: ',),
        since="0.5.21",
    ),
    # --- metrics ------------------------------------------------------------------------------
    Claim(
        "console_metrics",
        "every `sglang:` family the console reads (tui.servers.payloads.METRIC_NAMES and the "
        "latency histograms of tui.servers.histogram)",
        (_METRICS,),
        tuple(f'name="{name}"' for name in CONSOLE_METRICS + CONSOLE_HISTOGRAMS),
    ),
    Claim(
        "realtime_tokens_by_mode",
        '`sglang:realtime_tokens_total{mode="decode"}` moves every decode iteration',
        (_METRICS,),
        (
            r'\("decode", decode_tokens\)',
            r"self\.realtime_tokens_total\.labels\(\*\*self\.labels, mode=mode\)",
        ),
    ),
    # --- arguments ----------------------------------------------------------------------------
    Claim(
        "retired_flag_error",
        "a retired flag can stop the launch with its own message (`DeprecatedAction`'s "
        "`error_message`)",
        ("sglang/srt/arg_groups/argparse_actions.py",),
        (r"def __init__\(self, option_strings, dest, error_message=None",),
        since="0.5.18",
    ),
    Claim(
        "nextn_in_from_string",
        "`SpeculativeAlgorithm.from_string` knows NEXTN itself (before, only the launch's "
        "alias step did: NEXTN works in every release)",
        ("sglang/srt/speculative/spec_info.py",),
        (r"if upper in _RESERVED_ALIASES:",),
        since="0.5.20",
    ),
)
"""Every claim, checked against every release's source by the tests."""


@dataclass(frozen=True, slots=True)
class Release:
    """What one release has (each field a claim of ``CLAIMS``)."""

    version: str
    ready_endpoint: bool
    health_endpoints: bool
    health_generates: bool
    health_503_while_starting: bool
    get_load_endpoint: bool
    v1_loads_endpoint: bool
    server_info_endpoint: bool
    server_info_version: bool
    server_info_effective_max_running: bool
    server_info_frontend: bool
    metrics_endpoint: bool
    weights_line: bool
    mamba_line: bool
    kv_line_dtype: bool
    kv_line_va_upper_bound: bool
    cap_warning: bool
    kv_reduced_warning: bool
    pool_line: bool
    graph_begin_bs: bool
    graph_end_bs: bool
    ready_line: bool
    decode_line: bool
    prefill_line: bool
    mamba_usage_parts: bool
    prefill_replay_token: bool
    decode_host_receive_req: bool
    console_metrics: bool
    realtime_tokens_by_mode: bool
    retired_flag_error: bool
    nextn_in_from_string: bool


_BY_NAME = {c.name: c for c in CLAIMS}


class UnknownRelease(LookupError):
    """gpufleet knows nothing of that SGLang release."""


def _check(version: str) -> None:
    if version not in known_versions():
        known = ", ".join(known_versions())
        raise UnknownRelease(f"no knowledge of SGLang {version!r} (gpufleet has: {known})")


def has(version: str, name: str) -> bool:
    """Whether release ``version`` has claim ``name``.

    Raises:
        UnknownRelease: not a release gpufleet knows.
        KeyError: no such claim.
    """
    _check(version)
    return _BY_NAME[name].holds(version)


@cache
def release(version: str) -> Release:
    """Everything known of release ``version``.

    Raises:
        UnknownRelease: not a release gpufleet knows.
    """
    _check(version)
    values = {f.name: _BY_NAME[f.name].holds(version) for f in fields(Release)[1:]}
    return Release(version=version, **values)


def aliases(version: str) -> dict[str, str]:
    """The deprecated flag aliases ``version``'s parser accepts: old spelling -> new (from its
    flag table, e.g. ``--cuda-graph-max-bs`` -> ``--cuda-graph-max-bs-decode`` up to 0.5.19)."""
    _check(version)
    out: dict[str, str] = {}
    for flag in load_table(version).flags:
        new = dict(flag.action_kwargs).get("new_flag")
        if flag.action == "DeprecatedAliasStoreAction" and isinstance(new, str):
            out |= {option: new for option in flag.option_strings}
    return out

"""Parse one SGLang log line, of any era, into a :class:`~tui.logs.events.LogEvent`.

The line is first stripped of what surrounds the message: docker-compose prefixes
(``sglang-1  | ``), Ray prefixes (``(SGLangEngine pid=1)``), tqdm text glued in front, and the
logger's bracket (``[2026-04-05 20:02:51 DP0 TP0]``, ``[16:43:29 TP0]``, ``[gpu_id=0]``, or none).
Batch lines are split into ``key: value`` parts, so new or unknown keys never break them; every
other kind is matched by a tolerant regex, tried only when one of the rule's *anchors* (plain
substrings) is in the line. The fast ingest path (:mod:`tui.logs.ingest`) searches whole chunks
for the same anchors, which is why every rare rule must declare them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from tui.logs import engine_rules, life_rules
from tui.logs import events as ev
from tui.logs.errors import ERROR_ANCHORS, classify_error
from tui.logs.events import LogEvent
from tui.logs.fields import Fields, pairs, put, value
from tui.sglang import loglines as lines
from tui.sglang.loglines import LogLine

_STAMP = re.compile(
    r"\[(?P<stamp>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?|\d\d:\d\d:\d\d(?:[.,]\d+)?)"
    r"(?P<ranks>(?:\s+[A-Z][A-Z_]*\d+)*)\s*\]\s?"
)
_GPU_ID = re.compile(r"\[gpu_id=(?P<gpu>\d+)\]\s?")
_COMPOSE = re.compile(r"^[\w.-]+\s+\|\s?")
_RAY = re.compile(r"^\s*\([^()]*\bpid=\d+[^()]*\)\s*")
_BATCH_HEAD = re.compile(r"^\s*(?:\[\d+\])?\s*[.,]?\s*")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _parse_batch(message: str) -> tuple[str, Fields] | None:
    idx = message.find("Decode batch")
    if idx >= 0:
        body = _BATCH_HEAD.sub("", message[idx + 12 :], count=1)
        return ev.DECODE, pairs(body, ", ")
    idx = message.find("Prefill batch")
    if idx >= 0:
        body = _BATCH_HEAD.sub("", message[idx + 13 :], count=1)
        return ev.PREFILL, pairs(body, ", ")
    idx = message.find("new fill batch")
    if idx >= 0:
        # v0.1: ``new fill batch. #seq: 1. #cached_token: 17. ... tree_cache_hit_rate: 80.82%.``
        return ev.PREFILL, pairs(message[idx + 14 :].lstrip(". "), ". ")
    stripped = message.lstrip()
    if stripped.startswith("#running-req:") and "token usage" in stripped:
        # v0.1 decode lines had no head at all.
        return ev.DECODE, pairs(stripped, ", ")
    return None


# --- rare rules ------------------------------------------------------------------------------


def _reader(line: LogLine) -> Callable[[str], Fields | None]:
    """The rule's parse for a row of the log-line table: its fields, typed."""

    def parse(message: str) -> Fields | None:
        raw = line.read(message)
        return None if raw is None else {name: value(text) for name, text in raw.items()}

    return parse


_KV_LABEL = re.compile(r"^\s*(?:\[?([\w\- ]+?)\]?\s+)?KV Cache")
_kv_fields = _reader(lines.KV)


def _kv_cache(message: str) -> Fields | None:
    out = _kv_fields(message)
    if out is None:
        return None
    if "VA upper bound" in message:
        out["upper_bound"] = True
    label = _KV_LABEL.match(message)
    if label and label.group(1):
        out["label"] = label.group(1)
    return out


_ASSIGN = re.compile(r"(\w+)=\s*(-?[\d.]+)\s*(GB)?")
_POOL_NAMES = {
    "max_total_num_token": "max_total_num_tokens",
    "max_prefill_num_token": "max_prefill_tokens",
    "available_gpu_mem": "available_gpu_mem_gb",
}


def _pool(message: str) -> Fields | None:
    if not lines.SUMMARY.pattern.search(message):
        return None
    out: Fields = {}
    for key, raw, _unit in _ASSIGN.findall(message):
        out[_POOL_NAMES.get(key, key)] = value(raw)
    return out


_W_DRAFT = re.compile(r"\btype=\s*\w*?(?:MTP|NextN|Eagle3?|EAGLE3?|Draft)\b")
_AVAIL = re.compile(lines.AVAIL_MEM)
_USAGE = re.compile(lines.MEM_USAGE)
_weight_fields = _reader(lines.WEIGHTS)


def _weights(message: str) -> Fields | None:
    out = _weight_fields(message)
    if out is None:
        return None
    if _W_DRAFT.search(message):
        out["draft"] = True
    return out


def _avail_only(marker: str) -> Callable[[str], Fields | None]:
    pattern = re.compile(marker)

    def parse(message: str) -> Fields | None:
        if not pattern.search(message):
            return None
        out: Fields = {}
        put(out, "avail_mem_gb", _AVAIL, message)
        put(out, "mem_usage_gb", _USAGE, message)
        return out

    return parse


_CAPTURE = re.compile(
    r"Capture\s+(?P<name>[\w ]*?)\s*(?:cuda|CUDA|npu|NPU|cpu|musa)\s+graph\s+"
    r"(?P<stage>begin|end|bs)\b"
)
_C_ELAPSED = re.compile(r"(?:elapsed=|[Tt]ime elapsed:)\s*([\d.]+)")
_C_BACKEND = re.compile(r"backend=\s*([\w.-]+)")
_C_BS = re.compile(r"\bbs\s*=?\s*\[([\d,\s]*)\]")
_C_TOKENS = re.compile(r"\bnum_tokens=\s*\[([\d,\s]*)\]")


def _graph_capture(message: str) -> Fields | None:
    match = _CAPTURE.search(message)
    if not match:
        return None
    out: Fields = {"stage": match["stage"], "graph": match["name"].strip() or "target decode"}
    put(out, "elapsed_s", _C_ELAPSED, message)
    put(out, "avail_mem_gb", _AVAIL, message)
    put(out, "mem_usage_gb", _USAGE, message)
    put(out, "backend", _C_BACKEND, message)
    sizes = _C_BS.search(message)
    if sizes:
        batch = [int(x) for x in re.findall(r"\d+", sizes.group(1))]
        out["num_bs"] = len(batch)
        if batch:
            out["max_bs"] = max(batch)
    tokens = _C_TOKENS.search(message)
    if tokens:  # 0.5.17's prefill graphs are captured per token count
        counts = [int(x) for x in re.findall(r"\d+", tokens.group(1))]
        out["num_sizes"] = len(counts)
        if counts:
            out["max_tokens"] = max(counts)
    return out


_capped_fields = _reader(lines.CAPPED)
_reduced_fields = _reader(lines.REDUCED)


def _cap(message: str) -> Fields | None:
    out = _capped_fields(message)
    if out is not None:
        return {**out, "cause": "mamba"}
    out = _reduced_fields(message)
    if out is not None:
        return {**out, "cause": "kv_cache" if "KV cache" in message else "capacity"}
    return None


_RESET = re.compile(r"Max running requests is reset to (\d+)")
_PROFILED = re.compile(r"max_total_tokens=\s*(-?\d+) is larger than the profiled value\s*(-?\d+)")


def _reset_48(message: str) -> Fields | None:
    match = _RESET.search(message)
    return {"max_running_requests": int(match.group(1))} if match else None


def _profiled(message: str) -> Fields | None:
    match = _PROFILED.search(message)
    if not match:
        return None
    return {"max_total_tokens": int(match.group(1)), "profiled": int(match.group(2))}


@dataclass(frozen=True, slots=True)
class Rule:
    """One rare kind: tried only when an anchor is in the message."""

    kind: str
    """The event kind this rule emits."""
    anchors: tuple[str, ...]
    """Plain substrings, one of which every line of this kind contains (the ingest search keys)."""
    parse: Callable[[str], Fields | None]
    """Returns the fields, or None when the line is not of this kind after all."""


RULES: tuple[Rule, ...] = (
    # Errors first: an error text may mention a pool ("Not enough memory for KV cache").
    Rule(ev.ERROR, ERROR_ANCHORS, classify_error),
    Rule(ev.MAMBA_CACHE, ("Mamba Cache",), _reader(lines.MAMBA)),
    # "V Cache", not "KV Cache": a rare first letter keeps the chunk search fast (see ingest).
    Rule(ev.KV_CACHE, ("V Cache",), _kv_cache),
    Rule(ev.PROFILED, ("_total_tokens",), _profiled),
    Rule(ev.POOL, ("_total_num_token",), _pool),
    Rule(ev.CAP, ("_running_requests",), _cap),
    Rule(ev.RESET_48, ("Max running requests",), _reset_48),
    Rule(ev.WEIGHTS, ("Load weight",), _weights),
    Rule(ev.WEIGHTS_BEGIN, ("Load weight",), _avail_only(r"Load weight begin")),
    Rule(
        ev.MEMORY_BASELINE,
        ("Memory baseline", "Init torch distributed"),
        _avail_only(r"Memory baseline taken|Init torch distributed ends"),
    ),
    Rule(ev.MEMORY_POOL_END, ("Memory pool",), _reader(lines.MEMORY_POOL_END)),
    Rule(ev.GRAPH_CAPTURE, ("Capture",), _graph_capture),
    Rule(ev.GRAPH_CAPTURE, ("graph because",), engine_rules.graph_disabled),
    Rule(ev.DIST_INIT, ("Init torch distributed",), engine_rules.dist_init),
    # tqdm bars: "it/s]" or "s/it]" ends every redraw.
    Rule(ev.PROGRESS, ("it/s]", "s/it]"), engine_rules.progress),
    Rule(ev.STARTUP_TIMINGS, ("startup timings",), engine_rules.startup_timings),
    Rule(ev.TREE_CACHE, ("Tree cache", "RadixTree"), engine_rules.tree_cache),
    Rule(
        ev.BACKEND,
        ("kernel backend", "kernel dispatcher", "linear attention backend"),
        engine_rules.backend,
    ),
    Rule(ev.WARNING, ("Warning: ",), engine_rules.python_warning),
    Rule(ev.DEPRECATED, ("is deprecated",), engine_rules.deprecated),
    Rule(ev.KILL_TREE, ("kill_process_tree",), life_rules.kill_tree),
    Rule(ev.CRASH_DIAGNOSTICS, ("crash diagnostics", "py-spy"), life_rules.crash_diagnostics),
    Rule(ev.SERVER_ARGS, ("_args",), life_rules.server_args),
    Rule(
        ev.UVICORN,
        ("Started server process", "Waiting for application", "Application startup", "Uvicorn"),
        life_rules.uvicorn,
    ),
    Rule(ev.SHUTDOWN, ("SIGTERM", "Gracefully exiting"), life_rules.shutdown),
    Rule(ev.PRESSURE, ("Retract requests", "out of memory. Try"), life_rules.pressure),
    # "y to roll": 'y' never starts an anchor candidate in batch or access lines.
    Rule(ev.READY, ("y to roll",), life_rules.ready),
)
"""Rare rules in priority order; the first that parses a line wins."""

_ACCESS = re.compile(r'"(?P<method>[A-Z]+) (?P<path>\S+) HTTP/[\d.]+" (?P<status>\d{3})')


def split_prefix(text: str) -> tuple[str, str | None, str | None]:
    """Strip what surrounds a log message.

    Args:
        text: One raw line (no trailing newline needed).

    Returns:
        ``(message, stamp, ranks)``; stamp and ranks are None when the line has none.
    """
    line = text.rstrip("\r\n")
    if "\x1b[" in line:  # the argument parser's deprecations are yellow
        line = _ANSI.sub("", line)
    match = _STAMP.search(line)
    if match:
        ranks = match["ranks"].strip() or None
        return line[match.end() :], match["stamp"], ranks
    match = _GPU_ID.search(line)
    if match:
        return line[match.end() :], None, f"gpu_id={match['gpu']}"
    line = _COMPOSE.sub("", line, count=1)
    line = _RAY.sub("", line, count=1)
    # tqdm redraws with carriage returns: the message is what was written last.
    return line.rsplit("\r", 1)[-1], None, None


def parse_message(message: str) -> tuple[str, Fields] | None:
    """Classify a message already stripped by :func:`split_prefix`.

    Returns:
        ``(kind, fields)``, or None when the message is of no kind we know.
    """
    batch = _parse_batch(message)
    if batch is not None:
        return batch
    # Access lines before the rare rules: the ingest path counts " HTTP/" lines as frequent.
    access = _ACCESS.search(message) if " HTTP/" in message else None
    if access:
        return ev.ACCESS, {
            "method": access["method"],
            "path": access["path"],
            "status": int(access["status"]),
        }
    if message.startswith("server_args="):
        # The arguments line that opens every launch (~18 KB) names flags such as
        # ``watchdog_timeout``, an error anchor: before its own rule it ran every error pattern,
        # 3.7 ms a line against 0.5 ms (read twice per GPU in a retune: by the preflight's
        # calibration and by the startup's follower). A line that starts so is never an error.
        fields = life_rules.server_args(message)
        if fields is not None:
            return ev.SERVER_ARGS, fields
    for rule in RULES:
        if any(anchor in message for anchor in rule.anchors):
            fields = rule.parse(message)
            if fields is not None:
                return rule.kind, fields
    return None


def parse_line(text: str, line: int = 0) -> LogEvent | None:
    """Parse one SGLang log line of any era.

    Args:
        text: The raw line, with whatever prefix it was printed with.
        line: Its 1-based line number when known, else 0.

    Returns:
        The event, or None when the line says nothing the console uses.
    """
    message, stamp, ranks = split_prefix(text)
    parsed = parse_message(message)
    if parsed is None:
        return None
    kind, fields = parsed
    return LogEvent(kind, fields, message.strip(), stamp, ranks, line)

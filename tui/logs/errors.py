"""Recognise SGLang's out-of-memory and crash lines and give each a ``reason``.

Every out-of-memory text is reason ``oom`` (with a ``detail`` saying which one); other crashes get
their own reason. Patterns are tolerant (case, spacing, the v0.1 "Not enought" typo); the anchors
are plain substrings one of which every matched line contains, used by the fast chunk search.
"""

from __future__ import annotations

import re

from tui.logs.events import FieldValue

Fields = dict[str, FieldValue]

ERROR_ANCHORS: tuple[str, ...] = (
    "Not enough",
    "Memory",  # OutOfMemoryError
    "CUDA",
    "Hybrid",
    "Loaded weights",
    "Scheduler hit",
    "Received sig",
    "QUIT",
    "Killed",
    "Initialization failed",
    "Health check failed",
    "Watchdog",
    "watchdog",
    "Errno",
    "Error",
    "Exception",
    "Input length",
    # "<name> at <port> is not available in 30 seconds. <name> is used by a process already":
    # 'y' starts no candidate in batch or access lines, which keeps the chunk search fast.
    "y a process",
)
"""Substrings, one of which every error line contains."""

_I = re.IGNORECASE
_OOM: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("weights_leave_no_memory", re.compile(r"Loaded weights leave no GPU memory", _I)),
    ("mamba_state_cache", re.compile(r"Not enough GPU memory for hybrid", _I)),
    ("mamba_state_cache_too_small", re.compile(r"state cache is too small", _I)),
    ("mamba_runtime", re.compile(r"Not enough space for mamba", _I)),
    ("kv_pool", re.compile(r"Not enought? memory", _I)),
    ("cuda", re.compile(r"CUDA out of memory|CUDA error:\s*out of memory|OutOfMemoryError", _I)),
)
_MIN_FRACTION = re.compile(r"mem-fraction-static\s+above\s+(\d+(?:\.\d+)?)")
_VIABLE = re.compile(r"minimum viable\s*=\s*[^=]*?=?\s*(\d+(?:\.\d+)?)\)")
_FRACTION = re.compile(r"mem[-_]fraction[-_]static\s*=\s*(\d+(?:\.\d+)?)")
_MAMBA_SIZE = re.compile(r"max_mamba_cache_size=\s*(-?\d+)")

_CRASH: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("illegal_memory_access", re.compile(r"illegal memory access", _I)),
    ("scheduler_exception", re.compile(r"Scheduler hit an exception", _I)),
    ("sigquit", re.compile(r"Received sigquit from a child|SIGQUIT received", _I)),
    ("warmup_failed", re.compile(r"Initialization failed\.?\s*warmup error", _I)),
    ("health_check_failed", re.compile(r"Health check failed", _I)),
    ("watchdog_timeout", re.compile(r"watchdog timeout", _I)),
    (
        "port_in_use",
        re.compile(r"address already in use|Errno 98\b|is not available in \d+ sec", _I),
    ),
    ("input_too_long", re.compile(r"Input length \((\d+) tokens?\) exceeds", _I)),
)
_KILLED = re.compile(r"^\s*(?:\S+:\s+line\s+\d+:\s+\d+\s+)?Killed\b")
_INPUT_MAX = re.compile(r"maximum allowed length \((\d+) tokens?\)")
_EXCEPTION = re.compile(r"^\s*((?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception))\s*:")


def _number(text: str) -> int | float:
    return float(text) if "." in text else int(text)


def classify_error(message: str) -> Fields | None:
    """Return the fields of an error line, or None when it is not one.

    Args:
        message: The message with its prefix already stripped.

    Returns:
        ``{"reason": ..., ...}``: ``reason`` is ``oom`` for every out-of-memory text (``detail``
        says which, ``min_fraction`` is the fraction SGLang asks for when it prints one), otherwise
        the crash reason; ``exception`` is the Python exception type when the line starts with one.
    """
    out: Fields = {}
    exc = _EXCEPTION.match(message)
    if exc:
        out["exception"] = exc.group(1)
    for detail, pattern in _OOM:
        if pattern.search(message):
            out.update(reason="oom", detail=detail)
            minimum = _MIN_FRACTION.search(message) or _VIABLE.search(message)
            if minimum:
                out["min_fraction"] = float(minimum.group(1))
            current = _FRACTION.search(message)
            if current:
                out["mem_fraction_static"] = float(current.group(1))
            size = _MAMBA_SIZE.search(message)
            if size:
                out["max_mamba_cache_size"] = int(size.group(1))
            return out
    for reason, pattern in _CRASH:
        match = pattern.search(message)
        if match:
            out["reason"] = reason
            if reason == "input_too_long":
                out["input_tokens"] = int(match.group(1))
                limit = _INPUT_MAX.search(message)
                if limit:
                    out["max_tokens"] = int(limit.group(1))
            return out
    if _KILLED.match(message):
        return {"reason": "killed"}
    if exc:
        out["reason"] = "exception"
        return out
    return None

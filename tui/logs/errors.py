"""Recognise SGLang's out-of-memory, crash and startup-refusal lines: a ``reason`` and ``fatal``.

Every out-of-memory text is reason ``oom`` (with a ``detail`` saying which one); other crashes get
their own reason. ``fatal`` is True when the line means the server is going down or cannot serve
(a crash, a refused start, a failed health check), False when one request failed (input too
long) or the line is an exception of unknown consequence. Texts are read from SGLang 0.5.23:
``srt/utils/watchdog.py`` (``Subprocess scheduler_0 (pid=...) crashed with exit code N``),
``srt/managers/tokenizer_manager.py`` (``Schedulers still alive 15s after ShutdownReq``),
``srt/mem_cache/allocation.py`` (``Prefill/Decode out of memory``, raised as RuntimeError inside
the scheduler: an oom when it ends a traceback; the bare logger line before it is a pressure
event, see ``tui.logs.parser``), ``srt/server_args.py`` (argparse's ``sglang serve: error: ...``).
Patterns are tolerant (case, spacing, the v0.1 "Not enought" typo); the anchors are plain
substrings one of which every matched line contains, used by the fast chunk search.
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
    "crashed with exit code",
    "Schedulers still alive",
    "hit an exception",
    ": error: ",
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
    ("prefill", re.compile(r"Prefill out of memory", _I)),
    ("decode", re.compile(r"Decode out of memory", _I)),
    ("req_slots", re.compile(r"alloc_req_slots runs out of memory", _I)),
)
_BATCH_OOM_DETAILS = frozenset({"prefill", "decode", "req_slots"})
"""OOM texts that are errors only inside a traceback (``RuntimeError: ...``); the bare logger line
SGLang prints first is a pressure event."""
_MIN_FRACTION = re.compile(r"mem-fraction-static\s+above\s+(\d+(?:\.\d+)?)")
_VIABLE = re.compile(r"minimum viable\s*=\s*[^=]*?=?\s*(\d+(?:\.\d+)?)\)")
_FRACTION = re.compile(r"mem[-_]fraction[-_]static\s*=\s*(\d+(?:\.\d+)?)")
_MAMBA_SIZE = re.compile(r"max_mamba_cache_size=\s*(-?\d+)")

_CRASH: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("illegal_memory_access", re.compile(r"illegal memory access", _I)),
    ("scheduler_exception", re.compile(r"Scheduler hit an exception", _I)),
    ("detokenizer_exception", re.compile(r"DetokenizerManager hit an exception", _I)),
    (
        "subprocess_crashed",
        re.compile(r"Subprocess (\S+) \(pid=(\d+)\) crashed with exit code (-?\d+)", _I),
    ),
    (
        "scheduler_straggler",
        re.compile(r"Schedulers still alive (\d+)s after ShutdownReq.*?(\[[\d,\s]*\])?$", _I),
    ),
    ("sigquit", re.compile(r"Received sigquit from a child|SIGQUIT received", _I)),
    ("warmup_failed", re.compile(r"Initialization failed\.?\s*warmup error", _I)),
    ("health_check_failed", re.compile(r"^\s*Health check failed", _I)),
    ("watchdog_timeout", re.compile(r"watchdog timeout", _I)),
    (
        "port_in_use",
        re.compile(r"address already in use|Errno 98\b|is not available in \d+ sec", _I),
    ),
    ("input_too_long", re.compile(r"Input length \((\d+) tokens?\) exceeds", _I)),
)
_KILLED = re.compile(r"^\s*(?:\S+:\s+line\s+\d+:\s+\d+\s+)?Killed\b")
_ARGPARSE = re.compile(
    r"^(?P<prog>[\w.\-]+(?: [\w.\-]+)?): error: (?P<message>(?:unrecognized arguments|ambiguous "
    r"option|argument |the following arguments are required|one of the arguments|expected ).*)$"
)
_ARGPARSE_DETAILS = (
    ("unrecognized_arguments", re.compile(r"^unrecognized arguments: (.*)$")),
    ("ambiguous_option", re.compile(r"^ambiguous option: (\S+)")),
    ("invalid_choice", re.compile(r"^argument ([^:]+): invalid choice: (.*)$")),
)

NON_FATAL_REASONS: frozenset[str] = frozenset({"input_too_long", "exception"})
"""Reasons of lines that do not by themselves mean the server is going down."""
_INPUT_MAX = re.compile(r"maximum allowed length \((\d+) tokens?\)")
_EXCEPTION = re.compile(r"^\s*((?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception))\s*:")


def _number(text: str) -> int | float:
    return float(text) if "." in text else int(text)


def classify_error(message: str) -> Fields | None:
    """Return the fields of an error line, or None when it is not one.

    Args:
        message: The message with its prefix already stripped.

    Returns:
        ``{"reason": ..., "fatal": ..., ...}``: ``reason`` is ``oom`` for every out-of-memory text
        (``detail`` says which, ``min_fraction`` is the fraction SGLang asks for when it prints
        one), otherwise the crash reason; ``exception`` is the Python exception type when the
        line starts with one; ``fatal`` says whether the server is going down or cannot serve.
    """
    out = _classify(message)
    if out is not None:
        out["fatal"] = out["reason"] not in NON_FATAL_REASONS
    return out


def _argparse(message: str) -> Fields | None:
    match = _ARGPARSE.match(message)
    if not match:
        return None
    out: Fields = {"reason": "bad_arguments", "prog": match["prog"]}
    text = match["message"]
    out["detail"] = "invalid_argument"
    for detail, pattern in _ARGPARSE_DETAILS:
        found = pattern.match(text)
        if found:
            out["detail"] = detail
            out["argument"] = found.group(1).strip()
            break
    return out


def _classify(message: str) -> Fields | None:
    out: Fields = {}
    exc = _EXCEPTION.match(message)
    if exc:
        out["exception"] = exc.group(1)
    for detail, pattern in _OOM:
        if detail in _BATCH_OOM_DETAILS and not exc:
            continue
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
            elif reason == "subprocess_crashed":
                out.update(process=match.group(1), pid=int(match.group(2)))
                out["exit_code"] = int(match.group(3))
            elif reason == "scheduler_straggler":
                out["after_s"] = int(match.group(1))
                if match.group(2):
                    out["pids"] = match.group(2)
            return out
    parsed = _argparse(message)
    if parsed is not None:
        return parsed
    if _KILLED.match(message):
        return {"reason": "killed"}
    if exc:
        out["reason"] = "exception"
        return out
    return None

"""Rules for the lines about a server's life: its arguments, uvicorn, readiness, shutdown and
memory pressure (``tui.logs.parser`` holds the startup allocation rules and the dispatch).

The pressure lines are SGLang 0.5.23's: the retraction WARNING of ``srt/managers/scheduler.py``
and the bare ``Prefill/Decode out of memory`` ERROR line of ``srt/mem_cache/allocation.py`` (the
RuntimeError that follows it in the scheduler's traceback is an error, ``tui.logs.errors``).
"""

from __future__ import annotations

import re

from tui.logs.fields import Fields, pairs, value
from tui.sglang.loglines import READY

_ARG = re.compile(
    r"""['"]?(mem_fraction_static|max_running_requests|max_mamba_cache_size|max_total_tokens|"""
    r"""port|tp_size|speculative_algorithm|mamba_ssm_dtype|model_path|"""
    r"""mamba_full_memory_ratio|chunked_prefill_size)['"]?\s*[:=]\s*['"]?([^,'")}\s]+)"""
)


def server_args(message: str) -> Fields | None:
    if not re.search(r"server_args\s*=", message):
        return None
    out: Fields = {}
    for key, raw in _ARG.findall(message):
        out.setdefault(key, None if raw == "None" else value(raw))  # type: ignore[arg-type]
    return {k: v for k, v in out.items() if v is not None}


_UVICORN = (
    ("started", re.compile(r"Started server process \[(\d+)\]")),
    ("waiting", re.compile(r"Waiting for application startup")),
    ("startup_complete", re.compile(r"Application startup complete")),
    ("running", re.compile(r"Uvicorn running on (\S+)")),
)


def uvicorn(message: str) -> Fields | None:
    for name, pattern in _UVICORN:
        match = pattern.search(message)
        if match:
            out: Fields = {"event": name}
            if name == "started":
                out["pid"] = int(match.group(1))
            if name == "running":
                out["url"] = match.group(1)
                port = re.search(r":(\d+)/?$", match.group(1))
                if port:
                    out["port"] = int(port.group(1))
            return out
    return None


_SHUTDOWN_REMAINING = re.compile(r"Remaining number of requests\s*(\d+)")


def shutdown(message: str) -> Fields | None:
    if "Force exiting" in message:
        return {"event": "force_exit"}
    if "SIGTERM received" in message:
        return {"event": "sigterm"}
    match = _SHUTDOWN_REMAINING.search(message)
    if "Gracefully exiting" in message:
        return {"event": "draining", **({"remaining": int(match.group(1))} if match else {})}
    return None


_RETRACT = re.compile(r"KV cache pool is full\. Retract requests\.\s*(.*)$")
_BATCH_OOM = re.compile(r"^\s*(Prefill|Decode) out of memory\. Try to lower your batch size")
_RATIO = re.compile(r"->\s*([\d.]+)")


def pressure(message: str) -> Fields | None:
    """``srt/managers/scheduler.py``'s retraction WARNING, ``srt/mem_cache/allocation.py``'s
    bare ``Prefill/Decode out of memory`` ERROR line (the traceback's RuntimeError is an error)."""
    match = _RETRACT.search(message)
    if match:
        out: Fields = {"reason": "retract", "fatal": False}
        for key, value in pairs(match.group(1), ", ").items():
            if key in ("retracted_reqs", "new_tokens_gained", "mamba_num_gained"):
                out[key] = value
        ratio = _RATIO.search(match.group(1))
        if ratio:
            out["new_token_ratio"] = float(ratio.group(1))
        return out
    match = _BATCH_OOM.match(message)
    if match:
        return {"reason": f"{match.group(1).lower()}_oom", "fatal": False}
    return None


_KILL_TREE = re.compile(
    r"kill_process_tree called: parent_pid=(\d+), include_parent=(True|False), pid=(\d+)"
)


def kill_tree(message: str) -> Fields | None:
    """``kill_process_tree called: parent_pid=P, include_parent=B, pid=Q``
    (``srt/utils/common.py``): the children are being SIGKILLed, and with ``include_parent`` the
    process itself (SGLang 0.5.17 ends every drain and every crash so: exit code -9)."""
    match = _KILL_TREE.search(message)
    if not match:
        return None
    return {
        "parent_pid": int(match.group(1)),
        "include_parent": match.group(2) == "True",
        "pid": int(match.group(3)),
    }


def crash_diagnostics(message: str) -> Fields | None:
    """The running-phase SIGQUIT handler's diagnostics (``dump_requests_before_crash``):
    ``Sleeping 5 seconds before crash diagnostics ...`` (``stage`` sleeping, ``seconds``), then
    ``No live scheduler processes found; skipping py-spy and CUDA coredump.`` (``stage``
    skipped)."""
    match = re.search(r"Sleeping (\d+) seconds before crash diagnostics", message)
    if match:
        return {"stage": "sleeping", "seconds": int(match.group(1))}
    if "skipping py-spy and CUDA coredump" in message:
        return {"stage": "skipped"}
    return None


def ready(message: str) -> Fields | None:
    return {} if READY.pattern.search(message) else None

"""SGLang 0.5.23 log lines, as pure functions (the simulator and the log benchmark share them).

Each function returns the message without the prefix; ``stamp`` adds ``[YYYY-MM-DD HH:MM:SS] ``
(a single-GPU, dp=1 server prints no rank tag).
"""

from __future__ import annotations

import time

from tui.sglang.models import GIB, ModelSpec
from tui.sglang.plan_types import MemoryPlan, PlanFailure


def stamp(message: str, when: float | None = None) -> str:
    """Prefix a message the way SGLang's logger does.

    Args:
        message: the text.
        when: epoch seconds (default now).

    Returns:
        ``[YYYY-MM-DD HH:MM:SS] message``.
    """
    ts = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(time.time() if when is None else when))
    return f"[{ts}] {message}"


def gb(n: int) -> str:
    """Bytes as SGLang prints them (2 decimals of GiB)."""
    return f"{n / GIB:.2f}"


def server_args_line(args: dict[str, object]) -> str:
    """``server_args={...}`` (the resolved dict)."""
    return f"server_args={args!r}"


def memory_baseline_line(used_bytes: int) -> str:
    """``Memory baseline taken. mem usage=X GB``."""
    return f"Memory baseline taken. mem usage={gb(used_bytes)} GB"


def load_weight_begin_line(avail_bytes: int) -> str:
    """``Load weight begin. avail mem=X GB``."""
    return f"Load weight begin. avail mem={gb(avail_bytes)} GB"


def load_weight_end_line(
    model: ModelSpec, elapsed_s: float, avail_bytes: int, usage_bytes: int, draft: bool = False
) -> str:
    """``Load weight end. elapsed=..., type=..., quant=fp8, avail mem=.., mem usage=..``"""
    arch = model.architecture + ("MTP" if draft else "")
    quant = f"quant={model.quant}, fmt=e4m3" if model.quant else "dtype=torch.bfloat16"
    return (
        f"Load weight end. elapsed={elapsed_s:.2f} s, type={arch}, {quant}, "
        f"avail mem={gb(avail_bytes)} GB, mem usage={gb(usage_bytes)} GB."
    )


def mamba_line(plan: MemoryPlan) -> str:
    """``Mamba Cache is allocated. ...`` with SGLang's trailing space (and spec-decoding parts)."""
    line = (
        f"Mamba Cache is allocated. max_mamba_cache_size: {plan.max_mamba_cache_size}, "
        f"conv_state size: {gb(plan.conv_state_bytes)}GB, "
        f"ssm_state size: {gb(plan.ssm_state_bytes)}GB "
    )
    if plan.speculative:
        line += (
            f"intermediate_ssm_state_cache size: {gb(plan.intermediate_ssm_bytes)}GB "
            f"intermediate_conv_window_cache size: {gb(plan.intermediate_conv_bytes)}GB "
        )
    return line


def kv_line(tokens: int, k_bytes: int, v_bytes: int) -> str:
    """``KV Cache is allocated. dtype: torch.bfloat16, #tokens: N, K size: X GB, V size: Y GB``."""
    return (
        f"KV Cache is allocated. dtype: torch.bfloat16, #tokens: {tokens}, "
        f"K size: {gb(k_bytes)} GB, V size: {gb(v_bytes)} GB"
    )


def memory_pool_end_line(avail_bytes: int) -> str:
    """``Memory pool end. avail mem=X GB``."""
    return f"Memory pool end. avail mem={gb(avail_bytes)} GB"


def graph_names(plan: MemoryPlan) -> list[str]:
    """The CUDA graphs captured, in order (``target verify`` and the draft's with spec)."""
    if plan.speculative:
        return ["target verify", "draft decode", "draft extend"]
    return ["target decode"]


def capture_bs_list(max_bs: int) -> list[int]:
    """SGLang's capture batch sizes up to ``max_bs``: 1, 2, 4, 8, then steps of 8 (16 past 256)."""
    sizes = [b for b in (1, 2, 4) if b <= max_bs]
    b = 8
    while b <= max_bs:
        sizes.append(b)
        b += 8 if b < 256 else 16
    if not sizes or sizes[-1] != max_bs:
        sizes.append(max_bs)
    return sizes


def capture_begin_line(name: str, avail_bytes: int) -> str:
    """``Capture <name> CUDA graph begin. backend=..., num_tokens_per_req=.., avail mem=X GB``."""
    per_req = 4 if name == "target verify" else 1
    return (
        f"Capture {name} CUDA graph begin. backend=flashinfer, num_tokens_per_req={per_req}, "
        f"avail mem={gb(avail_bytes)} GB"
    )


def capture_end_line(name: str, max_bs: int, elapsed_s: float, usage: int, avail: int) -> str:
    """``Capture <name> CUDA graph end. bs=[...], elapsed=S s, mem usage=G GB, avail mem=X GB.``."""
    return (
        f"Capture {name} CUDA graph end. bs={capture_bs_list(max_bs)}, elapsed={elapsed_s:.2f} s, "
        f"mem usage={gb(usage)} GB, avail mem={gb(avail)} GB."
    )


def summary_line(plan: MemoryPlan) -> str:
    """``max_total_num_tokens=..., max_running_requests=<effective>, ..., available_gpu_mem=X``."""
    return (
        f"max_total_num_tokens={plan.max_total_num_tokens}, "
        f"chunked_prefill_size={plan.chunked_prefill_size}, "
        f"max_prefill_tokens={plan.chunked_prefill_size}, "
        f"max_running_requests={plan.max_running_requests}, context_len={plan.context_len}, "
        f"available_gpu_mem={gb(plan.available_gpu_mem_bytes)} GB"
    )


def failure_lines(failure: PlanFailure, during_launch: bool = True) -> list[str]:
    """The scheduler's traceback and the parent's SIGQUIT line for a startup failure.

    Args:
        failure: what failed.
        during_launch: True before the server is up (the parent's launch-phase message).

    Returns:
        Lines in order; the first two carry the prefix in SGLang (stamp them), the traceback body
        does not (``raw`` lines start with two spaces or the exception name).
    """
    where = {
        "load_weights": ("model_runner.py", "load_model"),
        "memory_pool": ("pool_configurator.py", "__post_init__"),
        "cuda_graph": ("cuda_graph_runner.py", "capture"),
    }[failure.phase]
    parent = (
        "Received sigquit from a child process. It usually means the child failed."
        if during_launch
        else "SIGQUIT received. signum=None, frame=None. It usually means one child failed."
    )
    return [
        "Scheduler hit an exception: Traceback (most recent call last):",
        '  File "sglang/srt/managers/scheduler.py", line 3201, in run_scheduler_process',
        "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, ...)",
        f'  File "sglang/srt/model_executor/{where[0]}", line 412, in {where[1]}',
        "    raise",
        failure.line,
        "",
        parent,
    ]


def prefill_line(
    plan: MemoryPlan,
    *,
    new_seq: int,
    new_token: int,
    cached_token: int,
    token_usage: float,
    mamba_usage: float,
    running: int,
    queued: int,
    input_throughput: float,
) -> str:
    """``Prefill batch, #new-seq: ..., cuda graph: False, input throughput (token/s): T``."""
    usage = (
        f"full token usage: {token_usage:.2f}, mamba usage: {mamba_usage:.2f}"
        if plan.is_hybrid_mamba
        else f"token usage: {token_usage:.2f}"
    )
    return (
        f"Prefill batch, #new-seq: {new_seq}, #new-token: {new_token}, "
        f"#cached-token: {cached_token}, {usage}, #running-req: {running}, #queue-req: {queued}, "
        f"#pending-token: 0, cuda graph: False, input throughput (token/s): {input_throughput:.2f}"
    )


def decode_line(
    plan: MemoryPlan,
    *,
    running: int,
    tokens: int,
    token_usage: float,
    mamba_num: int,
    mamba_usage: float,
    accept_len: float,
    gen_throughput: float,
    queued: int,
) -> str:
    """``Decode batch, #running-req: R, <usage>, [accept len/rate, ]cuda graph: True, ...``."""
    if plan.is_hybrid_mamba:
        usage = (
            f"#full token: {tokens}, full token usage: {token_usage:.2f}, "
            f"mamba num: {mamba_num}, mamba usage: {mamba_usage:.2f}"
        )
    else:
        usage = f"#token: {tokens}, token usage: {token_usage:.2f}"
    spec = ""
    if plan.speculative:
        rate = (accept_len - 1) / max(plan.num_draft_tokens - 1, 1)
        spec = f"accept len: {accept_len:.2f}, accept rate: {rate:.2f}, "
    return (
        f"Decode batch, #running-req: {running}, {usage}, {spec}cuda graph: True, "
        f"gen throughput (token/s): {gen_throughput:.2f}, #queue-req: {queued}"
    )


def access_line(client: str, method: str, path: str, status: int) -> str:
    """A uvicorn access line as SGLang's logger shows it."""
    phrase = {200: "OK", 400: "Bad Request", 404: "Not Found", 503: "Service Unavailable"}
    text = phrase.get(status, "")
    return f'INFO:     {client} - "{method} {path} HTTP/1.1" {status} {text}'.rstrip()


READY_LINE = "The server is fired up and ready to roll!"
"""SGLang's readiness line (identical in every version)."""

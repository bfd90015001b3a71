"""SGLang's log lines, as pure functions (the simulator and the log benchmark share them).

Each function returns the message without the prefix; ``stamp`` adds ``[YYYY-MM-DD HH:MM:SS] ``
(a single-GPU, dp=1 server prints no rank tag). Texts are SGLang 0.5.23's
(``srt/model_executor/model_runner.py``, ``srt/mem_cache/memory_pool.py``,
``srt/mem_cache/kv_cache_configurator.py``, ``srt/managers/scheduler.py``,
``srt/entrypoints/engine.py``); where the seed build printed differently the plan's ``build`` says
which (``tui.sglang.builds``).
"""

from __future__ import annotations

import time

from tui.sglang import loglines as lines
from tui.sglang.builds import SEED
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
    model: ModelSpec,
    elapsed_s: float,
    avail_bytes: int,
    usage_bytes: int,
    draft: bool = False,
    dtype: bool = True,
) -> str:
    """``Load weight end. elapsed=..., type=..., quant=fp8, avail mem=.., mem usage=..``; an
    unquantised model's ``dtype=torch.bfloat16`` in the place of ``quant=`` only with ``dtype``
    (0.5.17 printed none)."""
    arch = model.architecture + ("MTP" if draft else "")
    if model.quant:
        quant = f"quant={model.quant}, fmt=e4m3, "
    else:
        quant = "dtype=torch.bfloat16, " if dtype else ""
    return lines.WEIGHTS.write(
        elapsed_s=elapsed_s,
        arch=arch,
        quant=quant,
        avail_gb=gb(avail_bytes),
        usage_gb=gb(usage_bytes),
    )


def mamba_line(plan: MemoryPlan) -> str:
    """``Mamba Cache is allocated. ...`` with SGLang's trailing space (and spec-decoding parts)."""
    speculative = (
        lines.MAMBA_SPECULATIVE.format(
            ssm_gb=gb(plan.intermediate_ssm_bytes), conv_gb=gb(plan.intermediate_conv_bytes)
        )
        if plan.speculative
        else ""
    )
    return lines.MAMBA.write(
        slots=plan.max_mamba_cache_size,
        conv_gb=gb(plan.conv_state_bytes),
        ssm_gb=gb(plan.ssm_state_bytes),
        speculative=speculative,
    )


def kv_line(
    tokens: int, k_bytes: int, v_bytes: int, build: str = "0.5.23", mla: bool = False
) -> str:
    """``KV Cache is allocated. dtype: torch.bfloat16, #tokens: N, K size: X GB, V size: Y GB``.

    The seed build printed no ``dtype:`` (its lines in the seed story); an MLA pool prints one
    ``KV size`` (``srt/mem_cache/memory_pool.py``).
    """
    dtype = "" if build == SEED else "dtype: torch.bfloat16, "
    sizes = (
        f"KV size: {gb(k_bytes + v_bytes)} GB"
        if mla
        else f"K size: {gb(k_bytes)} GB, V size: {gb(v_bytes)} GB"
    )
    return lines.KV.write(dtype=dtype, tokens=tokens, sizes=sizes)


def multimodal_reserve_line(reserve_bytes: int) -> str:
    """``Reserving 0.10 GB of the KV budget for post-sizing multimodal allocations ...``."""
    return (
        f"Reserving {reserve_bytes / 2**20 / 1024:.2f} GB of the KV budget for post-sizing "
        "multimodal allocations (feature-transport pools + embedding cache)."
    )


def memory_pool_end_line(avail_bytes: int) -> str:
    """``Memory pool end. avail mem=X GB``."""
    return lines.MEMORY_POOL_END.write(avail_gb=gb(avail_bytes))


def graph_names(plan: MemoryPlan) -> list[str]:
    """The CUDA graphs captured, in order (``target verify`` and the draft's with spec; none
    with ``--disable-cuda-graph``)."""
    if not plan.cuda_graph_max_bs:
        return []
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
    return lines.SUMMARY.write(
        tokens=plan.max_total_num_tokens,
        chunked_prefill_size=plan.chunked_prefill_size,
        max_prefill_tokens=plan.max_prefill_tokens,
        max_running_requests=plan.max_running_requests,
        context_len=plan.context_len,
        avail_gb=gb(plan.available_gpu_mem_bytes),
    )


_WHERE = {
    "load_weights": ("model_executor/model_runner.py", "load_model"),
    "memory_pool": ("mem_cache/kv_cache_configurator.py", "_profile_available_bytes"),
    "cuda_graph": ("model_executor/cuda_graph_runner.py", "capture"),
    "decode": ("mem_cache/allocation.py", "alloc_for_decode"),
    "forward": ("model_executor/model_runner.py", "forward"),
}


def scheduler_exception(failure: PlanFailure) -> str:
    """``Scheduler hit an exception: Traceback ...`` as one record (``run_scheduler_process``).

    Returns:
        The message: its first line carries the log prefix once stamped, the traceback body does
        not, and it ends with the exception line and an empty line, as ``format_exception`` does.
    """
    path, function = _WHERE.get(failure.phase, _WHERE["forward"])
    if failure.phase in ("load_weights", "memory_pool", "cuda_graph"):
        call = "    scheduler = Scheduler(server_args, port_args)"
        line = 6362
    else:
        call = "    scheduler.run_event_loop()"
        line = 6368
    return "\n".join(
        [
            "Scheduler hit an exception: Traceback (most recent call last):",
            f'  File "sglang/srt/managers/scheduler.py", line {line}, in run_scheduler_process',
            call,
            f'  File "sglang/srt/{path}", line 412, in {function}',
            "    raise",
            failure.line,
            "",
        ]
    )


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
    pending: int = 0,
    cuda_graph: bool = False,
) -> str:
    """``Prefill batch, #new-seq: ..., cuda graph: B, input throughput (token/s): T`` (True only
    where prefill CUDA graphs were captured: SGLang 0.5.17's)."""
    usage = (
        f"full token usage: {token_usage:.2f}, mamba usage: {mamba_usage:.2f}"
        if plan.is_hybrid_mamba
        else f"token usage: {token_usage:.2f}"
    )
    return (
        f"Prefill batch, #new-seq: {new_seq}, #new-token: {new_token}, "
        f"#cached-token: {cached_token}, {usage}, #running-req: {running}, #queue-req: {queued}, "
        f"#pending-token: {pending}, cuda graph: {cuda_graph}, "
        f"input throughput (token/s): {input_throughput:.2f}"
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
    cuda_graph: bool = True,
) -> str:
    """``Decode batch, #running-req: R, <usage>, [accept len/rate, ]cuda graph: B, ...``
    (False when the batch is above the captured CUDA-graph maximum and ran eagerly)."""
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
        f"Decode batch, #running-req: {running}, {usage}, {spec}cuda graph: {cuda_graph}, "
        f"gen throughput (token/s): {gen_throughput:.2f}, #queue-req: {queued}"
    )


def retract_line(
    plan: MemoryPlan, retracted: int, freed_tokens: int, old_ratio: float, new_ratio: float
) -> str:
    """``KV cache pool is full. Retract requests. #retracted_reqs: N, ...`` (the WARNING of
    ``srt/managers/scheduler.py`` ``update_running_batch``; the ratio's move is the scheduler's,
    ``tui.sim.kvpool``)."""
    gained = retracted * max(plan.mamba_slots_per_request - 1, 1)
    mamba = f", #mamba_num_gained: {gained}" if plan.is_hybrid_mamba else ""
    return (
        f"KV cache pool is full. Retract requests. #retracted_reqs: {retracted}, "
        f"#new_tokens_gained: {freed_tokens}{mamba}, #new_token_ratio: {old_ratio:.4f} -> "
        f"{new_ratio:.4f}"
    )


def access_line(client: str, method: str, path: str, status: int) -> str:
    """A uvicorn access line as SGLang's logger shows it."""
    phrase = {200: "OK", 400: "Bad Request", 404: "Not Found", 503: "Service Unavailable"}
    text = phrase.get(status, "")
    return f'INFO:     {client} - "{method} {path} HTTP/1.1" {status} {text}'.rstrip()


READY_LINE = lines.READY.write()
"""SGLang's readiness line (identical in every version)."""


def health_failed_line(timeout_s: int, tic: float, last_receive: float) -> str:
    """``Health check failed. Server couldn't get a response from detokenizer for last ...``."""
    tic_time = time.strftime("%H:%M:%S", time.localtime(tic))
    last = time.strftime("%H:%M:%S", time.localtime(last_receive))
    return (
        "Health check failed. Server couldn't get a response from detokenizer for last "
        f"{timeout_s} seconds. tic start time: {tic_time}. last_heartbeat time: {last}"
    )


def engine_timings_line(
    load_weight_s: float,
    pools_s: float,
    scheduler_s: float,
    graphs: dict[str, float],
    tokenizer_s: float,
) -> str:
    """``Engine startup timings (s): ...`` (``srt/entrypoints/engine.py`` ``_set_startup_time``)."""
    phases = ", ".join(f"{name}={seconds:.2f}" for name, seconds in graphs.items())
    return (
        f"Engine startup timings (s): load_weight={load_weight_s:.2f}, "
        f"kv_cache_allocation={pools_s:.2f}, scheduler_e2e={scheduler_s:.2f}, "
        f"cuda_graph={{{phases}}}, tokenizer_e2e={tokenizer_s:.2f}"
    )


GRAPH_PHASES = (
    "prefill",
    "decode",
    "target_verify",
    "draft_prefill",
    "draft_decode",
    "draft_extend",
)
"""The CUDA-graph phases SGLang reports memory and time for (``graph_memory_usage.py``)."""


def graph_phase(name: str) -> str:
    """A captured graph's phase key: ``target verify`` -> ``target_verify``."""
    return {"target decode": "decode", "target prefill": "prefill"}.get(
        name, name.replace(" ", "_")
    )

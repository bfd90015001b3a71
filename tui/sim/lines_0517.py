"""SGLang 0.5.17's own log lines, where they differ from 0.5.23's (``tui.sim.logfmt``).

Read from the 0.5.17 wheel and checked against what a real 0.5.17 server wrote
(``tests/fixtures/real_sglang/0.5.17``, shape for shape; ``tests/core/test_sim_0517_logs.py``):

* ``srt/distributed/bootstrap.py``: ``Init torch distributed begin.`` / ``Init torch distributed
  ends. elapsed=0.08 s, mem usage=0.09 GB`` where 0.5.23 prints ``Memory baseline taken``;
* ``srt/model_executor/model_runner.py``: ``Load weight end. elapsed=.., type=.., avail mem=..,
  mem usage=...`` with the quantisation only when the checkpoint has one (no ``dtype=``);
* ``model_runner_components/cuda_graph_setup.py``: the prefill graphs (``Capture target prefill
  CUDA graph begin. backend=breakable, num_tokens=[...]``), the decode graphs (``... begin.
  backend=full, num_tokens_per_req=1, bs=[...], avail mem=..``), ``end`` lines without ``bs=``,
  tqdm bars (``Capturing num tokens (num_tokens=.. avail_mem=.. GB): ..%|..``) on stderr, and
  ``Disable prefill CUDA graph because ...`` when the graphs are off;
* the hybrid model's kernels, the tree cache, ``server_args=ServerArgs(...)``, PyTorch's NCCL
  note when the scheduler exits, and the crash diagnostics of the SIGQUIT handler.
"""

from __future__ import annotations

import time

from tui.sglang.models import ModelSpec
from tui.sim import logfmt
from tui.sim.logfmt import gb

PREFILL_GRAPH_BACKEND = "breakable"
"""``cuda_graph_config.prefill.backend`` when the graphs are on (the recorded default)."""
DECODE_GRAPH_BACKEND = "full"
"""``cuda_graph_config.decode.backend`` (the recorded default)."""


def server_args_line(args: dict[str, object]) -> str:
    """``server_args=ServerArgs(model_path='...', ...)``: the dataclass's repr."""
    body = ", ".join(f"{key}={value!r}" for key, value in args.items())
    return f"server_args=ServerArgs({body})"


def dist_init_begin_line() -> str:
    """``Init torch distributed begin.``"""
    return "Init torch distributed begin."


def dist_init_end_line(elapsed_s: float, usage_bytes: int) -> str:
    """``Init torch distributed ends. elapsed=0.08 s, mem usage=0.09 GB``."""
    return f"Init torch distributed ends. elapsed={elapsed_s:.2f} s, mem usage={gb(usage_bytes)} GB"


def load_weight_end_line(
    model: ModelSpec, elapsed_s: float, avail_bytes: int, usage_bytes: int, draft: bool = False
) -> str:
    """``Load weight end. elapsed=.., type=.., [quant=.., ]avail mem=.., mem usage=...``: no
    ``dtype=`` for an unquantised model."""
    return logfmt.load_weight_end_line(
        model, elapsed_s, avail_bytes, usage_bytes, draft=draft, dtype=False
    )


def hybrid_backend_lines(speculative: bool) -> list[str]:
    """The linear-attention kernels of a hybrid GDN model (printed per worker: twice with a
    draft)."""
    lines = [
        "Linear attention kernel backend: decode=triton, prefill=triton, verify=triton",
        "Using hybrid linear attention backend for hybrid GDN models.",
        "GDN kernel dispatcher: decode=TritonGDNKernel, extend=TritonGDNKernel, "
        "verify=TritonGDNKernel packed_decode=True",
    ]
    return lines * 2 if speculative else lines


def prefill_graph_disabled_line() -> str:
    """``Disable prefill CUDA graph because cuda_graph_config resolved ...`` (per worker)."""
    return (
        "Disable prefill CUDA graph because cuda_graph_config resolved "
        "prefill.backend='disabled' (e.g. via --cuda-graph-backend-prefill=disabled or "
        "auto-disable rules)."
    )


def prefill_capture_sizes(max_tokens: int) -> list[int]:
    """``_generate_prefill_cuda_graph_batch_sizes``: the token counts captured up to the chunk."""
    sizes = [
        *range(4, 33, 4),
        *range(48, 257, 16),
        *range(288, 513, 32),
        *range(576, 1025, 64),
        *range(1280, 4097, 256),
        *range(4608, max_tokens + 1, 512),
    ]
    return [s for s in sizes if s <= max_tokens]


def decode_capture_sizes(max_bs: int, speculative: bool) -> list[int]:
    """``_generate_decode_cuda_graph_batch_sizes``: the batch sizes captured up to ``max_bs``."""
    if speculative:
        sizes = [*range(1, 9), *range(10, 33, 2), *range(40, 65, 4), *range(72, 257, 8)]
        sizes += list(range(272, max_bs + 1, 16))
    else:
        sizes = [1, 2, 4, 8, 12, *range(16, 257, 8), *range(272, 512, 16)]
        sizes += list(range(512, max_bs + 1, 32))
    sizes = [s for s in sizes if s <= max_bs]
    if max_bs not in sizes:
        sizes.append(max_bs)
    return sizes


def prefill_capture_begin_line(sizes: list[int], avail_bytes: int) -> str:
    """``Capture target prefill CUDA graph begin. backend=breakable, num_tokens=[...], ...``."""
    return (
        f"Capture target prefill CUDA graph begin. backend={PREFILL_GRAPH_BACKEND}, "
        f"num_tokens={sizes}, avail mem={gb(avail_bytes)} GB"
    )


def decode_capture_begin_line(name: str, per_req: int, sizes: list[int], avail: int) -> str:
    """``Capture <name> CUDA graph begin. backend=full, num_tokens_per_req=N, bs=[...], ...``."""
    return (
        f"Capture {name} CUDA graph begin. backend={DECODE_GRAPH_BACKEND}, "
        f"num_tokens_per_req={per_req}, bs={sizes}, avail mem={gb(avail)} GB"
    )


def capture_end_line(name: str, elapsed_s: float, usage: int, avail: int) -> str:
    """``Capture <name> CUDA graph end. elapsed=S s, mem usage=G GB, avail mem=X GB.``"""
    return (
        f"Capture {name} CUDA graph end. elapsed={elapsed_s:.2f} s, "
        f"mem usage={gb(usage)} GB, avail mem={gb(avail)} GB."
    )


def capture_bar(prefill: bool, size: int, avail_bytes: int, done: int, total: int) -> str:
    """One tqdm redraw of a capture bar, as a file receives it (``\\r`` before, no newline).

    Args:
        prefill: the prefill graphs (by token count) or the decode ones (by batch size).
        size: the size being captured.
        avail_bytes: free memory as the bar prints it.
        done: sizes captured so far.
        total: sizes to capture.
    """
    desc = (
        f"Capturing num tokens (num_tokens={size} avail_mem={gb(avail_bytes)} GB)"
        if prefill
        else f"Capturing batches (bs={size} avail_mem={gb(avail_bytes)} GB)"
    )
    percent = done * 100 // max(total, 1)
    filled = done * 10 // max(total, 1)
    bar = "█" * filled + " " * (10 - filled)
    timing = "00:00<?, ?it/s" if done == 0 else "00:00<00:00, 20.00it/s"
    return f"\r{desc}: {percent:3d}%|{bar}| {done}/{total} [{timing}]"


def capture_bar_start(total: int) -> str:
    """tqdm's first draw, before any description is set: ``  0%|          | 0/58 [...]``."""
    return f"\r  0%|          | 0/{total} [00:00<?, ?it/s]"


def tree_cache_lines(radix: bool) -> list[str]:
    """The prefix cache of a hybrid Mamba model: the unified radix tree, or none."""
    impl = "UnifiedRadixCache" if radix else "ChunkCache"
    ready = (
        f"Tree cache initialized: source=default impl={impl} hybrid_swa=False hybrid_ssm=True "
        "hierarchical=False streaming_wrapped=False"
    )
    if not radix:
        return [ready]
    return [
        "Init Unified RadixTree with components (<ComponentType.FULL: 0>, "
        "<ComponentType.MAMBA: 2>)",
        ready,
    ]


def nccl_exit_note(when: float | None = None) -> str:
    """PyTorch's warning as the scheduler process exits without destroying its process group
    (c10's own prefix, not SGLang's logger)."""
    now = time.time() if when is None else when
    stamp = time.strftime("%m%d %H:%M:%S", time.localtime(now))
    micros = int((now % 1) * 1e9)
    return (
        f"[rank0]:[W{stamp}.{micros:09d} ProcessGroupNCCL.cpp:1575] Warning: WARNING: "
        "destroy_process_group() was not called before program exit, which can leak "
        "resources. For more info, please see "
        "https://pytorch.org/docs/stable/distributed.html#shutdown (function operator())"
    )


CRASH_DIAGNOSTICS_S = 5.0
"""``dump_requests_before_crash``: ``time.sleep(5)`` before py-spy and the CUDA coredump."""


def diagnostics_sleep_line() -> str:
    """``Sleeping 5 seconds before crash diagnostics to let GPU activity settle.``"""
    return "Sleeping 5 seconds before crash diagnostics to let GPU activity settle."


def diagnostics_skipped_line() -> str:
    """``No live scheduler processes found; skipping py-spy and CUDA coredump.``"""
    return "No live scheduler processes found; skipping py-spy and CUDA coredump."

"""Shared helpers for the log-layer tests: fixture paths and a synthetic current-format log."""

from __future__ import annotations

import random
from pathlib import Path

import repo_paths

FIXTURES = repo_paths.FIXTURES / "logs"
"""Directory of the log fixtures (copied from the shared reference, never read from it)."""

STARTUP_LINES = (
    "[{t}] server_args=ServerArgs(model_path='Qwen/Qwen3.6-27B', port={port}, "
    "mem_fraction_static=0.93, max_running_requests=64, max_mamba_cache_size=200)",
    "[{t}] Memory baseline taken. mem usage=0.62 GB",
    "[{t}] Load weight begin. avail mem=178.41 GB",
    "[{t}] Load weight end. elapsed=12.31 s, type=Qwen3_5ForConditionalGeneration, quant=fp8, "
    "fmt=e4m3, avail mem=124.02 GB, mem usage=54.39 GB.",
    "[{t}] max_running_requests is capped to 40 by the mamba state cache "
    "(max_mamba_cache_size=200, 5 state slots per request). To raise it: increase "
    "--mamba-full-memory-ratio or --max-mamba-cache-size, or halve the state size with "
    "--mamba-ssm-dtype bfloat16.",
    "[{t}] Mamba Cache is allocated. max_mamba_cache_size: 200, conv_state size: 0.55GB, "
    "ssm_state size: 28.27GB intermediate_ssm_state_cache size: 23.06GB "
    "intermediate_conv_window_cache size: 0.45GB ",
    "[{t}] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 798080, K size: 24.36 GB, "
    "V size: 24.36 GB",
    "[{t}] Memory pool end. avail mem=20.11 GB",
    "[{t}] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 798080, K size: 1.52 GB, "
    "V size: 1.52 GB",
    "[{t}] Memory pool end. avail mem=17.02 GB",
    "[{t}] Capture target verify CUDA graph begin. backend=flashinfer, num_tokens_per_req=4, "
    "avail mem=17.00 GB",
    "[{t}] Capture target verify CUDA graph end. bs=[1, 2, 4, 8, 16, 32, 64], elapsed=6.20 s, "
    "mem usage=1.10 GB, avail mem=15.90 GB.",
    "[{t}] max_total_num_tokens=798080, chunked_prefill_size=16384, max_prefill_tokens=16384, "
    "max_running_requests=40, context_len=262144, available_gpu_mem=15.90 GB",
    "[{t}] INFO:     Started server process [4242]",
    "[{t}] INFO:     Waiting for application startup.",
    "[{t}] INFO:     Application startup complete.",
    "[{t}] INFO:     Uvicorn running on http://0.0.0.0:{port} (Press CTRL+C to quit)",
    "[{t}] The server is fired up and ready to roll!",
)
"""A 0.5.23-style startup of a hybrid model with MTP, in emission order."""


def _stamp(second: int) -> str:
    hours, rest = divmod(second, 3600)
    return f"2026-05-09 {hours % 24:02d}:{rest // 60:02d}:{rest % 60:02d}"


def startup_block(port: int = 30000, second: int = 0) -> list[str]:
    """Return the startup lines with stamps and the port filled in."""
    return [line.format(t=_stamp(second + i), port=port) for i, line in enumerate(STARTUP_LINES)]


def steady_lines(count: int, seed: int = 1, second: int = 100) -> list[str]:
    """Return ``count`` steady-state lines: half decode, a quarter prefill, a quarter access."""
    rng = random.Random(seed)
    out: list[str] = []
    for i in range(count):
        t = _stamp(second + i // 3)
        roll = rng.random()
        running = rng.randint(20, 40)
        if roll < 0.5:
            out.append(
                f"[{t}] Decode batch, #running-req: {running}, #full token: "
                f"{rng.randint(10000, 90000)}, full token usage: {rng.random():.2f}, "
                f"mamba num: {running * 5}, mamba usage: {rng.random():.2f}, accept len: "
                f"{rng.uniform(2, 4):.2f}, accept rate: {rng.random():.2f}, cuda graph: True, "
                f"gen throughput (token/s): {rng.uniform(500, 2500):.2f}, "
                f"#queue-req: {rng.randint(0, 48)}"
            )
        elif roll < 0.75:
            out.append(
                f"[{t}] Prefill batch, #new-seq: 1, #new-token: {rng.randint(100, 8192)}, "
                f"#cached-token: {rng.randint(0, 4096)}, full token usage: {rng.random():.2f}, "
                f"mamba usage: {rng.random():.2f}, #running-req: {running}, #queue-req: "
                f"{rng.randint(0, 48)}, #pending-token: 0, cuda graph: False, "
                f"input throughput (token/s): {rng.uniform(1000, 9000):.2f}"
            )
        else:
            out.append(
                f'[{t}] INFO:     127.0.0.1:{rng.randint(30000, 60000)} - "POST '
                f'/v1/chat/completions HTTP/1.1" 200 OK'
            )
    return out


def write_synthetic_log(path: Path, target_bytes: int, seed: int = 1) -> int:
    """Write a current-format log of about ``target_bytes``: a startup, then steady traffic.

    A few rare events are sprinkled through it (a runtime mamba OOM, a sigquit) so a reader that
    drops them is caught.

    Returns:
        The number of lines written.
    """
    block = steady_lines(20_000, seed)
    payload = "\n".join(block) + "\n"
    written = 0
    lines = 0
    with open(path, "w", encoding="utf-8") as handle:
        head = "\n".join(startup_block()) + "\n"
        handle.write(head)
        written += len(head)
        lines += len(STARTUP_LINES)
        rounds = 0
        while written < target_bytes:
            handle.write(payload)
            written += len(payload)
            lines += len(block)
            rounds += 1
            if rounds % 50 == 0:
                handle.write(
                    f"[{_stamp(rounds)}] Not enough space for mamba cache, try to increase "
                    "--mamba-full-memory-ratio or --max-mamba-cache-size.\n"
                )
                lines += 1
        handle.write(
            "[2026-05-10 01:00:00] Received sigquit from a child process. "
            "It usually means the child failed.\n"
        )
        lines += 1
    return lines

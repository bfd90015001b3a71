"""One template for the simulated-fleet profiles tests write (the seed's shared flags)."""

from __future__ import annotations


def sim_profile_text(
    name: str,
    gpus: list[int],
    ports: list[int],
    log_dir: str,
    server: str,
    speed: float,
    extra: str = "",
    sim_gpu: str = "b200",
) -> str:
    """A sim profile document: the seed's speculative settings plus ``server`` knobs.

    Args:
        name: profile name.
        gpus: GPU indices.
        ports: one port per GPU.
        log_dir: log directory (``{state}`` is resolved by the profile loader).
        server: extra ``[server]`` lines (the knobs).
        speed: simulator speed.
        extra: lines after ``[server.extra_flags]`` (more flags, or ``[gpu.N]`` overrides).
        sim_gpu: simulated GPU kind.
    """
    return f"""
name = "{name}"
[engine]
kind = "sim"
sim_gpu = "{sim_gpu}"
sim_model = "qwen3.6-27b"
sim_speed = {speed}
[fleet]
gpus = {gpus}
ports = {ports}
host = "127.0.0.1"
log_dir = "{log_dir}"
log_file = "sglang_gpu{{gpu}}.log"
[server]
model_path = "Qwen/Qwen3.6-27B-FP8"
mamba_radix_cache_strategy = "extra_buffer"
speculative_algorithm = "EAGLE"
speculative_num_steps = 3
speculative_eagle_topk = 1
speculative_num_draft_tokens = 4
{server}
[server.extra_flags]
enable_metrics = true
{extra}
"""

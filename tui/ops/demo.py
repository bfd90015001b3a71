"""What a console (or the demo) needs from a profile: the fleet spec, the pipeline, the prompts.

The demo's fleet is started with ``FleetOps.start``: servers of a previous run that still run
(fleet state, alive, same identity) are re-attached, the others are launched, so closing the
console with "keep" and opening it again shows the same processes.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

from tui import paths
from tui.fleet.spec import FleetSpec
from tui.ops.pipeline import PipelineConfig, find_pipelines
from tui.outputs import make_dir, replace_file
from tui.pipeline.fleet_urls import server_urls
from tui.pipeline.status import read_status
from tui.profiles import Profile, log_path_for

DEMO_PROMPTS = 100_000
"""Prompts in the demo's generated prompt set."""

TOPICS = (
    "the history of the printing press",
    "how a heat pump works",
    "the rules of chess for a beginner",
    "why the sky is blue",
    "how to bake sourdough bread",
    "the life cycle of a star",
    "what a hash table is",
    "the causes of the first world war",
)
"""Subjects of the demo prompts (varied so outputs differ)."""


def spec_for_profile(profile: Profile) -> FleetSpec:
    """The fleet the console watches for ``profile``: its GPUs, ports, host and log files.

    Args:
        profile: A validated profile.

    Returns:
        One server per GPU of the profile.
    """
    logs: list[str | None] = [str(log_path_for(profile, gpu)) for gpu in profile.gpus]
    ports = [profile.port_for(gpu) for gpu in profile.gpus]
    devices = [profile.device_for(gpu) for gpu in profile.gpus]
    return FleetSpec.from_ports(ports, profile.gpus, profile.host, logs, devices)


def still_running(profile: Profile) -> list[str]:
    """What still serves any of ``profile``'s ports, one line each (empty: nothing does).

    What ``gpufleet demo`` checks before it says that a failed start left nothing running.
    """
    from tui.control.preflight import port_holder

    lines = []
    for gpu in profile.gpus:
        port = profile.port_for(gpu)
        holder = port_holder(port, profile.host)
        if holder is not None:
            who = f"pid {holder.pid} ({holder.cmdline})" if holder.pid else holder.cmdline
            lines.append(f"GPU {gpu}: port {port} is still held by {who}")
    return lines


def demo_prompts_file() -> Path:
    """The demo's prompt set."""
    return paths.demo_dir() / "prompts.jsonl"


def pipeline_config(profile: Profile, prompts: Path, fleet_timeout_s: float) -> PipelineConfig:
    """The console's pipeline over ``profile``'s servers, with gpufleet's default files.

    Args:
        profile: The fleet's profile (its servers' URLs).
        prompts: The JSONL prompt file.
        fleet_timeout_s: How long the pipeline waits for a ready server (a retune of every GPU
            takes them all down for a while).

    Returns:
        The configuration (outputs under ``paths.pipeline_dir()``); on the demo's prompt set,
        a start after the job finished starts a fresh one (``fresh_job_if_finished``).
    """
    return PipelineConfig(
        prompts=prompts,
        out_dir=paths.pipeline_dir() / "out",
        status_path=paths.pipeline_status_file(),
        log_path=paths.pipeline_dir() / "pipeline.log",
        servers=tuple(server_urls(profile)),
        extra_args=("--fleet-timeout", f"{fleet_timeout_s:g}"),
        # The demo's prompt set is the demo's job: once done, `p` starts it again.
        fresh_when_finished=prompts == demo_prompts_file(),
    )


def fresh_job_if_finished(config: PipelineConfig) -> str | None:
    """Start the demo's next job afresh when its last one finished.

    A finished job's outputs hold a done record for every prompt, so a pipeline started on them
    has nothing to do and the demo would sit idle. When the status document says the last job
    finished and no pipeline runs, its outputs move to ``<out>-finished`` (replacing the one
    kept before: at most one finished job is kept) and its status document goes, so the next
    pipeline starts the job from its first prompt. A stopped or failed job is left to resume.

    Args:
        config: The demo's pipeline.

    Returns:
        What was done, in words, or None when there was nothing to reset.
    """
    status = read_status(config.status_path)
    if status is None or status.state != "finished" or not config.out_dir.exists():
        return None
    if find_pipelines(config.status_path):
        return None
    kept = config.out_dir.with_name(f"{config.out_dir.name}-finished")
    shutil.rmtree(kept, ignore_errors=True)
    config.out_dir.rename(kept)
    config.status_path.unlink(missing_ok=True)
    return (
        f"the last demo job finished ({status.done:,} of {status.total:,} prompts done); "
        f"starting a fresh one (the finished job's outputs are in {kept})"
    )


def ensure_prompts(path: Path, count: int = DEMO_PROMPTS) -> bool:
    """Write ``count`` chat prompts (JSONL) to ``path`` unless it already exists.

    Args:
        path: The prompt file.
        count: How many prompts.

    Returns:
        True when the file was written now.
    """
    if path.exists():
        return False
    make_dir(path.parent)
    lines = []
    for i in range(count):
        text = f"Prompt {i}: explain {TOPICS[i % len(TOPICS)]} in {3 + i % 5} paragraphs."
        lines.append(json.dumps({"messages": [{"role": "user", "content": text}]}))
    # Replaced whole: a half-written set is never seen as the demo's prompts.
    replace_file(path, ("\n".join(lines) + "\n").encode(), mode=0o644)
    return True


def demo_profile(
    base: Profile,
    gpu_count: int | None = None,
    speed: float | None = None,
    base_port: int | None = None,
) -> Profile:
    """The demo's fleet: ``base`` with fewer GPUs, another sim speed or other ports.

    Args:
        base: The simulated fleet's profile (``sim-baseline``).
        gpu_count: Use only the first N GPUs (1 .. the profile's count).
        speed: Simulator time compression (> 0).
        base_port: First port (the others follow), for running beside another fleet.

    Returns:
        The adjusted profile (same name: it is the same configuration, run faster or smaller).

    Raises:
        ValueError: naming the option, its value and the allowed range.
    """
    gpus = base.gpus
    if gpu_count is not None:
        if not 1 <= gpu_count <= len(base.gpus):
            raise ValueError(f"--gpus: {gpu_count} is outside 1..{len(base.gpus)}")
        gpus = base.gpus[:gpu_count]
    ports = tuple(base.port_for(g) for g in gpus)
    if base_port is not None:
        if not 1024 <= base_port <= 65535 - len(gpus):
            raise ValueError(f"--base-port: {base_port} is outside 1024..{65535 - len(gpus)}")
        ports = tuple(base_port + i for i in range(len(gpus)))
    engine = base.engine
    if speed is not None:
        if not 0 < speed <= 10_000:
            raise ValueError(f"--speed: {speed} is outside (0, 10000]")
        engine = replace(engine, sim_speed=float(speed))
    overrides = tuple(o for o in base.overrides if o.gpu in gpus)
    return replace(base, gpus=gpus, ports=ports, engine=engine, overrides=overrides)

"""The simulated-fleet kit the benchmarks and the tests share (tests import it from here).

Profiles: ``sim_profile_text`` is the one template of a simulated fleet's profile (the seed's
model and flags), with the seed's knob sets (BASELINE, AGGRESSIVE, WORSE). Processes:
``free_ports`` for a fleet, ``sims_on_ports`` / ``kill_strays`` for simulated servers a failed
stop left behind. Runs: ``sim_fleet`` writes profile files for an N-GPU simulated fleet
(baseline, aggressive, worse, and one whose per-GPU override does not fit), launches the baseline
with ``gpufleet apply`` and always stops every server afterwards; ``pipeline`` runs ``gpufleet
generate`` as a real process against the fleet and always stops it.

It lives under bench/ because benchmarks must not import from tests/, while the tests (run with
the repository root on sys.path, see tests/conftest.py) may import from bench/.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from bench.ports import free_ports
from tui.control.stop import StopMode
from tui.control.stop_release import StopTimeouts
from tui.gpu.sim_records import SIM_GPU_KINDS
from tui.ops.cli import apply as apply_cli
from tui.ops.service import FleetOps, OperationError, OpsOptions
from tui.sglang.builds import SGLANG_0_5_23, Build
from tui.sglang.memory import plan_memory
from tui.sglang.models import ModelSpec, get_model
from tui.sglang.plan_types import MemoryPlan

ROOT = Path(__file__).resolve().parent.parent

BASELINE = "mem_fraction_static = 0.88\nmax_mamba_cache_size = 80\nmamba_full_memory_ratio = 0.4\n"
"""The seed's baseline knobs (``[server]`` lines)."""
AGGRESSIVE = (
    "mem_fraction_static = 0.93\nmax_mamba_cache_size = 200\n"
    "mamba_full_memory_ratio = 0.6\nmax_running_requests = 64\n"
)
"""The seed's aggressive knobs (SGLang caps the 64 running requests to 40 on this model)."""
WORSE = BASELINE + "max_running_requests = 4\n"
"""The baseline starved of running requests: a canary must judge it worse."""
FAST_APPLY = ["--timeout", "60", "--term-timeout", "5", "--release-timeout", "20", "--no-measure"]
"""``gpufleet apply`` flags for a fast simulated fleet: short timeouts, no throughput window."""
SEED_FLAGS = """mamba_radix_cache_strategy = "extra_buffer"
speculative_algorithm = "EAGLE"
speculative_num_steps = 3
speculative_eagle_topk = 1
speculative_num_draft_tokens = 4
"""
"""The seed's ``[server]`` settings besides the knobs: radix-cache strategy and speculation."""


def seed_aggressive_plan(
    model: ModelSpec | None = None, build: Build = SGLANG_0_5_23
) -> MemoryPlan:
    """The seed's aggressive configuration (``AGGRESSIVE``'s knobs with EAGLE) planned on a
    simulated B200: hybrid Mamba with a draft, the longest decode lines.

    Args:
        model: the model (default: the seed's qwen3.6-27b).
        build: the SGLang build whose sizing applies.
    """
    return plan_memory(
        model or get_model("qwen3.6-27b"),
        SIM_GPU_KINDS["b200"][1],
        mem_fraction_static=0.93,
        max_mamba_cache_size=200,
        mamba_full_memory_ratio=0.6,
        max_running_requests=64,
        speculative_algorithm="EAGLE",
        build=build,
    )


@contextlib.contextmanager
def state_dir(path: Path) -> Iterator[Path]:
    """gpufleet's state directory at ``path`` for the block (``GPUFLEET_STATE_DIR``: every
    operation, lock and journal of a bench in its scratch), the caller's put back after."""
    old = os.environ.get("GPUFLEET_STATE_DIR")
    os.environ["GPUFLEET_STATE_DIR"] = str(path)
    try:
        yield path
    finally:
        if old is None:
            os.environ.pop("GPUFLEET_STATE_DIR", None)
        else:
            os.environ["GPUFLEET_STATE_DIR"] = old


def sim_profile_text(
    name: str,
    gpus: list[int],
    ports: list[int],
    log_dir: str,
    server: str,
    speed: float,
    extra: str = "",
    sim_gpu: str = "b200",
    *,
    seed_flags: bool = True,
    metrics: bool = True,
) -> str:
    """A sim profile document: the seed's model (and SEED_FLAGS) plus ``server`` knobs.

    Args:
        name: profile name.
        gpus: GPU indices.
        ports: one port per GPU.
        log_dir: log directory (``{state}`` is resolved by the profile loader).
        server: extra ``[server]`` lines (the knobs).
        speed: simulator speed.
        extra: lines after ``[server.extra_flags]`` (more flags, or ``[gpu.N]`` overrides).
        sim_gpu: simulated GPU kind.
        seed_flags: include SEED_FLAGS (a bench may time the bare model without them).
        metrics: end with ``[server.extra_flags]`` (``enable_metrics``, then ``extra``); without
            it ``extra`` is not written.
    """
    text = f"""
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
{SEED_FLAGS if seed_flags else ""}{server}
"""
    if metrics:
        text += f"[server.extra_flags]\nenable_metrics = true\n{extra}\n"
    return text


def sims_on_ports(ports: list[int]) -> Iterator[psutil.Process]:
    """Running simulated servers (``... sim ... --port P``) on any of ``ports``."""
    wanted = {str(p) for p in ports}
    for proc in psutil.process_iter(["pid", "cmdline"]):
        argv = proc.info["cmdline"] or []
        if "sim" in argv and "--port" in argv:
            i = argv.index("--port")
            if i + 1 < len(argv) and argv[i + 1] in wanted:
                yield proc


def kill_strays(ports: list[int]) -> None:
    """Kill simulated servers on these ports that the fleet record lost track of."""
    for proc in sims_on_ports(ports):
        with contextlib.suppress(psutil.Error):
            proc.kill()
            proc.wait(timeout=10)


@dataclass(frozen=True)
class SimFleet:
    """Profile files of one simulated fleet and its ports."""

    gpus: list[int]
    """GPU indices."""
    ports: list[int]
    """One port per GPU."""
    files: dict[str, Path]
    """Profile files: baseline, aggressive, worse, and 'misfit-<gpu>' variants."""

    @property
    def urls(self) -> list[str]:
        """Base URLs of the servers."""
        return [f"http://127.0.0.1:{p}" for p in self.ports]


@contextlib.contextmanager
def sim_fleet(
    tmp: Path, n_gpus: int, speed: float, misfit_gpu: int | None = None
) -> Iterator[SimFleet]:
    """Write the fleet's profiles, launch the baseline on every GPU, clean everything up.

    Args:
        tmp: Scratch directory (profiles and logs).
        n_gpus: Fleet size.
        speed: ``sim_speed``.
        misfit_gpu: Also write 'misfit' = aggressive with a per-GPU override that does not fit
            on this GPU.

    Yields:
        The fleet, running the baseline.
    """
    gpus = list(range(n_gpus))
    ports = free_ports(n_gpus)
    logs = tmp / "logs"
    variants = {"baseline": BASELINE, "aggressive": AGGRESSIVE, "worse": WORSE}
    files: dict[str, Path] = {}
    for key, server in variants.items():
        files[key] = tmp / f"{key}.toml"
        files[key].write_text(sim_profile_text(f"t-{key}", gpus, ports, str(logs), server, speed))
    if misfit_gpu is not None:
        files["misfit"] = tmp / "misfit.toml"
        override = f"[gpu.{misfit_gpu}]\nmem_fraction_static = 0.35\n"
        files["misfit"].write_text(
            sim_profile_text("t-misfit", gpus, ports, str(logs), AGGRESSIVE, speed, override)
        )
    try:
        if apply_cli.main([str(files["baseline"]), *FAST_APPLY]) != 0:
            raise AssertionError("the baseline fleet did not come up")
        yield SimFleet(gpus, ports, files)
    finally:
        stop_all()
        kill_strays(ports)


def stop_all(mode: StopMode = "terminate", drain_s: float = 5.0, release_s: float = 10.0) -> None:
    """Stop every server the fleet state records, through the operations core (teardown).

    Args:
        mode: drain, terminate (default: a test's teardown loses nothing it measures) or kill.
        drain_s: With drain, the drain's deadline.
        release_s: The GPU-release wait.
    """
    import asyncio

    options = OpsOptions(stop=StopTimeouts(drain_s=drain_s, kill_s=5.0, release_s=release_s))
    # A GPU whose stop failed is left to kill_strays, which every teardown calls next.
    with contextlib.suppress(OperationError):
        asyncio.run(FleetOps(options=options, by="test").stop_fleet(mode=mode))


def write_prompts(path: Path, count: int) -> Path:
    """``count`` completion prompts, one JSON object a line."""
    with path.open("w") as handle:
        for i in range(count):
            handle.write(json.dumps({"prompt": f"Write story number {i}."}) + "\n")
    return path


@dataclass(frozen=True)
class PipelineRun:
    """A running ``gpufleet generate``."""

    proc: subprocess.Popen[bytes]
    """The pipeline process."""
    out: Path
    """Its output directory."""
    status: Path
    """Its status document."""
    log: Path
    """Its stderr/stdout."""
    total: int
    """Prompts in the job."""


@contextlib.contextmanager
def pipeline(
    tmp: Path,
    urls: list[str],
    prompts: int,
    max_tokens: int,
    inflight: int = 48,
    flush_s: float = 2.0,
) -> Iterator[PipelineRun]:
    """Run the generation pipeline against ``urls``; SIGTERM (then SIGKILL) it on exit."""
    work = tmp / "pipeline"
    work.mkdir(exist_ok=True)
    prompt_file = write_prompts(work / "prompts.jsonl", prompts)
    out, status, log = work / "out", work / "status.json", work / "pipeline.log"
    argv = [sys.executable, "-m", "tui", "generate", "--prompts", str(prompt_file)]
    argv += ["--out", str(out), "--status", str(status), "--max-tokens", str(max_tokens)]
    argv += ["--per-server-inflight", str(inflight), "--flush-interval", str(flush_s)]
    argv += ["--shard-size", "500", "--fleet-timeout", "30", "--request-timeout", "120"]
    for url in urls:
        argv += ["--server", url]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            argv, stdout=sink, stderr=subprocess.STDOUT, env=env, cwd=ROOT, start_new_session=True
        )
    run = PipelineRun(proc, out, status, log, prompts)
    try:
        yield run
    finally:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)


def wait_done_at_least(run: PipelineRun, count: int, timeout: float) -> dict[str, Any]:
    """Poll the status document until ``done >= count``; returns the document."""
    deadline = time.monotonic() + timeout
    doc: dict[str, Any] = {}
    while time.monotonic() < deadline:
        if run.proc.poll() is not None and run.proc.returncode != 0:
            raise AssertionError(f"pipeline exited {run.proc.returncode}:\n{run.log.read_text()}")
        with contextlib.suppress(OSError, ValueError):
            doc = json.loads(run.status.read_text())
            if int(doc.get("done", 0)) >= count:
                return doc
        time.sleep(0.1)
    raise AssertionError(f"pipeline did not reach {count} done in {timeout} s: {doc}")

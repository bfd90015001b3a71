"""One simulated server's life: SGLang's startup phases and log lines, HTTP, drain, exit.

Startup follows sglang-ops.md (d): arg resolution, memory baseline, weight load (and the draft's),
pools (Mamba, KV, draft KV), CUDA-graph capture, the summary line, uvicorn, the warmup request,
``The server is fired up and ready to roll!``. A failing plan prints the scheduler's traceback and
the parent's SIGQUIT line and exits 1. SIGTERM before readiness kills at once (Python's default, as
in SGLang); after readiness it drains in-flight requests (bounded) and exits 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import uvicorn

import tui
from tui.gpu.sim_records import ensure_device
from tui.sglang.models import CUDA_CONTEXT_BYTES, ModelSpec
from tui.sglang.plan_types import MemoryPlan, PlanFailure
from tui.sim import logfmt
from tui.sim.app import build_app
from tui.sim.scheduler import SimScheduler
from tui.sim.state import SimState

PHASE_SECONDS: dict[str, float] = {
    "import": 5.0,
    "baseline": 1.0,
    "weights": 16.0,
    "draft": 2.0,
    "pools": 1.5,
    "capture": 5.0,
    "warmup": 2.5,
}
"""Real-time length of each startup phase (the seed's servers were ready in ~30-35 s)."""

DRAIN_LIMIT_S = 30.0
"""Longest a SIGTERM drain waits for in-flight requests (wall seconds)."""

LOG_FORMAT = "[%(asctime)s] %(levelprefix)s %(message)s"
ACCESS_FORMAT = '[%(asctime)s] %(levelprefix)s %(client_addr)s - "%(request_line)s" %(status_code)s'
DATEFMT = "%Y-%m-%d %H:%M:%S"


@dataclass(frozen=True, slots=True)
class SimConfig:
    """Everything one simulated server needs, resolved from its command line."""

    plan: MemoryPlan
    """The memory plan (may carry a failure)."""
    model: ModelSpec
    """The served model."""
    host: str
    """HTTP host."""
    port: int
    """HTTP port."""
    speed: float
    """``--sim-speed``."""
    startup_scale: float
    """Multiplier on PHASE_SECONDS."""
    gpu_index: int
    """Simulated GPU index."""
    gpu_kind: str
    """Simulated GPU kind."""
    root: Path
    """Simulated driver directory."""
    server_args: dict[str, object]
    """Resolved server args."""
    model_path: str
    """``--model-path``."""
    served_model_name: str
    """Served model name."""
    launch_command: str
    """argv joined."""
    enable_metrics: bool
    """``--enable-metrics``."""
    decode_log_interval: int
    """``--decode-log-interval``."""
    skip_warmup: bool
    """``--skip-server-warmup``."""
    info_logs: bool
    """False when --log-level hides INFO lines."""
    early_messages: tuple[str, ...]
    """Warnings printed during argument resolution."""
    seed: int
    """Random seed."""
    cuda_backing: bool = False
    """Allocate the memory for real on the GPU (``--gpu-backing cuda``)."""


class Emitter:
    """Writes SGLang-prefixed lines to stdout, flushing each (the launcher redirects it)."""

    def __init__(self, stream: IO[str], info: bool = True) -> None:
        """Args: stream: where lines go; info: print INFO-level lines."""
        self.stream = stream
        self.info_enabled = info

    def __call__(self, message: str, info: bool = True) -> None:
        """Print one message (INFO unless ``info`` is False)."""
        if info and not self.info_enabled:
            return
        self.stream.write(logfmt.stamp(message) + "\n")
        self.stream.flush()


class _Server(uvicorn.Server):
    """uvicorn without its signal handlers: the simulator owns SIGTERM (drain) itself."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def _uvicorn_log_config() -> dict[str, Any]:
    fmt = {"()": "uvicorn.logging.DefaultFormatter", "use_colors": False, "datefmt": DATEFMT}
    access = {"()": "uvicorn.logging.AccessFormatter", "use_colors": False, "datefmt": DATEFMT}
    handler = {"class": "logging.StreamHandler", "stream": "ext://sys.stdout"}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {
            "default": {**fmt, "fmt": LOG_FORMAT},
            "access": {**access, "fmt": ACCESS_FORMAT},
        },
        "handlers": {
            "default": {**handler, "formatter": "default"},
            "access": {**handler, "formatter": "access"},
        },
        "loggers": {
            "uvicorn": {"handlers": ["default"], "level": "INFO", "propagate": False},
            "uvicorn.error": {"level": "INFO"},
            "uvicorn.access": {"handlers": ["access"], "level": "INFO", "propagate": False},
        },
    }


class Holder:
    """The scheduler child process that holds the simulated (or, with cuda, real) GPU memory."""

    def __init__(self, root: Path, gpu_index: int, cuda: bool = False) -> None:
        """Spawn it (same process group: a group kill reaches it).

        With ``cuda`` the child allocates real device memory and answers each memory change;
        its stdout is then a pipe to us instead of the log.
        """
        env = dict(os.environ)
        project = str(Path(tui.__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (project, env.get("PYTHONPATH")) if p)
        argv = [sys.executable, "-m", "tui.sim.holder", str(root), str(gpu_index)]
        self.cuda = cuda
        self.proc = subprocess.Popen(
            [*argv, "--cuda"] if cuda else argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE if cuda else None,
            text=True,
            env=env,
        )
        self._last: tuple[int, int] | None = None
        if cuda and self._read() != "ready":
            raise RuntimeError("the GPU-backed scheduler child failed to initialise CUDA")

    def _read(self) -> str:
        if self.proc.stdout is None:
            return ""
        return self.proc.stdout.readline().strip()

    def publish(self, used_bytes: int, utilization: float) -> str | None:
        """Tell the child its memory and utilisation (skipped when unchanged).

        Returns:
            With cuda backing, PyTorch's out-of-memory message when a memory change could not
            be allocated for real; otherwise None.
        """
        key = (used_bytes, round(utilization))
        if key == self._last or self.proc.stdin is None:
            return None
        grow = self.cuda and (self._last is None or self._last[0] != used_bytes)
        self._last = key
        with contextlib.suppress(BrokenPipeError, ValueError):
            mark = "=" if grow else ""
            self.proc.stdin.write(f"{mark}{used_bytes} {utilization:.1f} {utilization * 0.6:.1f}\n")
            self.proc.stdin.flush()
            if grow:
                reply = self._read()
                if reply.startswith("oom "):
                    return reply[4:]
                if reply != "ok":
                    return "CUDA error: the GPU-backed scheduler child died"
        return None

    def close(self, timeout: float = 5.0) -> None:
        """Close the pipe (the child withdraws its record and exits) and reap it."""
        with contextlib.suppress(BrokenPipeError, ValueError, OSError):
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _real_oom(message: str, phase: str) -> PlanFailure:
    """A real CUDA OOM from the GPU-backed child, as SGLang's traceback would end."""
    return PlanFailure("cuda_oom_real", "torch.OutOfMemoryError", message, phase=phase)


async def _phase(cfg: SimConfig, name: str, fraction: float = 1.0) -> float:
    seconds = PHASE_SECONDS[name] * fraction * cfg.startup_scale
    await asyncio.sleep(seconds)
    return seconds


def _fail(emit: Emitter, failure: PlanFailure, holder: Holder) -> int:
    lines = logfmt.failure_lines(failure)
    emit("\n".join(lines[:-2]), info=False)
    emit(lines[-1], info=False)
    holder.close()
    return 1


async def run_server(cfg: SimConfig, emit: Emitter) -> int:
    """Start, serve until SIGTERM, drain; or fail the way SGLang does.

    Args:
        cfg: the resolved configuration.
        emit: the log writer.

    Returns:
        Exit status (0 after a drain, 1 on a startup failure).
    """
    began = time.monotonic()
    ensure_device(cfg.root, cfg.gpu_index, cfg.gpu_kind)
    holder = Holder(cfg.root, cfg.gpu_index, cuda=cfg.cuda_backing)
    try:
        return await _lifecycle(cfg, emit, holder, began)
    finally:
        holder.close()


async def _lifecycle(cfg: SimConfig, emit: Emitter, holder: Holder, began: float) -> int:
    plan, model = cfg.plan, cfg.model
    holder.publish(CUDA_CONTEXT_BYTES, 0.0)
    for message in cfg.early_messages:
        emit(message, info=False)
    emit(logfmt.server_args_line(cfg.server_args))
    await _phase(cfg, "import")
    emit(logfmt.memory_baseline_line(CUDA_CONTEXT_BYTES))
    await _phase(cfg, "baseline")
    emit(logfmt.load_weight_begin_line(plan.pre_bytes))
    elapsed = await _phase(cfg, "weights")
    if plan.failure is not None and plan.failure.phase == "load_weights" and not cfg.cuda_backing:
        return _fail(emit, plan.failure, holder)
    after_target = plan.pre_bytes - plan.weight_bytes
    emit(logfmt.load_weight_end_line(model, elapsed, after_target, plan.weight_bytes))
    if (oom := holder.publish(CUDA_CONTEXT_BYTES + plan.weight_bytes, 0.0)) is not None:
        return _fail(emit, _real_oom(oom, "load_weights"), holder)
    if plan.speculative:
        emit(logfmt.load_weight_begin_line(after_target))
        elapsed = await _phase(cfg, "draft")
        emit(
            logfmt.load_weight_end_line(
                model, elapsed, plan.avail_after_weights_bytes, plan.draft_weight_bytes, draft=True
            )
        )
    if plan.failure is not None and plan.failure.phase == "memory_pool":
        return _fail(emit, plan.failure, holder)
    if plan.is_hybrid_mamba:
        emit(logfmt.mamba_line(plan))
    for warning in plan.warnings:
        if not warning.startswith("Max running requests is reset"):
            emit(warning, info=False)
    emit(logfmt.kv_line(plan.max_total_num_tokens, plan.k_bytes, plan.v_bytes))
    draft_kv = plan.draft_k_bytes + plan.draft_v_bytes
    emit(logfmt.memory_pool_end_line(plan.available_after_pools_bytes + draft_kv))
    await _phase(cfg, "pools")
    if plan.speculative:
        emit(logfmt.kv_line(plan.max_total_num_tokens, plan.draft_k_bytes, plan.draft_v_bytes))
        emit(logfmt.memory_pool_end_line(plan.available_after_pools_bytes))
    if (oom := holder.publish(plan.resident_bytes - plan.graph_bytes, 0.0)) is not None:
        return _fail(emit, _real_oom(oom, "memory_pool"), holder)
    if cfg.cuda_backing:
        # Capture for real: the graphs plus the chunked-prefill activations must fit in what the
        # static fraction left free; if they do not, the allocation fails as SGLang's does.
        peak = (
            plan.resident_bytes + cfg.model.activation_bytes_per_token * plan.chunked_prefill_size
        )
        if (oom := holder.publish(peak, 0.0)) is not None:
            return _fail(emit, _real_oom(oom, "cuda_graph"), holder)
    names = logfmt.graph_names(plan)
    avail = plan.available_after_pools_bytes
    for name in names:
        emit(logfmt.capture_begin_line(name, avail))
        elapsed = await _phase(cfg, "capture", 1 / len(names))
        modelled_oom = plan.failure is not None and plan.failure.phase == "cuda_graph"
        if modelled_oom and not cfg.cuda_backing and plan.failure is not None:
            return _fail(emit, plan.failure, holder)
        used = plan.graph_bytes // len(names)
        avail -= used
        emit(logfmt.capture_end_line(name, plan.cuda_graph_max_bs, elapsed, used, avail))
    holder.publish(plan.resident_bytes, 0.0)
    emit(logfmt.summary_line(plan))
    return await _serve(cfg, emit, holder, began)


async def _serve(cfg: SimConfig, emit: Emitter, holder: Holder, began: float) -> int:
    plan = cfg.plan
    sch = SimScheduler(
        plan,
        cfg.model,
        speed=cfg.speed,
        decode_log_interval=cfg.decode_log_interval,
        emit=emit,
        seed=cfg.seed,
    )
    state = SimState(
        plan=plan,
        model=cfg.model,
        scheduler=sch,
        server_args=cfg.server_args,
        model_path=cfg.model_path,
        served_model_name=cfg.served_model_name,
        launch_command=cfg.launch_command,
        enable_metrics=cfg.enable_metrics,
        emit=emit,
    )
    config = uvicorn.Config(
        build_app(state),
        host=cfg.host,
        port=cfg.port,
        log_config=_uvicorn_log_config(),
        log_level="info" if cfg.info_logs else "warning",
        lifespan="on",
        timeout_keep_alive=5,
    )
    server = _Server(config)
    tasks: list[asyncio.Task[Any]] = [asyncio.create_task(sch.run(), name="scheduler")]
    tasks.append(asyncio.create_task(_telemetry(sch, holder, plan), name="telemetry"))
    serve_task = asyncio.create_task(server.serve(), name="uvicorn")
    try:
        while not server.started and not serve_task.done():
            await asyncio.sleep(0.01)  # uvicorn exposes no started event; bounded to startup
        if serve_task.done():
            serve_task.result()
            return 1
        if not cfg.skip_warmup:
            emit(logfmt.access_line("127.0.0.1:0", "GET", "/model_info", 200))
            warm = sch.submit("WARMUP", 4, 8, True)
            await warm.done
            emit(logfmt.access_line("127.0.0.1:0", "POST", "/generate", 200))
            await _phase(cfg, "warmup")
        state.status = "ready"
        state.startup_time = time.monotonic() - began
        emit(logfmt.READY_LINE)
        loop = asyncio.get_running_loop()
        drain = _Drainer(state, server, emit)
        loop.add_signal_handler(signal.SIGTERM, drain.start)
        await serve_task
        return 0
    finally:
        server.should_exit = True
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _telemetry(sch: SimScheduler, holder: Holder, plan: MemoryPlan) -> None:
    """Publish utilisation when the batch changes, at most about once a second."""
    while True:
        holder.publish(plan.resident_bytes, sch.utilization())
        await sch.wait_changed()
        await asyncio.sleep(1.0)


class _Drainer:
    """SIGTERM after readiness: stop admitting, finish in-flight requests (bounded), stop."""

    def __init__(self, state: SimState, server: uvicorn.Server, emit: Callable[..., None]) -> None:
        self.state, self.server, self.emit = state, server, emit
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self.task is None:
            self.task = asyncio.get_running_loop().create_task(self._drain())

    async def _drain(self) -> None:
        sch = self.state.scheduler
        self.state.status = "draining"
        sch.draining = True
        self.emit(
            "SIGTERM received. signum=15, frame=None. Draining requests and shutting down...",
            info=False,
        )
        deadline = time.monotonic() + DRAIN_LIMIT_S
        while sch.in_flight and time.monotonic() < deadline:
            self.emit(
                f"Gracefully exiting... Remaining number of requests {sch.in_flight}.", info=False
            )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(sch.wait_idle(), min(5.0, deadline - time.monotonic()))
        self.server.should_exit = True

"""One simulated server's life: a main process and its children, as SGLang 0.5.23 runs one.

The main process prints ``server_args``, spawns ``sglang::scheduler`` (it holds the GPU memory)
and ``sglang::detokenizer`` (``tui.sim.children``), lets the scheduler start (``tui.sim.startup``),
starts the subprocess watchdog and then uvicorn, whose lifespan runs the warmup over HTTP
(``tui.sim.warmup``) until ``The server is fired up and ready to roll!``. Signals follow the
source (``tui.sim.signals``, ``tui.sim.drain``):

* SIGTERM to the main pid before the first request kills it at once (Python's default; the
  children follow through PR_SET_PDEATHSIG); after it, the drain: exit 0 once nothing is left
  (SGLang 0.5.17: ``kill_process_tree`` of itself, exit -9, ``tui.sim.drain``).

``--sim-build 0.5.17`` imitates a real 0.5.17 server as recorded (``tests/fixtures/real_sglang/
0.5.17``): its startup lines (``tui.sim.startup_0517``), its multiprocessing resource tracker
child, no ``/ready``, ``/get_load``, its ``/server_info`` and ``/metrics`` (``tui.sim.shapes``,
``tui.sim.metrics``), the drain's exit -9, the SIGQUIT handler's 5 s crash diagnostics.
* SIGTERM to the whole group kills the children at once (no handler); the watchdog sees the
  scheduler's -15 on its next tick, SIGQUITs the main process, which kills itself (exit 137): every
  request in flight is lost, its connection dropped unanswered.
* SIGQUIT (a child failed) and a startup failure: the scheduler's traceback, its SIGQUIT, the main
  process's line, exit 137. SIGINT: uvicorn stops, then KeyboardInterrupt ends the process.

Simulated durations (startup phases via ``--sim-startup-seconds``/``--sim-speed``; the drain's
5 s checks, the 15 s scheduler exit wait, the watchdog's 1 s tick and the ``--sim-fault`` times
via ``--sim-speed``) are wall seconds divided by the speed. The health handler's one-second
checks and ``SGLANG_HEALTH_CHECK_TIMEOUT`` are wall seconds: they are what clients time out on.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import uvicorn
from starlette.applications import Starlette

from tui.gpu.sim_records import ensure_device
from tui.sglang.builds import SGLANG_0_5_17
from tui.sglang.plan_types import MemoryPlan, PlanFailure
from tui.sim import lines_0517, logfmt
from tui.sim.app import build_app
from tui.sim.children import (
    Child,
    DetokenizerChild,
    ExitWatch,
    ResourceTrackerChild,
    SchedulerChild,
)
from tui.sim.config import Emitter, SimConfig
from tui.sim.drain import Drain
from tui.sim.faults import Fault
from tui.sim.scheduler import Mode, SimScheduler
from tui.sim.signals import ProcessControl
from tui.sim.startup import PHASE_SECONDS, StartupTimes, phase, start_scheduler
from tui.sim.startup_0517 import graphs_disabled, start_scheduler_0517
from tui.sim.state import SimState
from tui.sim.warmup import Warmup

__all__ = ["PHASE_SECONDS", "Emitter", "SimConfig", "run_server"]

LOG_FORMAT = "[%(asctime)s] %(levelprefix)s %(message)s"
ACCESS_FORMAT = '[%(asctime)s] %(levelprefix)s %(client_addr)s - "%(request_line)s" %(status_code)s'
DATEFMT = "%Y-%m-%d %H:%M:%S"

CRASH_GRACE_S = 30.0
"""Longest wait for the scheduler's SIGQUIT after it was told to crash (then we kill ourselves)."""


def _uvicorn_log_config() -> dict[str, Any]:
    """SGLang's ``set_uvicorn_logging_configs`` formats (``srt/utils/common.py``)."""
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


async def run_server(cfg: SimConfig, emit: Emitter) -> int:
    """Start, serve until stopped; or fail the way SGLang does.

    Args:
        cfg: the resolved configuration.
        emit: the log writer.

    Returns:
        Exit status 0 after a drain (the other endings kill the process: 137, or a signal).
    """
    began = time.monotonic()
    ensure_device(cfg.root, cfg.gpu_index, cfg.gpu_kind)
    v0517 = cfg.plan.build == SGLANG_0_5_17
    control = ProcessControl(emit, cfg.speed, diagnostics=v0517)
    control.install_launch_phase()
    for message in cfg.early_messages:
        emit(message, info=False)
    if v0517:
        emit(lines_0517.server_args_line(cfg.server_args))
        # Its multiprocessing resource tracker comes first (the recorded ps: its pid is lowest).
        control.helpers = [ResourceTrackerChild()]
    else:
        emit(logfmt.server_args_line(cfg.server_args))
    scheduler = SchedulerChild(
        cfg.root,
        cfg.gpu_index,
        cuda=cfg.cuda_backing,
        speed=cfg.speed,
        card_bytes=cfg.plan.gpu_total_bytes,
    )
    control.children = [scheduler, DetokenizerChild()]
    server = _Server(cfg, emit, control, scheduler, began)
    watch = ExitWatch(control.children, server.child_exited)
    try:
        return await server.run()
    finally:
        watch.close()
        # launch_server.py's ``finally: kill_process_tree(os.getpid(), include_parent=False)``.
        control.kill_tree(include_parent=False)


class _Server:
    """The main process after its children are spawned."""

    def __init__(
        self,
        cfg: SimConfig,
        emit: Emitter,
        control: ProcessControl,
        scheduler: SchedulerChild,
        began: float,
    ) -> None:
        self.cfg, self.emit, self.control = cfg, emit, control
        self.scheduler_child = scheduler
        self.began = began
        self.sim: SimScheduler | None = None
        self.tasks: list[asyncio.Task[Any]] = []

    def child_exited(self, child: Child) -> None:
        """A child died: no output comes back any more; the watchdog reports it on its tick."""
        if self.sim is not None:
            self.sim.stall(Mode.HUNG)
        self.control.child_exited(child)

    async def crash(self, failure: PlanFailure, preamble: str | None = None) -> None:
        """The scheduler's exception path: its traceback, its SIGQUIT to us, our death."""
        if self.sim is not None:
            self.sim.stall(Mode.HUNG)
        if preamble is not None:
            self.emit(preamble, info=False)
        self.emit(logfmt.scheduler_exception(failure), info=False)
        self.scheduler_child.crash()
        await asyncio.sleep(CRASH_GRACE_S)  # the SIGQUIT handler kills the process before this
        self.control.kill_tree(include_parent=True)

    async def run(self) -> int:
        cfg = self.cfg
        await phase(cfg, "import")
        times = StartupTimes()
        start = start_scheduler_0517 if cfg.plan.build == SGLANG_0_5_17 else start_scheduler
        failure = await start(cfg, self.emit, self.scheduler_child, times)
        if failure is not None:
            await self.crash(failure)
        scheduler_e2e = time.monotonic() - self.began
        self.emit(
            logfmt.engine_timings_line(
                times.load_weight,
                times.kv_cache_allocation,
                scheduler_e2e,
                times.cuda_graph,
                scheduler_e2e,
            )
        )
        self.control.start_watchdog(self.control.children)
        return await self.serve(times.as_dict(scheduler_e2e, scheduler_e2e))

    async def serve(self, startup_time: dict[str, object]) -> int:
        cfg, plan = self.cfg, self.cfg.plan
        state_box: list[SimState] = []
        sim = SimScheduler(
            plan,
            cfg.model,
            speed=cfg.speed,
            decode_log_interval=cfg.decode_log_interval,
            emit=self.emit,
            seed=cfg.seed,
            on_output=lambda: state_box[0].received(),
        )
        self.sim = sim
        v0517 = plan.build == SGLANG_0_5_17
        if plan.speculative and cfg.server_args.get("load_format") == "dummy":
            # Random weights: the draft is never right (a real 0.5.17 printed ``accept len:
            # 1.00, accept rate: 0.00`` for the recorded tiny model's MTP layer).
            sim.accept = 1.0
        sim.graphs = not (v0517 and graphs_disabled(cfg))
        sim.prefill_graphs = v0517 and sim.graphs and not plan.speculative
        state = SimState(
            plan=plan,
            model=cfg.model,
            scheduler=sim,
            server_args=cfg.server_args,
            model_path=cfg.model_path,
            served_model_name=cfg.served_model_name,
            launch_command=cfg.launch_command,
            enable_metrics=cfg.enable_metrics,
            emit=self.emit,
            gpu_name=cfg.gpu_name,
            startup_time=startup_time,
        )
        state_box.append(state)

        def auto_create_handle_loop() -> None:
            self.control.install_running_phase(drain.sigterm_handler)
            self.tasks.append(asyncio.create_task(drain.watchdog(), name="sigterm_watchdog"))

        state.on_first_request = auto_create_handle_loop
        warmup = Warmup(
            state,
            cfg.host,
            cfg.port,
            second=cfg.startup_scale,
            first_request_s=PHASE_SECONDS["warmup"] * cfg.startup_scale,
            skip=cfg.skip_warmup,
            kill_tree=lambda: self.control.kill_tree(include_parent=True),
        )

        @contextlib.asynccontextmanager
        async def lifespan(app: Starlette) -> AsyncIterator[None]:
            task = asyncio.create_task(self._warm_then_faults(warmup, sim), name="warmup")
            try:
                yield
            finally:
                await task  # SGLang joins the warmup thread

        config = uvicorn.Config(
            build_app(state, cfg.health, lifespan),
            host=cfg.host,
            port=cfg.port,
            log_config=_uvicorn_log_config(),
            log_level="info" if cfg.info_logs else "warning",
            lifespan="on",
            timeout_keep_alive=5,
        )
        server = uvicorn.Server(config)  # its own SIGINT/SIGTERM handlers, as in SGLang
        drain = Drain(
            state,
            self.control,
            self.scheduler_child,
            cfg.speed,
            lambda: _stop(server),
            exit_by_kill=v0517,
            emit_raw=self.emit.raw,
        )
        self.tasks += [
            asyncio.create_task(sim.run(), name="scheduler"),
            asyncio.create_task(_telemetry(sim, self.scheduler_child, plan), name="telemetry"),
        ]
        try:
            await server.serve()
        finally:
            for task in self.tasks:
                task.cancel()
            await asyncio.gather(*self.tasks, return_exceptions=True)
        return 0

    async def _warm_then_faults(self, warmup: Warmup, sim: SimScheduler) -> None:
        await warmup.run()
        self.tasks.append(asyncio.create_task(self._faults(sim), name="faults"))

    async def _faults(self, sim: SimScheduler) -> None:
        """Suffer each ``--sim-fault`` at its time (simulated seconds after readiness)."""
        for fault in self.cfg.faults:
            if fault.kind == "slow-health":
                sim.slow_health_s = fault.at_s
        start = time.monotonic()
        timed = sorted((f for f in self.cfg.faults if f.kind != "slow-health"), key=_when)
        for fault in timed:
            delay = start + fault.at_s / self.cfg.speed - time.monotonic()
            await asyncio.sleep(max(delay, 0.0))
            await self._suffer(fault, sim)

    async def _suffer(self, fault: Fault, sim: SimScheduler) -> None:
        if fault.kind == "stuck":
            sim.stall(Mode.STUCK)
        elif fault.kind == "hung":
            sim.stall(Mode.HUNG)
        elif fault.kind == "retract":
            sim.retract(fault.count)
        elif fault.kind == "slow":
            sim.speed = self.cfg.speed / fault.factor  # every step F times as long
        elif fault.kind == "crash":
            await self.crash(
                PlanFailure(
                    "illegal_memory_access",
                    "torch.AcceleratorError",
                    "CUDA error: an illegal memory access was encountered",
                    phase="forward",
                )
            )
        elif fault.kind == "decode-oom":
            tokens = max(len(sim.running), 1) * max(int(sim.accept), 1)
            detail = (
                "Decode out of memory. Try to lower your batch size.\n"
                f"Try to allocate {tokens} tokens.\n"
                "Available tokens: 0 (available_size=0 + evictable_size=0)\n"
            )
            await self.crash(PlanFailure("decode_oom", "RuntimeError", detail, "decode"), detail)


def _when(fault: Fault) -> float:
    return fault.at_s


def _stop(server: uvicorn.Server) -> None:
    server.should_exit = True


async def _telemetry(sch: SimScheduler, child: SchedulerChild, plan: MemoryPlan) -> None:
    """Publish utilisation when the batch changes, at most about once a second."""
    while True:
        child.publish(plan.resident_bytes, sch.utilization())
        await sch.wait_changed()
        await asyncio.sleep(1.0)

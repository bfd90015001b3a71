"""A SIGTERM to the main process after the first request: SGLang 0.5.23's drain.

``srt/managers/tokenizer_manager.py``: ``sigterm_handler`` logs ``SIGTERM received. signum=None
frame=None. Draining requests and shutting down...`` and sets ``gracefully_exit`` (``/health``,
``/health_generate`` and ``/ready`` answer 503 from then on; ``/generate`` still serves, so a
request arriving now extends the drain). ``sigterm_watchdog`` runs from the first request on: it
sleeps in 5 s steps until it sees the flag, then logs ``Gracefully exiting... Remaining number of
requests N. Remaining requests remaining_rids=[...].`` and checks again every 5 s until none is
left (or at once, forced, when the server is UnHealthy or ``SGL_FORCE_SHUTDOWN`` is set). Then it
stops the subprocess watchdog, sends ShutdownReq to the scheduler, waits up to 15 s for it
(``Schedulers still alive 15s after ShutdownReq, killing them before they released: [...]``),
kills the remaining children and stops uvicorn: the process exits 0.

SGLang 0.5.17 (``exit_by_kill``) ends differently (a real 0.5.17 recorded it: ``tests/fixtures/
real_sglang/0.5.17/base``): no straggler warning; once the scheduler exited (PyTorch's
``destroy_process_group() was not called`` note from it), ``kill_process_tree(os.getpid(),
include_parent=True)``: the children are SIGKILLed and so is the main process: **exit code -9
after a clean drain** (12 requests in flight, 12 answered in full).

Every duration here is simulated seconds (wall = simulated / ``--sim-speed``).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable

from tui.sim import lines_0517
from tui.sim.children import SchedulerChild
from tui.sim.scheduler import Mode
from tui.sim.signals import ProcessControl
from tui.sim.state import ServerStatus, SimState

DRAIN_CHECK_S = 5.0
"""``sigterm_watchdog``'s sleep between checks."""

SCHEDULER_EXIT_TIMEOUT_S = 15.0
"""``_SCHEDULER_EXIT_TIMEOUT_SECS``: how long the schedulers get after ShutdownReq."""

_FORCE_TRUE = ("true", "1")


class Drain:
    """``sigterm_handler`` and ``sigterm_watchdog`` of one server."""

    def __init__(
        self,
        state: SimState,
        control: ProcessControl,
        scheduler: SchedulerChild,
        speed: float,
        stop_server: Callable[[], None],
        exit_by_kill: bool = False,
        emit_raw: Callable[[str], None] | None = None,
    ) -> None:
        """Args:
        state: the server.
        control: its process control (watchdog, kill_process_tree).
        scheduler: the scheduler child (ShutdownReq closes its pipe).
        speed: ``--sim-speed``.
        stop_server: uvicorn's stop hook.
        exit_by_kill: end as SGLang 0.5.17 does (``kill_process_tree`` of itself: exit -9).
        emit_raw: writes text without the logger's prefix (PyTorch's own lines).
        """
        self.state = state
        self.control = control
        self.scheduler = scheduler
        self.speed = speed
        self.stop_server = stop_server
        self.exit_by_kill = exit_by_kill
        self.emit_raw = emit_raw or (lambda text: None)

    def sigterm_handler(self) -> None:
        """Begin draining (called by the loop without arguments: SGLang prints None for both)."""
        self.state.emit(
            "SIGTERM received. signum=None frame=None. Draining requests and shutting down...",
            info=False,
        )
        self.state.gracefully_exit = True

    async def watchdog(self) -> None:
        """``sigterm_watchdog``: wait for the flag, drain, shut the scheduler down, stop."""
        state, emit = self.state, self.state.emit
        check = DRAIN_CHECK_S / self.speed
        while not state.gracefully_exit:
            await asyncio.sleep(check)
        while True:
            remaining = list(state.rid_to_state)
            if state.server_status is ServerStatus.UNHEALTHY:
                emit(
                    "Signal SIGTERM received while health check failed. Force exiting.", info=False
                )
                break
            if os.environ.get("SGL_FORCE_SHUTDOWN", "false").lower() in _FORCE_TRUE:
                emit(
                    "Signal SIGTERM received while force shutdown flag set. Force exiting.",
                    info=False,
                )
                break
            emit(
                f"Gracefully exiting... Remaining number of requests {len(remaining)}. "
                f"Remaining requests remaining_rids={remaining!r}."
            )
            if not remaining:
                break
            await asyncio.sleep(check)
        self.control.stop_watchdog()
        if state.scheduler.mode is Mode.RUNNING:
            self.scheduler.shutdown()  # a wedged scheduler never reads its ShutdownReq
        state.scheduler.stall(Mode.HUNG)
        await self._wait_scheduler_exit(SCHEDULER_EXIT_TIMEOUT_S / self.speed)
        if self.exit_by_kill:
            if self.scheduler.proc.poll() is not None:
                self.emit_raw(lines_0517.nccl_exit_note() + "\n")
            self.control.kill_tree(include_parent=True)
            return
        if self.scheduler.proc.poll() is None:
            emit(
                f"Schedulers still alive {SCHEDULER_EXIT_TIMEOUT_S:.0f}s after ShutdownReq, "
                f"killing them before they released: {[self.scheduler.proc.pid]}",
                info=False,
            )
        self.control.kill_tree(include_parent=False)
        self.stop_server()

    async def _wait_scheduler_exit(self, timeout: float) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self.scheduler.proc.poll() is None and loop.time() < deadline:
            await asyncio.sleep(min(0.1, timeout))

"""The main process's signal semantics, as SGLang 0.5.23 sets them up.

Read from the source:

* launch phase (``srt/entrypoints/engine.py`` ``_set_envs_and_config``): SIGQUIT prints
  ``Received sigquit from a child process. It usually means the child failed.`` and kills the
  tree, itself included (SIGKILL: exit 137). SIGTERM and SIGINT keep Python's defaults: SIGTERM
  kills at once, SIGINT raises KeyboardInterrupt (children are killed on the way out).
* serving (uvicorn's ``capture_signals``): SIGINT and SIGTERM stop uvicorn gracefully; SIGINT is
  raised again once it stopped.
* from the first request on (``srt/managers/tokenizer_manager.py`` ``auto_create_handle_loop``):
  SIGTERM starts the drain (``tui.sim.drain``), SIGQUIT prints ``SIGQUIT received. signum=None,
  frame=None. It usually means one child failed.`` and kills the tree (exit 137).
* the subprocess watchdog (``srt/utils/watchdog.py`` ``SubprocessWatchdog``), started once the
  scheduler is ready: every second it checks the children in order and, for the first one dead
  with a non-zero code, logs ``Subprocess scheduler_0 (pid=...) crashed with exit code -15.
  Triggering SIGQUIT for cleanup...`` and SIGQUITs its own process.
* ``kill_process_tree`` (``srt/utils/common.py``) logs ``kill_process_tree called: ...``, SIGKILLs
  the children and, with ``include_parent``, itself.
* SGLang 0.5.17 (``diagnostics``): the running-phase SIGQUIT handler first runs
  ``dump_requests_before_crash``, whose py-spy and CUDA-coredump diagnostics are on by default:
  ``Sleeping 5 seconds before crash diagnostics to let GPU activity settle.``, a blocking
  ``time.sleep(5)`` (the event loop stands still: no request is answered), then ``No live
  scheduler processes found; skipping py-spy and CUDA coredump.`` when the scheduler is dead, and
  only then ``kill_process_tree`` (a group SIGTERM ends ~6 s after it, exit -9).

The watchdog's interval scales with ``--sim-speed`` like every simulated duration.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable
from types import FrameType

from tui.sim import lines_0517
from tui.sim.children import SCHEDULER_NAME, Child, kill_children

WATCHDOG_INTERVAL_S = 1.0
"""SubprocessWatchdog's check interval (simulated seconds)."""

Emit = Callable[..., None]


class ProcessControl:
    """Signal handlers, the subprocess watchdog and ``kill_process_tree`` of one main process."""

    def __init__(self, emit: Emit, speed: float, diagnostics: bool = False) -> None:
        """Args: emit: the log writer; speed: ``--sim-speed`` (scales the watchdog's tick and
        the diagnostics' sleep); diagnostics: SGLang 0.5.17's crash diagnostics on SIGQUIT."""
        self.emit = emit
        self.speed = speed
        self.diagnostics = diagnostics
        self.children: list[Child] = []
        self.helpers: list[Child] = []
        """Children the watchdog does not watch but kill_process_tree kills (0.5.17's
        multiprocessing resource tracker)."""
        self._watched: list[Child] = []
        self._watch_start = 0.0
        self._tick: asyncio.TimerHandle | None = None
        self._watching = False

    # --- kill_process_tree ------------------------------------------------------------------

    def kill_tree(self, include_parent: bool) -> None:
        """SIGKILL the children (and with ``include_parent`` this process: exit 137)."""
        pid = os.getpid()
        self.emit(
            f"kill_process_tree called: parent_pid={pid}, include_parent={include_parent}, "
            f"pid={pid}"
        )
        kill_children([*self.children, *self.helpers])
        if include_parent:
            os.kill(pid, signal.SIGKILL)

    # --- launch phase -----------------------------------------------------------------------

    def install_launch_phase(self) -> None:
        """SIGQUIT: a child failed while the server starts."""
        signal.signal(signal.SIGQUIT, self._launch_sigquit)

    def _launch_sigquit(self, signum: int, frame: FrameType | None) -> None:
        self.emit(
            "Received sigquit from a child process. It usually means the child failed.",
            info=False,
        )
        self.kill_tree(include_parent=True)

    # --- running phase ----------------------------------------------------------------------

    def install_running_phase(self, on_sigterm: Callable[[], None]) -> None:
        """SIGTERM drains (``on_sigterm``), SIGQUIT kills the tree (``auto_create_handle_loop``)."""
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, on_sigterm)
        loop.add_signal_handler(signal.SIGQUIT, self._running_sigquit)

    def _running_sigquit(self) -> None:
        # Called by the loop without arguments, so SGLang's f-string prints None for both.
        self.emit(
            "SIGQUIT received. signum=None, frame=None. It usually means one child failed.",
            info=False,
        )
        self.stop_watchdog()
        if self.diagnostics:
            self._crash_diagnostics()
        self.kill_tree(include_parent=True)

    def _crash_diagnostics(self) -> None:
        """0.5.17's ``dump_requests_before_crash``: its sleep blocks the loop, as SGLang's does."""
        self.emit(lines_0517.diagnostics_sleep_line())
        time.sleep(lines_0517.CRASH_DIAGNOSTICS_S / self.speed)
        scheduler = next((c for c in self.children if c.name == SCHEDULER_NAME), None)
        if scheduler is None or scheduler.proc.poll() is not None:
            self.emit(lines_0517.diagnostics_skipped_line(), info=False)

    # --- the subprocess watchdog ------------------------------------------------------------

    def start_watchdog(self, children: list[Child]) -> None:
        """Watch ``children`` from now on; the first tick is one interval away."""
        self._watched = list(children)
        self._watch_start = time.monotonic()
        self._watching = True

    def stop_watchdog(self) -> None:
        """Stop it (a drain's children exit on purpose)."""
        self._watching = False
        if self._tick is not None:
            self._tick.cancel()
            self._tick = None

    def child_exited(self, child: Child) -> None:
        """A child exited: the watchdog notices at its next tick (as a 1 s poll would)."""
        if not self._watching or child not in self._watched or self._tick is not None:
            return
        interval = WATCHDOG_INTERVAL_S / self.speed
        elapsed = time.monotonic() - self._watch_start
        delay = interval - elapsed % interval
        self._tick = asyncio.get_running_loop().call_later(delay, self._check)

    def _check(self) -> None:
        self._tick = None
        if not self._watching:
            return
        for child in self._watched:
            code = child.proc.poll()
            if code is None or code == 0:
                continue
            self.emit(
                f"Subprocess {child.name} (pid={child.proc.pid}) crashed with exit code {code}. "
                "Triggering SIGQUIT for cleanup...",
                info=False,
            )
            self._watching = False
            os.kill(os.getpid(), signal.SIGQUIT)
            return

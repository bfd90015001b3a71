"""Stop one server: verify who it is, drain it through its main pid, then escalate to its group.

SGLang 0.5.23's shutdown (``managers/tokenizer_manager.py``, ``sigterm_watchdog``): SIGTERM to the
**main pid** makes it drain (``/health`` answers 503 at once, the in-flight requests finish, a
check every 5 s, then ``ShutdownReq`` to the schedulers and exit 0). The scheduler and
detokenizer children install no SIGTERM handler: a SIGTERM to the whole process group kills them
at once, the main process's subprocess watchdog sees it within ~1 s, logs ``Subprocess
scheduler_0 (pid=...) crashed with exit code -15`` and SIGKILLs itself (exit 137), and every
in-flight request is lost. So the default stop ("drain") signals the main pid only; the group is
signalled only after the drain's deadline (or at once with mode "terminate" / "kill", which the
operator may choose, as nvitop offers its signals).

The scheduler child holds the GPU memory and can outlive the main process (sglang #31645), so
the wait covers every member of the group. A member is signalled only when its identity is
verified: the recorded main pid (start time and command line, ``identity.verify``), its live
descendants, or a group member that carries the launch's ``GPUFLEET_LAUNCH_ID`` in its
environment (children inherit it; a stranger's group that reused the pgid does not have it).
A group is signalled only while such a verified member lives in it: a pgid cannot be reused
while any member of the group is alive, so the group is then certainly ours.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import psutil

from tui.control.identity import LAUNCH_ID_ENV, group_members, running, verify
from tui.state.fleet_state import ProcessRecord, remove_record

StopMode = Literal["drain", "terminate", "kill"]
"""drain: SIGTERM to the main pid (SGLang finishes in-flight requests), group after a deadline;
terminate: SIGTERM to the whole group (fast; in-flight requests are lost); kill: SIGKILL."""

StopOutcome = Literal["drained", "terminated", "killed", "already_exited", "survived"]

ESCALATE_TERM_S = 5.0
"""After a drain's deadline: how long the group's SIGTERM gets before SIGKILL."""


@dataclass(frozen=True, slots=True)
class StopResult:
    """What ``stop`` did to one server."""

    gpu: int
    """GPU index."""
    pid: int
    """Main process id."""
    outcome: StopOutcome
    """drained (exited after SIGTERM to its main pid), terminated (after the group's SIGTERM),
    killed (needed SIGKILL), already_exited, survived (members outlived SIGKILL)."""
    pids: tuple[int, ...]
    """Every verified member seen (main + children): what ``wait_gpu_released`` must wait out."""
    survivors: tuple[int, ...]
    """Members still alive after SIGKILL's deadline (should be empty; D-state processes)."""
    elapsed_s: float
    """Time from the first signal to the end."""
    mode: StopMode = "drain"
    """How the stop began."""

    def describe(self) -> str:
        """One line for the operator."""
        text = {
            "drained": "drained and exited after SIGTERM to its main pid",
            "terminated": "stopped by SIGTERM to its process group",
            "killed": "did not exit after SIGTERM; killed with SIGKILL",
            "already_exited": "was not running",
            "survived": f"processes {list(self.survivors)} survived SIGKILL",
        }[self.outcome]
        return f"GPU {self.gpu} (pid {self.pid}): {text} in {self.elapsed_s:.1f}s"


def _wait_gone(
    procs: list[psutil.Process], deadline: float, tick: Callable[[], None] | None = None
) -> list[psutil.Process]:
    """Wait until every process exited (``running``) or the deadline; return the rest."""
    alive = list(procs)
    while alive:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        # wait_procs reaps our own children; others are polled by psutil until they vanish.
        _, alive = psutil.wait_procs(alive, timeout=min(remaining, 0.1))
        alive = [p for p in alive if running(p)]
        if tick is not None and alive:
            tick()
    return alive


def _carries_launch_id(proc: psutil.Process, launch_id: str) -> bool:
    if not launch_id:
        return False
    try:
        return proc.environ().get(LAUNCH_ID_ENV) == launch_id
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, OSError):
        return False


def verified_members(record: ProcessRecord) -> list[psutil.Process]:
    """The live processes of ``record``'s server whose identity is verified.

    Raises:
        IdentityMismatch: the recorded pid is alive but is not the server (nothing is signalled).
    """
    identity = verify(record)
    members: dict[int, psutil.Process] = {}
    if identity.alive and identity.process is not None:
        leader = identity.process
        members[leader.pid] = leader
        with contextlib.suppress(psutil.NoSuchProcess):
            for child in leader.children(recursive=True):
                if running(child):
                    members[child.pid] = child
    if record.create_time > 0:
        for proc in group_members(record.pgid, record.create_time):
            if proc.pid not in members and _carries_launch_id(proc, record.launch_id):
                members[proc.pid] = proc
    return list(members.values())


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _signal_strays(procs: list[psutil.Process], pgid: int, sig: signal.Signals) -> None:
    """Signal the verified members that left the group (the group signal missed them); the
    others got it once already: a second SIGTERM can re-enter a handler that is shutting down."""
    for proc in procs:
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied, ProcessLookupError):
            if os.getpgid(proc.pid) != pgid:
                proc.send_signal(sig)


def stop(
    record: ProcessRecord,
    term_timeout: float = 60.0,
    kill_timeout: float = 10.0,
    forget: bool = True,
    *,
    mode: StopMode = "drain",
    tick: Callable[[], None] | None = None,
) -> StopResult:
    """Stop the server of ``record`` and every verified process of its group.

    Args:
        record: the fleet record entry (its identity is verified before any signal).
        term_timeout: with "drain", seconds the main pid's drain may take before the group is
            signalled; with "terminate", seconds the group's SIGTERM gets before SIGKILL.
        kill_timeout: seconds to wait after SIGKILL.
        forget: remove the entry from the fleet record once nothing of it runs.
        mode: "drain" (default), "terminate" or "kill" (see ``StopMode``).
        tick: called about every 0.1 s while waiting (e.g. to report a drain's progress).

    Returns:
        What happened, with every pid seen (for ``wait_gpu_released``).

    Raises:
        IdentityMismatch: the pid now belongs to another process; nothing was signalled.
    """
    started = time.monotonic()
    members = verified_members(record)
    seen = {p.pid for p in members}
    if not members:
        if forget:
            remove_record(record.gpu, record.pid)
        return StopResult(record.gpu, record.pid, "already_exited", (), (), 0.0, mode)
    leader = next((p for p in members if p.pid == record.pid), None)
    outcome: StopOutcome
    alive = members
    if mode == "drain" and leader is not None:
        outcome = "drained"
        with contextlib.suppress(psutil.NoSuchProcess):
            leader.send_signal(signal.SIGTERM)
        alive = _wait_gone(alive, started + term_timeout, tick)
        term_deadline = time.monotonic() + ESCALATE_TERM_S
    else:
        # No live main pid to drain through (only orphaned children are left), or the operator
        # asked for the group at once.
        term_deadline = started + (ESCALATE_TERM_S if mode == "drain" else term_timeout)
    if alive and mode != "kill":
        outcome = "terminated"
        # Children may have been forked meanwhile: look again before signalling the group.
        alive = _live(alive, record)
        if alive:
            _signal_group(record.pgid, signal.SIGTERM)
            _signal_strays(alive, record.pgid, signal.SIGTERM)
            alive = _wait_gone(alive, term_deadline, tick)
    if alive or mode == "kill":
        alive = _live(alive, record)
        if alive:
            outcome = "killed"
            seen |= {p.pid for p in alive}
            _signal_group(record.pgid, signal.SIGKILL)
            _signal_strays(alive, record.pgid, signal.SIGKILL)
            alive = _wait_gone(alive, time.monotonic() + kill_timeout)
        elif mode == "kill":
            outcome = "already_exited"  # it exited on its own before the signal
    if alive:
        outcome = "survived"
    elif forget:
        remove_record(record.gpu, record.pid)
    return StopResult(
        record.gpu,
        record.pid,
        outcome,
        tuple(sorted(seen)),
        tuple(sorted(p.pid for p in alive)),
        time.monotonic() - started,
        mode,
    )


def _live(alive: list[psutil.Process], record: ProcessRecord) -> list[psutil.Process]:
    """The still-running members, plus verified members that appeared since the last look."""
    current = {p.pid: p for p in alive if running(p)}
    if record.create_time > 0:
        for proc in group_members(record.pgid, record.create_time):
            if proc.pid not in current and _carries_launch_id(proc, record.launch_id):
                current[proc.pid] = proc
    return list(current.values())

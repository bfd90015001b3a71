"""Stop one server: identity check, SIGTERM to its process group, a deadline, SIGKILL, report.

SGLang's scheduler child holds the GPU memory and can outlive the main process (sglang #31645),
so signals go to the whole process group, and the wait covers every member, not just the pid.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass
from typing import Literal

import psutil

from tui.control.identity import group_members, verify
from tui.control.records import ProcessRecord, remove_record

StopOutcome = Literal["terminated", "killed", "already_exited", "survived"]


@dataclass(frozen=True, slots=True)
class StopResult:
    """What ``stop`` did to one server."""

    gpu: int
    """GPU index."""
    pid: int
    """Main process id."""
    outcome: StopOutcome
    """terminated (exited after SIGTERM), killed (needed SIGKILL), already_exited, survived."""
    pids: tuple[int, ...]
    """Every group member seen (main + children): what ``wait_gpu_released`` must wait out."""
    survivors: tuple[int, ...]
    """Members still alive after SIGKILL's deadline (should be empty; D-state processes)."""
    elapsed_s: float
    """Time from the first signal to the end."""

    def describe(self) -> str:
        """One line for the operator."""
        text = {
            "terminated": "stopped by SIGTERM",
            "killed": "did not exit after SIGTERM; killed with SIGKILL",
            "already_exited": "was not running",
            "survived": f"processes {list(self.survivors)} survived SIGKILL",
        }[self.outcome]
        return f"GPU {self.gpu} (pid {self.pid}): {text} in {self.elapsed_s:.1f}s"


def _wait_gone(procs: list[psutil.Process], deadline: float) -> list[psutil.Process]:
    """Wait until every process exited (zombies count as gone) or the deadline; return the rest."""
    alive = list(procs)
    while alive:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        # wait_procs reaps our own children; others are polled by psutil until they vanish.
        _, alive = psutil.wait_procs(alive, timeout=min(remaining, 0.1))
        alive = [p for p in alive if _running(p)]
    return alive


def _running(proc: psutil.Process) -> bool:
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, sig)


def stop(
    record: ProcessRecord,
    term_timeout: float = 30.0,
    kill_timeout: float = 10.0,
    forget: bool = True,
) -> StopResult:
    """Stop the server of ``record`` and every process of its group.

    Args:
        record: the fleet record entry (its identity is verified before any signal).
        term_timeout: seconds to wait after SIGTERM (SGLang drains in-flight requests).
        kill_timeout: seconds to wait after SIGKILL of the group.
        forget: remove the entry from the fleet record once nothing of it runs.

    Returns:
        What happened, with every pid seen (for ``wait_gpu_released``).

    Raises:
        IdentityMismatch: the pid now belongs to another process; nothing was signalled.
    """
    started = time.monotonic()
    identity = verify(record)
    # Without a start time (the launch died before it was read) group members cannot be told
    # from a stranger's group that reused the pid, so only the verified leader is touched.
    known = record.create_time > 0
    members = group_members(record.pgid, record.create_time) if known else []
    if identity.alive and identity.process is not None and identity.process not in members:
        members.append(identity.process)
    seen = {p.pid for p in members}
    if not members:
        if forget:
            remove_record(record.gpu, record.pid)
        return StopResult(record.gpu, record.pid, "already_exited", (), (), 0.0)
    _signal_group(record.pgid, signal.SIGTERM)
    alive = _wait_gone(members, started + term_timeout)
    # Children may have been forked meanwhile: look at the group again before escalating.
    late = group_members(record.pgid, record.create_time) if known else []
    seen |= {p.pid for p in late}
    alive = [p for p in {*alive, *late} if _running(p)]
    outcome: StopOutcome = "terminated"
    if alive:
        outcome = "killed"
        _signal_group(record.pgid, signal.SIGKILL)
        for proc in alive:  # a member that changed its group still belongs to this server
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.kill()
        alive = _wait_gone(alive, time.monotonic() + kill_timeout)
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
    )

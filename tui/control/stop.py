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
the wait covers every member of the group. A process is signalled only when its identity is
verified: the recorded main pid (start ticks, boot, launch id: ``identity.verify``), its live
descendants, or a group member that carries the launch's ``GPUFLEET_LAUNCH_ID`` in its
environment (children inherit it; a stranger's group that reused the pgid does not have it).
An adopted server (``gpufleet adopt``) has no launch id: its verified processes are its main pid
(start ticks, boot, command line digest) and its live descendants, and its group is never
signalled whole (one script's ``setsid`` may have started every server of the fleet in it).
The group as a whole is signalled only when its recorded pgid is > 1, is the verified main
process's own group at that moment, and is neither gpufleet's group nor its parent's
(``group_to_signal``); otherwise each verified process is signalled on its own and the stop says
why. Every signal goes through ``signal_group`` / ``signal_process``.
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

from tui.control.identity import group_members, running, verify
from tui.servers.procinfo import read_launch_id
from tui.state.fleet_state import ProcessRecord, remove_record, upgrade_record

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
    note: str = ""
    """What the operator should know besides (the record's process group was not the server's:
    its processes were signalled one by one); "" when nothing."""
    whole_group: bool = True
    """Its escalation went to its process group (False: to each verified process on its own,
    ``group_to_signal`` said why in ``note``)."""
    drain_timed_out: bool = False
    """A drain's deadline passed with the main process still running: the group was signalled
    while it served (what it had in flight was dropped)."""

    def describe(self, drain: str = "", lost: str = "") -> str:
        """One line for the operator.

        Args:
            drain: How the drain ended, when that is news (``drain timed out after 60 s: ...``).
            lost: What the signals dropped (``16 in-flight requests lost``).
        """
        text = {
            "drained": "drained and exited after SIGTERM to its main pid",
            "terminated": "stopped by SIGTERM to its process group"
            if self.whole_group
            else "stopped by SIGTERM to each of its verified processes",
            "killed": (
                "killed with SIGKILL"
                if self.mode == "kill"
                else "did not exit after SIGTERM; killed with SIGKILL"
            ),
            "already_exited": "was not running",
            "survived": f"processes {list(self.survivors)} survived SIGKILL",
        }[self.outcome]
        note = f" ({self.note})" if self.note else ""
        drain = f"{drain}; " if drain else ""
        lost = f": {lost}" if lost else ""
        return (
            f"GPU {self.gpu} (pid {self.pid}): {drain}{text} in {self.elapsed_s:.1f}s{lost}{note}"
        )


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
    # A member looked at again and again (each escalation): one that reads empty for now (its
    # exec ending, or its exit) is not waited for here; the next look sees it again.
    read = read_launch_id(proc.pid, settle_s=0.05)
    return read.problem is None and read.launch_id == launch_id


def verified_members(record: ProcessRecord) -> tuple[ProcessRecord, list[psutil.Process]]:
    """The live processes of ``record``'s server whose identity is verified.

    Returns:
        The record (upgraded and written back when it lacked start ticks) and the members.

    Raises:
        IdentityMismatch: the recorded pid is alive but is not the server (nothing is signalled).
    """
    identity = verify(record)
    if identity.upgraded is not None:
        upgrade_record(record, identity.upgraded)
        record = identity.upgraded
    members: dict[int, psutil.Process] = {}
    if identity.alive and identity.process is not None:
        leader = identity.process
        members[leader.pid] = leader
        with contextlib.suppress(psutil.NoSuchProcess):
            for child in leader.children(recursive=True):
                if running(child):
                    members[child.pid] = child
    if record.launch_id:
        for proc in group_members(record.pgid, record.start_ticks):
            if proc.pid not in members and _carries_launch_id(proc, record.launch_id):
                members[proc.pid] = proc
    return record, list(members.values())


# --- the one door through which a server's processes are signalled -----------------------------


def signal_group(pgid: int, sig: signal.Signals) -> None:
    """``killpg`` one verified group (``group_to_signal`` decided it may be)."""
    if pgid <= 1:  # kill(-1) is every process; never, whatever the caller thought
        raise ValueError(f"pgid={pgid}: refusing to signal a process group <= 1")
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def signal_process(proc: psutil.Process, sig: signal.Signals) -> None:
    """Signal one verified process (psutil refuses a pid reused since it was looked at)."""
    with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied, ProcessLookupError):
        proc.send_signal(sig)


def _own_groups() -> set[int]:
    """gpufleet's own process group and its parent's (a shell's, a terminal's)."""
    groups = {os.getpgrp()}
    with contextlib.suppress(ProcessLookupError, PermissionError):
        groups.add(os.getpgid(os.getppid()))
    return groups


def group_to_signal(record: ProcessRecord, leader: psutil.Process | None) -> tuple[int | None, str]:
    """The process group that may be signalled whole, or None and why not ("" when there is
    nothing to say: the main process is gone, its verified members are signalled one by one).

    A group is signalled only when the recorded pgid is > 1, is the verified main process's own
    group now, and is neither gpufleet's group nor its parent's: a record whose pgid names any
    other group (damaged, edited, or a bug) must never get that group killed.
    """
    if leader is None or not running(leader):
        return None, ""
    try:
        actual = os.getpgid(leader.pid)
    except (ProcessLookupError, PermissionError):
        return None, ""
    if record.adopted:
        return None, (
            "adopted, not launched by gpufleet: its process group may hold other processes of "
            "the script that started it, so only its verified processes were signalled, each on "
            "its own"
        )
    if record.pgid <= 1 or record.pgid != actual:
        return None, (
            f"the record's process group {record.pgid} is not the server's own ({actual}): "
            "only its verified processes were signalled, each on its own"
        )
    if record.pgid in _own_groups():
        return None, (
            f"process group {record.pgid} is gpufleet's own: only the server's verified "
            "processes were signalled, each on its own"
        )
    return record.pgid, ""


def _signal_all(
    alive: list[psutil.Process],
    record: ProcessRecord,
    leader: psutil.Process | None,
    sig: signal.Signals,
    notes: list[str],
) -> bool:
    """Signal every verified member: the group at once when ``group_to_signal`` allows it (and
    each member that left it), else each member on its own. A member that got the group's signal
    is not signalled again: a second SIGTERM can re-enter a handler that is shutting down.

    Returns:
        Whether the group was signalled whole.
    """
    group, why = group_to_signal(record, leader)
    if why and why not in notes:
        notes.append(why)
    if group is not None:
        signal_group(group, sig)
    for proc in alive:
        try:
            in_group = group is not None and os.getpgid(proc.pid) == group
        except (ProcessLookupError, PermissionError):
            continue
        if not in_group:
            signal_process(proc, sig)
    return group is not None


def stop(
    record: ProcessRecord,
    term_timeout: float = 60.0,
    kill_timeout: float = 10.0,
    forget: bool = True,
    *,
    mode: StopMode = "drain",
    tick: Callable[[], None] | None = None,
    on_deadline: Callable[[], None] | None = None,
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
        on_deadline: called once when a drain's deadline passed with the main process still
            running, just before its group is signalled (to count what is in flight then).

    Returns:
        What happened, with every pid seen (for ``wait_gpu_released``).

    Raises:
        IdentityMismatch: the pid now belongs to another process; nothing was signalled.
    """
    started = time.monotonic()
    record, members = verified_members(record)
    seen = {p.pid for p in members}
    if not members:
        if forget:
            remove_record(record.gpu, record.pid)
        return StopResult(record.gpu, record.pid, "already_exited", (), (), 0.0, mode)
    leader = next((p for p in members if p.pid == record.pid), None)
    notes: list[str] = []
    whole = True
    outcome: StopOutcome
    alive = members
    timed_out = False
    if mode == "drain" and leader is not None:
        outcome = "drained"
        signal_process(leader, signal.SIGTERM)
        alive = _wait_gone(alive, started + term_timeout, tick)
        # Only a main process still serving makes it the drain's timeout; children that
        # outlive a main process that exited (sglang #31645) hold nothing a client waits for.
        timed_out = running(leader)
        if timed_out and on_deadline is not None:
            on_deadline()
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
            whole = _signal_all(alive, record, leader, signal.SIGTERM, notes)
            alive = _wait_gone(alive, term_deadline, tick)
    if alive or mode == "kill":
        alive = _live(alive, record)
        if alive:
            outcome = "killed"
            seen |= {p.pid for p in alive}
            _signal_all(alive, record, leader, signal.SIGKILL, notes)
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
        "; ".join(notes),
        whole,
        timed_out,
    )


def _live(alive: list[psutil.Process], record: ProcessRecord) -> list[psutil.Process]:
    """The still-running members, plus verified members that appeared since the last look."""
    current = {p.pid: p for p in alive if running(p)}
    if record.launch_id:
        for proc in group_members(record.pgid, record.start_ticks):
            if proc.pid not in current and _carries_launch_id(proc, record.launch_id):
                current[proc.pid] = proc
    return list(current.values())


def stop_unverified(
    proc: psutil.Process,
    term_timeout: float,
    kill_timeout: float,
    *,
    mode: StopMode = "drain",
    gpu: int = -1,
    tick: Callable[[], None] | None = None,
    on_deadline: Callable[[], None] | None = None,
) -> StopResult:
    """Stop one process the operator confirmed although the fleet cannot verify it as its own:
    its pid only (never a group), SIGTERM (unless ``mode`` is "kill"), SIGKILL after
    ``term_timeout``.

    Args:
        proc: The process, checked by the caller to be the one the operator confirmed.
        term_timeout: Seconds its SIGTERM gets before SIGKILL.
        kill_timeout: Seconds to wait after SIGKILL.
        mode: "kill" sends SIGKILL at once; "drain" and "terminate" begin with SIGTERM.
        gpu: The GPU whose port it held (for the result).
        tick: Called about every 0.1 s while waiting.
        on_deadline: Called once when its SIGTERM's deadline passed with it still running,
            just before its SIGKILL.

    Returns:
        What happened (its children, if any, were not signalled: they are not verified).
    """
    started = time.monotonic()
    # Its pid's SIGTERM, whatever the mode asked ("terminated" says its group got it).
    outcome: StopOutcome = "drained"
    alive = [proc]
    if mode != "kill":
        signal_process(proc, signal.SIGTERM)
        alive = _wait_gone(alive, started + term_timeout, tick)
    timed_out = bool(alive) and mode != "kill"
    if timed_out and on_deadline is not None:
        on_deadline()
    if alive:
        outcome = "killed"
        signal_process(proc, signal.SIGKILL)
        alive = _wait_gone(alive, time.monotonic() + kill_timeout)
    return StopResult(
        gpu,
        proc.pid,
        "survived" if alive else outcome,
        (proc.pid,),
        tuple(p.pid for p in alive),
        time.monotonic() - started,
        mode,
        "not the fleet's own, stopped as confirmed: its pid only, never its group",
        timed_out,
    )

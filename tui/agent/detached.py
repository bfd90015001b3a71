"""A node's agent run detached: started, found and stopped through its pid file.

What ``gpufleet agent start|stop|status HOST`` runs on each node over ssh
(``gpufleet agent --detach|--stop|--running``). The start puts the agent in its own session
(setsid: no controlling terminal, so the end of the ssh session does not reach it), stdin from
``/dev/null``, its output appended to ``agent.log`` in the node's state directory; records its
identity in ``agent.pid.json``; and returns only once the agent answers its own API on the bound
address with its own pid, or, past the deadline or when the agent exits first, stops it and says
why in one line. Every step holds the pid file's lock, so two starts at once start one agent.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil

from tui.agent.pidfile import (
    AgentRecord,
    check,
    exited,
    log_file,
    pid_file,
    read_record,
    remove_record,
    write_record,
)
from tui.inputs import InputError, open_stream
from tui.outputs import make_dir, open_log
from tui.servers.procinfo import boot_id, start_ticks
from tui.state.files import StateFileError
from tui.state.locks import locked

START_TIMEOUT_S = 60.0
"""Default deadline for a started agent to answer."""
STOP_TIMEOUT_S = 15.0
"""Default wait for the agent to exit after SIGTERM, before SIGKILL."""
KILL_WAIT_S = 5.0
"""Wait for the exit after SIGKILL."""
POLL_S = 0.1
"""Interval of the readiness and exit polls."""
NOT_RUNNING = 3
"""Exit status of ``--running`` when no agent runs (``systemctl status`` of an inactive unit)."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a detached start, stop or status did, in one line and an exit status."""

    status: int
    """0 done (or nothing to do), 2 refused (bad input: nothing left running), 1 failed,
    ``NOT_RUNNING`` for a status with no agent."""
    line: str
    """One line for the operator."""


@dataclass(frozen=True, slots=True)
class Launch:
    """How to start the agent and how to know it answers."""

    argv: tuple[str, ...]
    """The agent's full argv (serving in the foreground)."""
    node: str
    """The node's name (its ``--node``)."""
    url: str
    """Where it serves, as the operator reaches it on the node."""
    probe_url: str
    """Base URL the readiness probe uses (loopback when bound to every address)."""
    token: str
    """The token the probe presents."""
    token_file: Path
    """The token file (absolute), named in the start's line."""
    timeout_s: float = START_TIMEOUT_S
    """Deadline for the agent to answer."""


def start(launch: Launch) -> Outcome:
    """Start the node's agent detached, unless one already runs.

    Args:
        launch: The agent's argv, names and readiness probe.

    Returns:
        0 with where it runs (or that it already runs); 2 with the agent's own one-line refusal
        (a bad option, a port in use) or 1 (no answer before the deadline), nothing left running.
    """
    path = pid_file()
    try:
        with locked(path):
            record = read_record(path)
            if record is not None:
                live = check(record)
                if live.process is not None:
                    return Outcome(
                        0,
                        f"already running (pid {record.pid}): node {record.node}, {record.url}, "
                        f"token {record.token_file}",
                    )
                remove_record(path)  # its agent has exited: the record is history
            return _start(launch, path)
    except StateFileError as error:
        return Outcome(1, f"{error} (remove it once no agent runs)")


def _start(launch: Launch, path: Path) -> Outcome:
    log = log_file()
    make_dir(log.parent)
    offset = log.stat().st_size if log.exists() else 0
    with os.fdopen(open_log(log), "ab") as out:
        child = subprocess.Popen(
            launch.argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )
    try:
        create_time = psutil.Process(child.pid).create_time()
    except psutil.NoSuchProcess:
        create_time = 0.0  # it exited at once; the wait below reads why from the log
    ticks = start_ticks(child.pid) or 0
    # Recorded before the wait: were this start killed while waiting, the agent it started can
    # still be found and stopped.
    record = AgentRecord(
        pid=child.pid,
        create_time=create_time,
        cmdline=launch.argv,
        node=launch.node,
        url=launch.url,
        token_file=str(launch.token_file),
        log=str(log),
        started_at=time.time(),
        start_ticks=ticks,
        boot_id=boot_id(),
    )
    write_record(record, path)
    t0 = time.monotonic()
    if _answers(child, launch):
        return Outcome(
            0,
            f"started: node {launch.node}, {launch.url}, pid {child.pid}, token "
            f"{launch.token_file} (log {log}, ready in {time.monotonic() - t0:.1f} s)",
        )
    remove_record(path)
    if child.poll() is None:
        # Our own child, not yet reaped: its pid cannot have been reused.
        child.terminate()
        try:
            child.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait(timeout=KILL_WAIT_S)
        return Outcome(
            1,
            f"the agent did not answer on {launch.url} within {launch.timeout_s:g} s: stopped "
            f"(pid {child.pid}; see {log})",
        )
    said = _last_line(log, offset)
    status = 2 if child.returncode == 2 else 1
    why = said or f"the agent exited with status {child.returncode} (see {log})"
    return Outcome(status, why)


def _answers(child: subprocess.Popen[bytes], launch: Launch) -> bool:
    """Poll the agent's own API until it answers with the child's pid, it exits, or time is up."""
    deadline = time.monotonic() + launch.timeout_s
    headers = {"Authorization": f"Bearer {launch.token}"}
    # The probe reads loopback on this node; a certificate made for the node's name is not
    # what is checked here, the pid in the answer is.
    with httpx.Client(timeout=2.0, verify=False, headers=headers) as client:
        while time.monotonic() < deadline:
            if child.poll() is not None:
                return False
            try:
                answer = client.get(f"{launch.probe_url}/api/v1/agent")
                if answer.status_code == 200 and answer.json().get("pid") == child.pid:
                    return True
            except (httpx.HTTPError, ValueError):
                pass  # not listening yet
            time.sleep(POLL_S)
    return False


def _last_line(log: Path, offset: int) -> str:
    """The agent's last message in ``log`` from ``offset`` on, as one line.

    Its refusals start ``gpufleet agent:``; a profile with several problems lists them on the
    lines after, which are joined to it.
    """
    try:
        with open_stream(log, "a log") as handle:
            handle.seek(offset)
            text = handle.read(1 << 20).decode("utf-8", errors="replace")
    except (OSError, InputError):
        return ""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    said = [i for i, line in enumerate(lines) if line.startswith("gpufleet agent")]
    return " ".join(lines[said[-1] :]) if said else (lines[-1] if lines else "")


def stop(timeout_s: float = STOP_TIMEOUT_S) -> Outcome:
    """Stop the node's detached agent: SIGTERM to the verified process, SIGKILL past ``timeout_s``.

    Args:
        timeout_s: Wait for its exit after SIGTERM.

    Returns:
        0 stopped or not running (a stale pid file is removed, its pid never signalled); 1 when
        it outlived SIGKILL or the pid file is damaged.
    """
    path = pid_file()
    try:
        with locked(path):
            record = read_record(path)
            if record is None:
                return Outcome(0, f"not running (no {path})")
            live = check(record)
            if live.process is None:
                remove_record(path)
                return Outcome(
                    0, f"not running ({live.why}; its pid file removed, nothing signalled)"
                )
            return _stop(record, live.process, timeout_s, path)
    except StateFileError as error:
        return Outcome(1, f"{error} (remove it once no agent runs)")


def _stop(record: AgentRecord, proc: psutil.Process, timeout_s: float, path: Path) -> Outcome:
    t0 = time.monotonic()
    # psutil refuses to signal a pid reused since ``proc`` was verified (its create_time).
    with contextlib.suppress(psutil.NoSuchProcess):
        proc.send_signal(signal.SIGTERM)
    how = "SIGTERM"
    if not _wait_exit(proc, timeout_s):
        how = f"SIGKILL after {timeout_s:g} s of SIGTERM"
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()
        if not _wait_exit(proc, KILL_WAIT_S):
            return Outcome(1, f"pid {record.pid} outlived SIGTERM and SIGKILL: still running")
    remove_record(path)
    return Outcome(
        0, f"stopped: node {record.node}, pid {record.pid} ({how}, {time.monotonic() - t0:.1f} s)"
    )


def _wait_exit(proc: psutil.Process, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if exited(proc):
            return True
        time.sleep(POLL_S)
    return exited(proc)


def running() -> Outcome:
    """Whether the node's detached agent runs: 0 with where, ``NOT_RUNNING`` with why not."""
    path = pid_file()
    try:
        record = read_record(path)
    except StateFileError as error:
        return Outcome(1, str(error))
    if record is None:
        return Outcome(NOT_RUNNING, f"not running (no {path})")
    live = check(record)
    if live.process is None:
        return Outcome(NOT_RUNNING, f"not running ({live.why})")
    up = time.time() - record.started_at
    return Outcome(
        0,
        f"running: node {record.node}, {record.url}, pid {record.pid}, up {up:.0f} s, token "
        f"{record.token_file}",
    )


def served_argv(executable: str, options: Sequence[str]) -> tuple[str, ...]:
    """The argv that serves the agent in the foreground with ``options`` under ``executable``."""
    return (executable, "-m", "tui", "agent", *options)

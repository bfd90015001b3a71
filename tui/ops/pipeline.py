"""Start and stop the generation pipeline from the console, detached and identity-checked.

The pipeline is ``gpufleet generate`` in its own session (``tui.pipeline.detach``), so it outlives
the console. Stopping sends SIGTERM only to a process of this user whose command line is a
``generate`` run writing *this* status document: the pid in the document is checked, and the
process table is scanned too, since the document does not exist until the pipeline's first
write. Another user's process is never taken for the job, whatever its command line says.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil

from tui.pipeline.detach import start_detached
from tui.pipeline.status import read_status

STOP_TIMEOUT_S = 30.0
"""How long a stopped pipeline may take to write its last shard and exit."""


@dataclass(frozen=True, slots=True)
class PipelineConfig:
    """What the console's pipeline runs on: files and servers."""

    prompts: Path
    """JSONL prompt file."""
    out_dir: Path
    """Output shards and done record."""
    status_path: Path
    """Status document (the console's generation pane reads it)."""
    log_path: Path
    """The detached pipeline's stdout and stderr."""
    servers: tuple[str, ...]
    """Base URLs of the fleet's servers."""
    extra_args: tuple[str, ...] = ()
    """More ``gpufleet generate`` options (e.g. ``--fleet-timeout``)."""
    fresh_when_finished: bool = False
    """A start after the job finished starts it afresh, its outputs kept aside (the demo's
    job: ``tui.ops.demo.fresh_job_if_finished``); False: a start resumes, as a real job's
    must."""

    def argv(self) -> list[str]:
        """The ``gpufleet generate`` options (without the program)."""
        out = ["--prompts", str(self.prompts), "--out", str(self.out_dir)]
        out += ["--status", str(self.status_path)]
        for url in self.servers:
            out += ["--server", url]
        return out + list(self.extra_args)


def is_pipeline_of(cmdline: Sequence[str], status_path: Path) -> bool:
    """Whether ``cmdline`` is a ``gpufleet generate`` run writing ``status_path``.

    Args:
        cmdline: A process's command line.
        status_path: The status document the console watches.

    Returns:
        True for ``... tui generate ... --status STATUS`` (or the ``gpufleet`` entry point).
    """
    args = list(cmdline)
    if "generate" not in args or "--detach" in args:
        return False
    head = args[: args.index("generate")]
    if not any(a == "tui" or Path(a).name == "gpufleet" for a in head):
        return False
    try:
        return Path(args[args.index("--status") + 1]) == status_path
    except (ValueError, IndexError):
        return False


def _cmdline(proc: psutil.Process) -> list[str] | None:
    """The command line of a live process of this user (None for anything else)."""
    try:
        if proc.status() == psutil.STATUS_ZOMBIE or proc.uids().effective != os.geteuid():
            return None
        return proc.cmdline()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


def find_pipelines(status_path: Path) -> list[psutil.Process]:
    """Running pipelines that write ``status_path`` (the document's pid first, then a scan).

    Args:
        status_path: The status document.

    Returns:
        The processes, without duplicates.
    """
    found: dict[int, psutil.Process] = {}
    status = read_status(status_path)
    if status is not None:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc = psutil.Process(status.pid)
            line = _cmdline(proc)
            if line is not None and is_pipeline_of(line, status_path):
                found[proc.pid] = proc
    for proc in psutil.process_iter():
        line = _cmdline(proc)
        if proc.pid not in found and line is not None and is_pipeline_of(line, status_path):
            found[proc.pid] = proc
    return list(found.values())


def start_pipeline(config: PipelineConfig) -> int:
    """Start the pipeline detached unless one already writes this status document.

    Args:
        config: Files and servers.

    Returns:
        The pid of the running pipeline (the existing one, or the new one).
    """
    running = find_pipelines(config.status_path)
    if running:
        return running[0].pid
    config.out_dir.mkdir(parents=True, exist_ok=True)
    config.status_path.parent.mkdir(parents=True, exist_ok=True)
    return start_detached(config.argv(), config.log_path, config.status_path)


def stop_pipelines(status_path: Path, timeout_s: float = STOP_TIMEOUT_S) -> list[int]:
    """SIGTERM every pipeline writing ``status_path``, SIGKILL what outlives ``timeout_s``.

    Args:
        status_path: The status document.
        timeout_s: Seconds for a clean exit (it finishes writing its current shard).

    Returns:
        The pids that were stopped (empty when none ran).
    """
    return stop_processes(find_pipelines(status_path), timeout_s)


def stop_processes(procs: list[psutil.Process], timeout_s: float = STOP_TIMEOUT_S) -> list[int]:
    """SIGTERM each of ``procs`` (verified by the caller), SIGKILL what outlives ``timeout_s``.

    Returns:
        Their pids.
    """
    for proc in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.send_signal(signal.SIGTERM)
    _, alive = psutil.wait_procs(procs, timeout=timeout_s)
    for proc in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()
    if alive:
        psutil.wait_procs(alive, timeout=5.0)
    return [p.pid for p in procs]

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

from tui.outputs import make_dir
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


def is_pipeline_of(cmdline: Sequence[str], status_path: Path, cwd: str | None = None) -> bool:
    """Whether ``cmdline`` is a ``gpufleet generate`` run writing ``status_path``.

    Args:
        cmdline: A process's command line.
        status_path: The status document the console watches (absolute).
        cwd: The process's working directory: a relative ``--status`` is relative to it (a job
            started as ``generate --status status.json`` writes the same file).

    Returns:
        True for ``... tui generate ... --status STATUS`` (or ``--status=STATUS``, or the
        ``gpufleet`` entry point).
    """
    args = list(cmdline)
    if "generate" not in args or "--detach" in args:
        return False
    head = args[: args.index("generate")]
    if not any(a == "tui" or Path(a).name == "gpufleet" for a in head):
        return False
    given = _status_option(args[args.index("generate") + 1 :])
    if given is None:
        return False
    path = Path(given)
    if not path.is_absolute():
        if cwd is None:
            return path == status_path
        path = Path(cwd) / path
    return os.path.normpath(path) == os.path.normpath(status_path.absolute())


def _status_option(options: Sequence[str]) -> str | None:
    """The value of the last ``--status`` in ``options`` (argparse's rule), or None."""
    found = None
    for index, arg in enumerate(options):
        if arg == "--status" and index + 1 < len(options):
            found = options[index + 1]
        elif arg.startswith("--status="):
            found = arg.removeprefix("--status=")
    return found


def _cmdline(proc: psutil.Process) -> tuple[list[str], str | None] | None:
    """A live process's command line and working directory (None: gone, a zombie, or not
    readable; the directory is None when only it cannot be read)."""
    try:
        if proc.status() == psutil.STATUS_ZOMBIE or proc.uids().effective != os.geteuid():
            return None
        line = proc.cmdline()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None
    try:
        return line, proc.cwd()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return line, None


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
            seen = _cmdline(proc)
            if seen is not None and is_pipeline_of(seen[0], status_path, seen[1]):
                found[proc.pid] = proc
    for proc in psutil.process_iter():
        if proc.pid in found:
            continue
        seen = _cmdline(proc)
        if seen is not None and is_pipeline_of(seen[0], status_path, seen[1]):
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
    make_dir(config.out_dir)
    make_dir(config.status_path.parent)
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

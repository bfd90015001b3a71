"""Start one server: argv only, its own session, its log kept from the previous run, recorded."""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil

from tui.inputs import InputError, open_stream
from tui.outputs import create_new, make_dir, write_problem
from tui.servers.procinfo import LAUNCH_ID_ENV, boot_id, start_ticks
from tui.state.fleet_state import ProcessRecord, put_record, remove_record

LOG_KEEP = 5
"""How many previous logs survive a relaunch (``x.log.1`` newest ... ``x.log.5`` oldest)."""


class LaunchError(RuntimeError):
    """The server could not be started, or died at once (the message says why)."""


def rotate_log(path: Path, keep: int = LOG_KEEP) -> None:
    """Move ``path`` to ``path.1`` (shifting older ones up, dropping past ``keep``).

    Args:
        path: the log about to be reused.
        keep: how many old logs to keep (0 keeps none).
    """
    # lexists, rename and unlink act on a link itself, never on what it points to.
    if not os.path.lexists(path):
        return
    if keep <= 0:
        path.unlink()
        return
    oldest = path.with_name(f"{path.name}.{keep}")
    oldest.unlink(missing_ok=True)
    for n in range(keep - 1, 0, -1):
        older = path.with_name(f"{path.name}.{n}")
        if os.path.lexists(older):
            older.rename(path.with_name(f"{path.name}.{n + 1}"))
    path.rename(path.with_name(f"{path.name}.1"))


@dataclass(frozen=True, slots=True)
class ManagedProcess:
    """A server this process launched: the fleet record plus the Popen (for its exit code)."""

    record: ProcessRecord
    """Identity as written to the fleet record."""
    popen: subprocess.Popen[bytes]
    """The child; ``poll()``/``wait()`` reap it."""

    def poll(self) -> int | None:
        """Exit code, or None while it runs."""
        return self.popen.poll()


def tail_lines(path: Path, count: int = 20, max_bytes: int = 64 * 1024) -> list[str]:
    """The last ``count`` lines of a (possibly large) text file; [] when unreadable."""
    try:
        with open_stream(path, "a log") as handle:  # a FIFO or device: [] at once
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - max_bytes))
            text = handle.read().decode("utf-8", "replace")
    except (OSError, InputError):
        return []
    return text.splitlines()[-count:]


def launch(
    argv: Sequence[str],
    env: Mapping[str, str],
    log_path: Path,
    cwd: Path | None = None,
    *,
    gpu: int,
    port: int,
    profile: str = "",
    host: str = "127.0.0.1",
    record: bool = True,
    device: int | None = None,
) -> ManagedProcess:
    """Start a server in its own session with stdout and stderr going to ``log_path``.

    Args:
        argv: program and arguments (never a shell string).
        env: the complete environment (``tui.profiles.env_for`` sets CUDA_VISIBLE_DEVICES).
        log_path: its log; an existing one is rotated to ``.1`` first, not overwritten.
        cwd: working directory (default: this process's).
        gpu: GPU index, recorded for re-attaching.
        port: HTTP port, recorded.
        profile: profile name, recorded.
        host: bind address, recorded.
        record: write the identity into the fleet record (``tui.paths.fleet_file()``).
        device: the physical GPU it runs on when not ``gpu`` (servers sharing a card), recorded.

    Returns:
        The managed process; its identity is already in the fleet record.

    Raises:
        LaunchError: the program could not be executed.
    """
    if not argv:
        raise LaunchError("empty argv: nothing to launch")
    try:
        make_dir(log_path.parent)
        rotate_log(log_path)
        # O_EXCL on the name the rotation freed: a link put there since is refused, not followed.
        fd = create_new(log_path, 0o644)
    except OSError as exc:
        raise LaunchError(
            f"GPU {gpu}: cannot start its log: {write_problem(log_path, exc)}"
        ) from None
    launch_id = uuid.uuid4().hex
    with os.fdopen(fd, "wb") as log:
        try:
            popen = subprocess.Popen(
                list(argv),
                env={**env, LAUNCH_ID_ENV: launch_id},
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
            )
        except OSError as exc:
            raise LaunchError(f"GPU {gpu}: cannot execute {argv[0]!r}: {exc}") from exc
    # The identity's command line is the argv we exec'd: /proc/<pid>/cmdline can read empty for
    # a moment right after exec (seen with parallel launches), and after exec it equals argv.
    cmdline = tuple(argv)
    # Its start ticks are its identity (a clock step cannot move them); the wall-clock start
    # time is for display. A child we have not reaped keeps its /proc entry, zombie or not.
    ticks = start_ticks(popen.pid) or 0
    try:
        create_time = psutil.Process(popen.pid).create_time()
    except psutil.NoSuchProcess:
        create_time = 0.0  # died before we could look; stop() will find it gone
    entry = ProcessRecord(
        gpu=gpu,
        port=port,
        pid=popen.pid,
        pgid=popen.pid,
        create_time=create_time,
        cmdline=cmdline,
        log_path=str(log_path),
        profile=profile,
        host=host,
        launch_id=launch_id,
        start_ticks=ticks,
        boot_id=boot_id(),
        device=None if device == gpu else device,
    )
    if record:
        put_record(entry)
    return ManagedProcess(entry, popen)


def check_started(process: ManagedProcess, settle_s: float, log_lines: int = 15) -> None:
    """Wait up to ``settle_s`` for an immediate death; raise with its exit code and log tail.

    Args:
        process: the launched server.
        settle_s: how long a launch that "dies at once" may take to die.
        log_lines: how many of the last log lines to put in the message.

    Raises:
        LaunchError: it exited within ``settle_s``.
    """
    try:
        code = process.popen.wait(timeout=settle_s)
    except subprocess.TimeoutExpired:
        return
    r = process.record
    remove_record(r.gpu, r.pid)
    tail = "\n".join(f"    {line}" for line in tail_lines(Path(r.log_path), log_lines))
    raise LaunchError(
        f"GPU {r.gpu} (port {r.port}): the server exited at once with code {code}; "
        f"last lines of {r.log_path}:\n{tail or '    (log is empty)'}"
    )

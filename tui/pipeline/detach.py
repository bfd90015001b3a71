"""Start the pipeline detached, so closing the console or dropping SSH does not stop it.

Every detached start (``gpufleet generate --detach``, the console's ``p``, a node agent's
start) goes through ``start_detached``: the job is recorded first (``tui.pipeline.job_record``:
its id, options and directory, in the user's private state directory) and started with its id
in its environment, so the process of the job is known by what it carries, never by its command
line alone, and the agent can start it again from a record of this user, never from another
process's options.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from tui.outputs import make_dir, open_log
from tui.pipeline.job_record import JOB_ID_ENV, JobRecord, new_record, write_record


def generate_argv(argv: Sequence[str]) -> list[str]:
    """The full argv that runs ``gpufleet generate`` with ``argv`` under this interpreter."""
    return [sys.executable, "-m", "tui", "generate", *argv]


def start_detached(argv: Sequence[str], log_path: Path, status_path: Path) -> int:
    """Record the job and start ``gpufleet generate ARGV`` in its own session, output appended to
    ``log_path``.

    Its own session (setsid) means no controlling terminal: a hangup of the console's terminal
    or SSH session is not delivered to it. Stop it with SIGTERM to its pid.

    Args:
        argv: the generate options, without --detach.
        log_path: file that receives its stdout and stderr.
        status_path: its status document (the record is kept under it).

    Returns:
        The pipeline's pid.
    """
    return start_recorded(new_record(list(argv), status_path, log_path)).pid


def start_recorded(record: JobRecord) -> subprocess.Popen[bytes]:
    """Keep ``record``, then start its job from its directory with its id in its environment.

    Returns:
        The pipeline's process (poll it to reap it once it ends).
    """
    log_path = Path(record.log_path)
    make_dir(log_path.parent)
    # The log first (a link or a full disk there refuses the start with no record written),
    # then the record: a job never runs without the record that names it.
    with os.fdopen(open_log(log_path), "ab") as log:
        write_record(record)
        process = subprocess.Popen(
            generate_argv(record.options),
            cwd=record.cwd,
            env={**os.environ, JOB_ID_ENV: record.job_id},
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )
    return process

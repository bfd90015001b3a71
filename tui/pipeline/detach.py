"""Start the pipeline detached, so closing the console or dropping SSH does not stop it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from tui.outputs import make_dir, open_log


def generate_argv(argv: Sequence[str]) -> list[str]:
    """The full argv that runs ``gpufleet generate`` with ``argv`` under this interpreter."""
    return [sys.executable, "-m", "tui", "generate", *argv]


def start_detached(argv: Sequence[str], log_path: Path) -> int:
    """Start ``gpufleet generate ARGV`` in its own session, output appended to ``log_path``.

    Its own session (setsid) means no controlling terminal: a hangup of the console's terminal
    or SSH session is not delivered to it. Stop it with SIGTERM to its pid.

    Args:
        argv: the generate options, without --detach.
        log_path: file that receives its stdout and stderr.

    Returns:
        The pipeline's pid.
    """
    make_dir(log_path.parent)
    with os.fdopen(open_log(log_path), "ab") as log:
        process = subprocess.Popen(
            generate_argv(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )
    return process.pid

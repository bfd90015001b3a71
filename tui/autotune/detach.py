"""Start a search in its own session, so closing the console or dropping SSH does not stop it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from tui import paths
from tui.outputs import make_dir, open_log


def search_log() -> Path:
    """Where a detached search's output goes."""
    return paths.autotune_dir() / "search.log"


def start_detached(argv: Sequence[str]) -> subprocess.Popen[bytes]:
    """Start ``gpufleet autotune start ARGV`` (without --detach) in its own session.

    Its own session (setsid) means no controlling terminal: a hangup of the console's terminal
    is not delivered to it. Stop it with ``gpufleet autotune stop`` (or SIGTERM to its pid).

    Args:
        argv: The ``start`` options, without ``--detach``.

    Returns:
        The started process (its output appended to ``search_log()``).
    """
    log = search_log()
    make_dir(log.parent)
    with os.fdopen(open_log(log), "ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "tui", "autotune", "start", *argv],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )

"""gpufleet's own commands as the real-server harnesses run them (``harness.py``,
``adopt_real.py``): as an operator types them, this Python, the harness's environment. Standard
library only (``harness.py`` also needs ``pyte``, which this must not)."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any


def gpufleet_command(
    env: dict[str, str], args: Sequence[str], timeout: float
) -> tuple[dict[str, Any], str]:
    """Run ``gpufleet ARGS`` as an operator types it (this Python, ``env``): its record (argv,
    exit status, seconds, stderr; -999 when it ran past ``timeout``) and its whole stdout."""
    started = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "tui", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        rc, out, err = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as exc:
        rc, out, err = -999, str(exc.stdout or ""), f"timed out after {timeout} s"
    seconds = round(time.monotonic() - started, 2)
    return {"argv": ["gpufleet", *args], "rc": rc, "seconds": seconds, "stderr": err}, out


def end_job(proc: subprocess.Popen[Any], wait_s: float = 60.0) -> None:
    """End a ``gpufleet generate`` the harness started: SIGTERM (it writes what it has), then
    SIGKILL after ``wait_s``."""
    proc.send_signal(signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(wait_s)
    if proc.poll() is None:
        proc.kill()

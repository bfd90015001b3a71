"""The operation lock: one operation at a time, the refused one told who holds the fleet, a dead
holder's lock free again and its stale entry reported."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from control_helpers import wait_for

from tui import paths
from tui.ops.lock import OperationBusy, current_holder, operation_lock


def test_a_second_operation_in_this_process_is_refused_naming_the_first() -> None:
    with operation_lock("apply sim-aggressive to GPUs 0,1") as held:
        assert held.took_over is None
        holder = current_holder()
        assert holder is not None and holder.pid == os.getpid()
        with (
            pytest.raises(OperationBusy, match=r"apply sim-aggressive to GPUs 0,1 \(pid \d+"),
            operation_lock("canary sim-aggressive on GPU 3"),
        ):
            pass
    assert current_holder() is None
    with operation_lock("canary sim-aggressive on GPU 3"):  # free again once released
        pass


def test_another_process_is_refused_while_one_holds_it(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    code = textwrap.dedent(
        f"""
        import pathlib, threading
        from tui.ops.lock import operation_lock
        with operation_lock("rollout of x"):
            pathlib.Path({str(ready)!r}).write_text("held")
            threading.Event().wait()
        """
    )
    child = subprocess.Popen([sys.executable, "-c", code], env=dict(os.environ))
    try:
        wait_for(ready.exists, 30, "the child to hold the lock")
        with (
            pytest.raises(OperationBusy, match=rf"rollout of x \(pid {child.pid},"),
            operation_lock("apply y"),
        ):
            pass
        # A holder that dies (SIGKILL: no cleanup runs) frees the lock; its stale entry is seen.
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
        with operation_lock("apply y") as held:
            assert held.took_over is not None
            assert held.took_over.pid == child.pid and held.took_over.operation == "rollout of x"
            assert not held.took_over.alive()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=10)
    assert paths.operation_lock_file().exists()

"""The kit of ``bench.attacks`` (issue 31's attacks, re-runnable): a command that outlives its
deadline is reported as hung and its whole session is gone, a foreign group is counted, and the
table says HUNG and FAIL where a row failed."""

from __future__ import annotations

import contextlib
import socket
from pathlib import Path

import pytest
from repo_paths import ROOT

from bench.attack_kit import Row, Run, Workspace, group_size, poll, started, table
from bench.ports import free_ports

pytestmark = [pytest.mark.timeout(60)]

SHIPPED = ROOT / "profiles"


def test_a_command_past_its_deadline_is_reported_hung_and_stopped(tmp_path: Path) -> None:
    """The agent in the foreground serves until stopped: past the deadline the run says hung,
    and nothing of the workspace runs afterwards."""
    ws = Workspace(tmp_path / "ws", 1)
    try:
        port = str(free_ports(1)[0])
        run = ws.cli(["agent", "--profile", "sim-baseline", "--port", port], 3, SHIPPED)
        assert run.hung and run.rc is None
        assert poll(lambda: not ws.ours(), 10), ws.ours()
        row = Row("agent in the foreground", run, "-", False)
        assert "| HUNG |" in table([row]) and "| FAIL |" in table([row])
    finally:
        ws.cleanup()


def test_a_command_that_shows_it_will_hang_is_stopped_at_once(tmp_path: Path) -> None:
    """``hangs``: the agent listens (it serves instead of refusing), so it is a hang now, not at
    its 60 s deadline."""
    ws = Workspace(tmp_path / "ws", 1)
    try:
        port = free_ports(1)[0]
        argv = ["agent", "--profile", "sim-baseline", "--port", str(port)]

        def listens() -> bool:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                return True
            return False

        run = ws.cli(argv, 60, SHIPPED, hangs=listens)
        assert run.hung and run.seconds < 40
        assert poll(lambda: not ws.ours(), 10), ws.ours()
    finally:
        ws.cleanup()


def test_a_foreign_group_is_counted_and_stopped_with_its_session() -> None:
    with started(["bash", "-c", "sleep 2001 & sleep 2002 & wait"]) as group:
        assert poll(lambda: group_size(group.pid) == 3, 10)
    assert poll(lambda: group_size(group.pid) == 0, 10)


def test_a_run_s_lines_and_traceback() -> None:
    run = Run(["gpufleet", "x"], 1, "ok line\n", "\nfirst\nMemoryError\n", 0.1)
    assert run.lines == ["first", "MemoryError"] and run.traceback and not run.hung
    assert run.line_with("Memory") == "MemoryError"
    quiet = Run(["gpufleet", "x"], 0, "done GPU 0\n", "", 0.1)
    assert quiet.lines == ["done GPU 0"] and not quiet.traceback

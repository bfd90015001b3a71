"""Adoption takes only the process that holds the port's listening socket itself.

Who holds a socket is read from every process's fds; a process forked by a launch holds all of
its parent's for a moment before its exec closes them. Seen under load (``make test`` with both
cores busy): the demo launched GPU 0's server while checking GPU 1's port, held by the test; the
port's holder was read as GPU 0's new server, whose launch id this fleet gave, and it was
adopted as GPU 1's server: the demo started on a port it did not have.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tui.control.adopt import holder_record
from tui.control.preflight import PortHolder
from tui.servers.procinfo import LAUNCH_ID_ENV
from tui.state.fleet_state import GpuState, read_records, update_fleet

LAUNCH_ID = "launch-of-gpu-0"


@pytest.fixture
def fleet_child(isolated_state: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A process carrying a launch id the fleet gave (GPU 0's), listening on nothing."""
    update_fleet(lambda state: {**state, 0: GpuState(gpu=0, launches=(LAUNCH_ID,))})
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"],
        stdin=subprocess.PIPE,
        env={**os.environ, LAUNCH_ID_ENV: LAUNCH_ID},
    )
    try:
        yield child
    finally:
        child.kill()
        child.wait(timeout=10)


def test_a_fleet_process_named_for_a_port_it_does_not_listen_on_is_not_adopted(
    fleet_child: subprocess.Popen[bytes],
) -> None:
    with socket.socket() as held:  # the port is this test's, as in the demo's test
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        record, why = holder_record(1, PortHolder(port, fleet_child.pid, "python"), "127.0.0.1")
    assert record is None
    assert "does not hold the port's listening socket" in why
    assert read_records() == {}


def test_a_fleet_server_listening_on_the_port_is_adopted(isolated_state: Path) -> None:
    update_fleet(lambda state: {**state, 0: GpuState(gpu=0, launches=(LAUNCH_ID,))})
    code = (
        "import socket, sys\n"
        "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n"
        "print(s.getsockname()[1], flush=True); sys.stdin.read()\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={**os.environ, LAUNCH_ID_ENV: LAUNCH_ID},
    )
    try:
        assert child.stdout is not None
        port = int(child.stdout.readline())
        record, why = holder_record(0, PortHolder(port, child.pid, "python"), "127.0.0.1")
        assert why == ""
        assert record is not None and record.pid == child.pid and record.port == port
    finally:
        child.kill()
        child.wait(timeout=10)

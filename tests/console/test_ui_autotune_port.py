"""Autotune through the console's port: a many-node console (a real ``Nodes`` port) neither
starts a search on its own host nor shows that host's search as the fleet's, and says why; the
local port's autotune (``DetachedAutotune``, what ``gpufleet console`` passes its port) writes
the search's control file, reads its status and starts the detached ``gpufleet autotune start``
(a real process, here one that refuses a bad option and exits)."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest
from ui_helpers import wait_for

from tui.agent.client import parse_agents
from tui.agent.nodes import ON_ONE_NODE, Nodes
from tui.autotune.detach import search_log
from tui.autotune.status import control_file, read_request, status_file, write_status
from tui.console_wiring import DetachedAutotune
from tui.ops.commands import Kind, StartAutotune, SteerAutotune
from tui.ops.local import WATCHING, LocalFleet
from tui.ops.port import Refused
from tui.ops.service import FleetOps
from tui.ui.app import FleetApp
from tui.ui.autotune.autotune_screen import AutotuneScreen
from tui.ui.autotune.form_screen import AutotuneFormScreen
from tui.ui.gate import why_key_is_off
from tui.ui.operation_strip import OperationStrip

from .test_ui_autotune import status, text

pytestmark = [pytest.mark.timeout(120)]


@pytest.fixture
def refusing() -> Iterator[list[str]]:
    """Two loopback addresses that refuse connections (bound, never listening): agents that do
    not answer, so the console is a many-node one with nothing on the wire."""
    held = [socket.socket() for _ in range(2)]
    try:
        for sock in held:
            sock.bind(("127.0.0.1", 0))
        yield [f"127.0.0.1:{sock.getsockname()[1]}" for sock in held]
    finally:
        for sock in held:
            sock.close()


async def test_a_many_node_console_starts_no_search_on_its_own_host(refusing: list[str]) -> None:
    # A search ran on the console's host and ended: a local console would offer s here.
    write_status(status("stopped"))
    port = Nodes(parse_agents(",".join(refusing)), "token")
    app = FleetApp(port, node_groups=True, poll_interval_s=3600)
    why = ON_ONE_NODE[Kind.AUTOTUNE]
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("a")
        await wait_for(pilot, lambda: isinstance(app.screen, AutotuneScreen), "the screen")
        screen = app.screen
        assert isinstance(screen, AutotuneScreen)
        await wait_for(pilot, lambda: "follows no" in text(screen, "autotune-summary"), "words")
        # not the host's search shown as the fleet's: the port's reason instead
        said = text(screen, "autotune-summary")
        assert said == f"This console follows no autotune search: {why}."
        assert screen.doc is None
        for action in ("start", "pause", "resume", "stop"):
            assert screen.check_action(action, ()) is None, action
        assert why_key_is_off(screen, "s") == ("Start search", why)
        await pilot.press("s")
        await pilot.pause()
        assert not isinstance(app.screen, AutotuneFormScreen)  # no form: nothing to confirm
        # the grid's strip does not show the host's search either
        write_status(status("canary"))
        before = status_file().read_bytes()
        strip = app.main_screen.query_one(OperationStrip)
        await strip.read_autotune()
        assert strip.autotune is None
    await port.aclose()
    assert not control_file().exists()
    assert status_file().read_bytes() == before  # no search started here wrote it
    assert not search_log().exists()  # and no detached search was started on this host


async def test_the_local_port_starts_steers_and_reads_the_search_on_its_host() -> None:
    port = LocalFleet(FleetOps(), autotune=DetachedAutotune())
    capabilities = port.capabilities()
    assert Kind.AUTOTUNE in capabilities and capabilities.follows_autotune
    read = port.autotune_status()
    assert read is not None and read.doc is None and not read.alive
    write_status(status("canary"))  # names this (running) process
    read = port.autotune_status()
    assert read is not None and read.doc is not None and read.alive
    await port.run(SteerAutotune("pause"))
    found = read_request(0.0)
    assert found is not None and found.request == "pause"
    # a real detached `gpufleet autotune start`, which refuses the option in one line
    await port.run(StartAutotune(("--window", "-1")))
    deadline = time.monotonic() + 60
    said = ""
    while "--window" not in said and time.monotonic() < deadline:
        said = search_log().read_text() if search_log().exists() else ""
        time.sleep(0.2)
    assert "argument --window: -1: allowed range" in said, said


async def test_a_local_port_without_the_search_or_watching_refuses_it_and_says_why() -> None:
    bare = LocalFleet(FleetOps())
    assert Kind.AUTOTUNE not in bare.capabilities()
    assert not bare.capabilities().follows_autotune
    assert "gpufleet autotune start" in bare.capabilities().reason(Kind.AUTOTUNE)
    with pytest.raises(Refused, match="steerautotune: this console has no autotune search"):
        await bare.run(SteerAutotune("stop"))
    assert bare.autotune_status() is None
    # watching ports: the search on this host is shown, but not started until adopted
    watching = LocalFleet(FleetOps(), autotune=DetachedAutotune(), watching=True)
    assert watching.capabilities().follows_autotune
    assert watching.capabilities().reason(Kind.AUTOTUNE) == WATCHING
    with pytest.raises(Refused):
        await watching.run(StartAutotune(()))
    assert not control_file().exists() and not search_log().exists()

"""``GPUFLEET_PLAIN`` (``tui.plain``): each hand-written replacement switched off runs the
library's own path, the code a user would get were the replacement deleted; a misspelt switch is
one line before anything runs."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from typing import Any

import pytest
from servers_helpers import five_polls_of_a_loaded_server
from ui_helpers import make_app, settle, seven_gpu_fleet, wait_for

from tui import plain
from tui.fleet.snapshot import ServerState
from tui.pipeline.sender import lean_route
from tui.servers.batch_fetch import BatchFetcher
from tui.servers.keepalive import KeepAliveTransport, lean_transport


def test_names_and_groups_parse_and_a_stranger_is_named() -> None:
    assert plain.parse("") == frozenset()
    assert plain.parse(" keepalive , GCFREEZE,,") == {"keepalive", "gcfreeze"}
    assert plain.parse("render") == set(plain.GROUPS["render"])
    assert plain.parse("all") == set(plain.SWITCHES)
    with pytest.raises(plain.PlainError) as caught:
        plain.parse("keepalive,turbo")
    text = str(caught.value)
    assert text.startswith("GPUFLEET_PLAIN: 'turbo' is not a switch; allowed: keepalive, batch")
    assert text.endswith("render, all") and "\n" not in text


def test_a_misspelt_switch_stops_the_command_in_one_line(tmp_path: Any) -> None:
    env = {**os.environ, plain.ENV: "keepalive,turbo", "GPUFLEET_STATE_DIR": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "-m", "tui", "profile", "list"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.strip().splitlines() == [
        "gpufleet: GPUFLEET_PLAIN: 'turbo' is not a switch; allowed: "
        + ", ".join([*plain.SWITCHES, *plain.GROUPS])
    ]
    assert not (tmp_path / "fleet.json").exists()  # nothing ran


async def test_keepalive_and_batch_off_probe_through_httpx_alone(
    monkeypatch: pytest.MonkeyPatch, plain_switch: Any
) -> None:
    """The monitor's probes go through httpx's own client and transport (httpcore), none
    through the keep-alive transport or the blocking batch; the readings are the same."""
    plain_switch("keepalive,batch")
    used: list[str] = []
    for owner, name in (
        (KeepAliveTransport, "fetch"),
        (KeepAliveTransport, "handle_async_request"),
        (BatchFetcher, "fetch_all"),
    ):
        original = getattr(owner, name)

        def counted(*args: Any, _original: Any = original, _name: str = name) -> Any:
            used.append(_name)
            return _original(*args)

        monkeypatch.setattr(owner, name, counted)
    served, hits = await five_polls_of_a_loaded_server()
    assert served.state is ServerState.READY
    assert (served.running, served.queued, served.max_running_requested) == (14, 34, 64)
    assert hits["/metrics"] == 5
    assert used == []


def test_keepalive_off_sends_the_pipeline_through_httpx(plain_switch: Any) -> None:
    assert lean_route("http://127.0.0.1:30000") == ("127.0.0.1", 30000, "")
    assert isinstance(lean_transport(), KeepAliveTransport)
    plain_switch("keepalive")
    assert lean_route("http://127.0.0.1:30000") is None
    assert lean_transport() is None


async def test_gcfreeze_off_freezes_nothing(plain_switch: Any) -> None:
    plain_switch("gcfreeze")
    gc.unfreeze()
    app = make_app(seven_gpu_fleet())
    app.freeze_heap = True  # what the console's command sets
    try:
        async with app.run_test(size=(200, 50)) as pilot:
            await settle(pilot, app)
            await wait_for(pilot, lambda: not app.freeze_heap, "the first snapshot drawn")
            await pilot.pause()
            await pilot.pause()
            assert gc.get_freeze_count() == 0
    finally:
        gc.unfreeze()

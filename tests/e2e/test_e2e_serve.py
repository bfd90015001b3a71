"""``gpufleet serve`` end to end: a real headless Chromium against the served console of a real
simulated fleet. Refused without the token; with it every GPU panel shows ready, Enter opens the
detail screen, and read-only `K` stops nothing; `g` shows the generation pane's chart drawn in
blocks with its ticks and a named marker. Screenshots of the page (the grid, the chart) are
kept."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from browser_helpers import (
    CHROMIUM_FLAGS,
    guard_page,
    keep_artefact,
    require_chromium,
    screen_text,
    served,
    wait_until,
)
from operator_helpers import OpFleet, cleaned, healthy, pid_alive, write_profiles
from sim_helpers import wait_until as wait_sim
from ui_helpers import verify_report

from bench.simfleet import free_ports
from tui import paths
from tui.history import HistoryStore, Sample
from tui.ops.entries import canary_entry
from tui.ops.journal import append
from tui.ops.service import FleetOps
from tui.rollout.canary_result import CanaryResult
from tui.state.fleet_state import read_records

pytestmark = [pytest.mark.timeout(120)]

GPUS = [0, 1]
PAGE_S = 30.0
"""Deadline for the served console to draw what a step expects (a few seconds when idle)."""


@pytest.fixture()
def fleet(
    tmp_path: Path, isolated_state: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[OpFleet]:
    """A running 2-GPU simulated fleet of 'op-baseline'; everything is stopped afterwards."""
    made = write_profiles(tmp_path / "profiles", GPUS)
    monkeypatch.setenv(paths.PROFILES_ENV, str(made.profiles_dir))
    with cleaned(isolated_state, made.ports):
        up = asyncio.run(FleetOps(made.baseline).start(made.baseline))
        assert all(why is None for why in up.values()), up
        assert wait_sim(lambda: all(healthy(p) for p in made.ports), 30)
        yield made


def recorded_job(now: float) -> None:
    """An hour of the job's output rate in the history (a canary at -20m that lifted it) and
    the canary in the journal: what the served console's generation pane then draws."""
    change = now - 1200
    store = HistoryStore(paths.history_file())
    store.write(
        Sample(t, None, "out_tok_s", (1500.0 if t < change else 1800.0) + 40 * (i % 5))
        for i, t in enumerate(range(int(now) - 3600, int(now) - 30, 5))
    )
    store.close()
    result = CanaryResult(
        "op-aggressive", 1, (0,), "op-baseline", "better", "", None, None,
        started_at=change - 120, finished_at=change + 300, baseline_window=(change - 120, change),
        measure_window=(change + 120, change + 300), report=verify_report(1, "op-aggressive"),
    )  # fmt: skip
    append(canary_entry(result, "console"))


def panels_ready(text: str, pids: dict[int, int]) -> bool:
    """Every port's panel says ready with its server's pid."""
    return all(re.search(rf"ready\s+:{port} pid {pid}\b", text) for port, pid in pids.items())


def test_served_console_refuses_without_token_shows_the_fleet_and_stays_read_only(
    fleet: OpFleet, tmp_path: Path
) -> None:
    chromium = require_chromium()
    from playwright.sync_api import sync_playwright

    records = read_records()
    pids = {records[gpu].port: records[gpu].pid for gpu in GPUS}
    port = free_ports(1)[0]
    recorded_job(time.time())
    with served(["--profile", "op-baseline"], port, tmp_path) as server:
        base = server.base
        # Without the token, or with a wrong one: refused, the page and the websocket alike.
        assert httpx.get(f"{base}/").status_code == 401
        assert httpx.get(f"{base}/?token=not-the-token-at-all").status_code == 403
        upgrade = {"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13"}
        upgrade["Sec-WebSocket-Key"] = "dGhlIHNhbXBsZSBub25jZQ=="
        assert httpx.get(f"{base}/ws", headers=upgrade).status_code == 401
        assert httpx.get(f"{base}/static/js/textual.js").status_code == 401
        foreign = {**upgrade, "Origin": "http://elsewhere.example"}
        cookie = {"Cookie": f"gpufleet_token_{port}={server.token}"}
        assert httpx.get(f"{base}/ws", headers={**foreign, **cookie}).status_code == 403
        assert server.console_pids() == set()  # nothing was started for a refused request

        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=chromium, args=CHROMIUM_FLAGS, headless=True
            )
            try:
                page = browser.new_page(viewport={"width": 1280, "height": 800})
                outside = guard_page(page, "127.0.0.1")
                page.goto(server.url)
                assert "token" not in page.url  # moved into a cookie, out of the address bar
                text = wait_until(
                    lambda: (t := screen_text(page)) and panels_ready(t, pids) and t,
                    PAGE_S,
                    f"every panel ready with its pid {pids}",
                )
                assert "(read-only)" in str(text)
                assert len(server.console_pids()) == 1
                # The keys go to the xterm's input; focus also tells the app to draw its Footer.
                page.focus(".xterm-helper-textarea")
                wait_until(
                    lambda: "read-only" in screen_text(page).splitlines()[-1], PAGE_S, "Footer"
                )
                shot = tmp_path / "serve-readonly.png"
                page.screenshot(path=str(shot))
                keep_artefact(shot)

                page.keyboard.press("Enter")  # the detail screen of the selected GPU 0
                wait_until(
                    lambda: (
                        "Latency · allocation" in screen_text(page)
                        and "Numbers" in screen_text(page)
                    ),
                    PAGE_S,
                    "the detail screen",
                )
                page.keyboard.press("Escape")
                wait_until(
                    lambda: "Latency · allocation" not in screen_text(page), PAGE_S, "the grid"
                )

                # Read-only: K asks nothing and stops nothing. `?` after it shows the help, so
                # K has been handled by then (keys are handled in order).
                page.keyboard.press("Shift+K")
                page.keyboard.press("?")
                help_ = wait_until(
                    lambda: "Everywhere" in (t := screen_text(page)) and t, PAGE_S, "the help"
                )
                assert re.search(r"Kill all\s+\(disabled: read-only\)", str(help_))
                assert "Stop all" not in str(help_)
                page.keyboard.press("Escape")

                # The generation pane's chart as the browser draws it: blocks, not braille
                # dots; round ticks; the canary named under its marker, its windows shaded.
                wait_until(lambda: "Everywhere" not in screen_text(page), PAGE_S, "the grid")
                page.keyboard.press("g")
                chart = wait_until(
                    lambda: "canary op-aggressive GPU 1" in (t := screen_text(page)) and t,
                    PAGE_S,
                    "the generation pane's chart with its marker",
                )
                assert "output tok/s" in str(chart) and "▲" in str(chart)
                assert re.search(r"(?m)^\S*\s+2000 ", str(chart)), chart  # a round tick
                assert not any(0x2800 <= ord(c) <= 0x28FF for c in str(chart))  # no braille
                shot = tmp_path / "serve-generation.png"
                page.screenshot(path=str(shot))
                keep_artefact(shot)
                assert outside == []
            finally:
                browser.close()
        # The browser left: its console ends; the fleet is untouched.
        wait_until(lambda: not server.console_pids(), PAGE_S, "the console to end")
    assert {r.port: r.pid for r in read_records().values()} == pids
    assert all(pid_alive(pid) for pid in pids.values())
    assert all(healthy(port) for port in pids)

"""The autotune screen (Pilot, fixed status documents, no servers): it shows the search from its
status document read through the port, every key sends the port its command (a start after a
confirmation), read-only mode disables them, and a many-node console neither starts nor shows a
search of its own host (a search tunes one node's GPUs). The local port's autotune
(``DetachedAutotune``) writes the control file and starts the detached process."""

from __future__ import annotations

import os
import time
from typing import Any

import psutil
from textual.widgets import Static
from ui_helpers import RecordingFleet, make_app, settle, wait_for

from tui.autotune.budget import Budget
from tui.autotune.options import SearchRequest, request_argv
from tui.autotune.space import SearchSpace
from tui.autotune.status import control_file, read_request, write_status
from tui.ops.commands import StartAutotune, SteerAutotune
from tui.ui.autotune.autotune_screen import AutotuneScreen
from tui.ui.autotune.candidate_chart import CandidateChart
from tui.ui.autotune.form_screen import AutotuneFormScreen
from tui.ui.confirm import ConfirmScreen


def status(phase: str, *, alive: bool = True) -> dict[str, Any]:
    """A search's status document; ``alive``: it names this (running) process."""
    me = psutil.Process()
    history = [
        {"index": 1, "key": "max_mamba_cache_size=120", "canary_tokens_per_s": 24900.0,
         "control_tokens_per_s": 19400.0, "relative": 0.28, "verdict": "better"},
        {"index": 2, "key": "max_mamba_cache_size=160", "canary_tokens_per_s": 28500.0,
         "control_tokens_per_s": 24800.0, "relative": 0.15, "verdict": "better"},
        {"index": 3, "key": "speculative_num_steps=4", "canary_tokens_per_s": 27400.0,
         "control_tokens_per_s": 28400.0, "relative": -0.035, "verdict": "worse"},
    ]  # fmt: skip
    candidates = [
        {"index": h["index"], "key": h["key"], "relative": h["relative"],
         "decision": "kept" if h["verdict"] == "better" else "dropped",
         "why": "better: adopted by a rollout to 6 GPUs" if h["verdict"] == "better"
         else "worse: rolled back to autotune-1"}
        for h in history
    ]  # fmt: skip
    return {
        "phase": phase,
        "reason": "",
        "pid": os.getpid() if alive else 999_999,
        "create_time": me.create_time() if alive else 1.0,
        "started_at": time.time() - 60,
        "gpu": 0,
        "budget": {"wall_s": 3600.0, "explore_gpu_s": 1800.0, "max_regression": 0.25},
        "spent": {"wall_s": 60.0, "explore_gpu_s": 21.5, "canaries": 3},
        "incumbent": {"profile": "autotune-1", "knobs": {"max_mamba_cache_size": 160}},
        "current": {"index": 4, "key": "max_mamba_cache_size=200"} if phase == "canary" else None,
        "canary_up": True,
        "look": {
            "intervals": 6,
            "verdict": "better",
            "canary_tokens_per_s": 31000.0,
            "control_tokens_per_s": 28000.0,
        },
        "candidates": candidates,
        "history": history,
    }


def no_fleet(space: SearchSpace) -> str:
    raise RuntimeError("no fleet in this test")


def text(screen: AutotuneScreen, widget: str) -> str:
    return str(screen.query_one(f"#{widget}", Static).render())


def last_request() -> str | None:
    found = read_request(0.0)
    return None if found is None else found.request


def steered(port: RecordingFleet) -> list[str]:
    """The actions of every SteerAutotune that reached the port, in order."""
    return [c.action for c in port.commands if isinstance(c, SteerAutotune)]


def started(port: RecordingFleet) -> list[tuple[str, ...]]:
    """The options of every StartAutotune that reached the port, in order."""
    return [c.argv for c in port.commands if isinstance(c, StartAutotune)]


async def test_the_screen_shows_the_search_and_every_key_reaches_it() -> None:
    write_status(status("canary"))
    port = RecordingFleet()
    app = make_app(actions=port)
    async with app.run_test(size=(100, 40)) as pilot:
        screen = AutotuneScreen(app.port, interval_s=3600, predictor=no_fleet)
        await app.push_screen(screen)
        await wait_for(pilot, lambda: screen.doc is not None, "the status")
        summary = text(screen, "autotune-summary")
        assert "Search: canary" in summary and "autotune-1" in summary
        assert "Canary on GPU 0: max_mamba_cache_size=200 (measuring, 6 intervals" in summary
        assert "21.5 / 1800 GPU-s" in summary
        chart = screen.query_one(CandidateChart)
        drawn = str(chart.render())
        assert drawn.startswith("█ canary  █ control (incumbent), tok/s per GPU")
        assert "#1" in drawn and "#2" in drawn and "#3" in drawn
        # columns of blocks from 0 (a braille line read as faint dots in the browser)
        assert any(ch in "▁▂▃▄▅▆▇█" for ch in drawn)
        assert not any("\u2800" <= ch <= "\u28ff" for ch in drawn)
        listed = text(screen, "autotune-candidates")
        assert "#3 speculative_num_steps=4" in listed
        # the candidate being measured is listed too, with its latest look
        assert listed.splitlines()[-1] == (
            "#4 max_mamba_cache_size=200: measuring on GPU 0, 6 intervals: better so far"
        )
        # running, not paused: start and resume do not apply; pause and stop do
        assert screen.check_action("start", ()) is None
        assert screen.check_action("resume", ()) is None
        await pilot.press("p")
        await wait_for(pilot, lambda: steered(port) == ["pause"], "the pause command")
        write_status(status("paused"))
        await screen.reload()
        assert screen.check_action("pause", ()) is None
        await pilot.press("u")
        await wait_for(pilot, lambda: steered(port) == ["pause", "resume"], "the resume")
        await pilot.press("x")
        await wait_for(pilot, lambda: steered(port) == ["pause", "resume", "stop"], "the stop")
        # the search ended: s opens the form; ctrl+s asks, then sends the port the start with
        # the form's values: untouched, the default space and budget
        write_status(status("stopped"))
        await screen.reload()
        assert screen.check_action("stop", ()) is None
        await pilot.press("s")
        await wait_for(pilot, lambda: isinstance(app.screen, AutotuneFormScreen), "the form")
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirmation")
        await pilot.press("y")
        default = request_argv(SearchRequest(SearchSpace.default(), Budget()))
        await wait_for(pilot, lambda: started(port) == [tuple(default)], "the start")
        assert len(port.commands) == 4  # pause, resume, stop, start: nothing else was asked
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, AutotuneScreen), "closed")


async def test_a_dead_search_is_stale_and_read_only_disables_every_control() -> None:
    write_status(status("canary", alive=False))
    port = RecordingFleet()
    app = make_app(actions=port, readonly=True)
    async with app.run_test(size=(100, 40)) as pilot:
        screen = AutotuneScreen(app.port, interval_s=3600)
        await app.push_screen(screen)
        await wait_for(pilot, lambda: screen.doc is not None, "the status")
        assert "STALE" in text(screen, "autotune-summary")
        for action in ("start", "pause", "resume", "stop"):
            assert screen.check_action(action, ()) is None, action
        await pilot.press("s", "p", "x")
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmScreen)
        assert not control_file().exists()
    assert port.commands == []


async def test_a_from_the_grid_opens_the_screen_and_escape_leaves_the_search_running() -> None:
    write_status(status("canary"))
    app = make_app()
    async with app.run_test(size=(100, 40)) as pilot:
        await settle(pilot, app)
        await pilot.press("a")
        await wait_for(pilot, lambda: isinstance(app.screen, AutotuneScreen), "the screen")
        screen = app.screen
        assert isinstance(screen, AutotuneScreen)
        await wait_for(pilot, lambda: screen.doc is not None, "the status")
        assert "Search: canary" in text(screen, "autotune-summary")
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, AutotuneScreen), "the grid")
    assert last_request() is None  # closing the screen asked the search nothing


def test_after_the_canary_the_summary_says_what_the_search_does_not_the_canary() -> None:
    """Seen in the demo: 'Canary on GPU 0: ... (starting)' for the four minutes of the winner's
    rollout, as if a canary were starting."""
    from tui.ui.autotune.autotune_screen import describe

    doc = status("adopting")
    doc["current"] = {"index": 16, "key": "max_mamba_cache_size=120"}
    text = describe(doc, alive=True)
    assert "Adopting #16 max_mamba_cache_size=120: rolling it out to every GPU" in text
    assert "Canary on GPU" not in text
    doc["phase"] = "rolling back"
    assert "Rolling back after #16 max_mamba_cache_size=120" in describe(doc, alive=True)
    doc["phase"] = "canary"
    assert "Canary on GPU 0: max_mamba_cache_size=120 (measuring" in describe(doc, alive=True)

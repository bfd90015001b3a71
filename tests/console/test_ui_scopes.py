"""The scope of ``b`` (rollback) and ``o`` (rollout) is what the selection says: the marked GPUs,
else the whole fleet; the confirm names it before anything runs. One node, real simulated
servers behind the console's real backend (Pilot): a rollback of 1 of 3 marked GPUs relaunches
that GPU only, the others keep their pids."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from operator_helpers import OpFleet, cleaned, healthy, pid_alive, write_profiles
from sim_helpers import wait_until
from ui_helpers import RecordingFleet, fleet_of, make_app, press_until, settle, wait_for

from tui import paths
from tui.control.stop_release import StopTimeouts
from tui.fleet.monitor import FleetMonitor
from tui.fleet.snapshot import FleetSnapshot
from tui.gpu.simulated import SimulatedSource
from tui.ops.commands import Rollback, Rollout
from tui.ops.demo import spec_for_profile
from tui.ops.local import LocalFleet
from tui.ops.service import FleetOps, OpsOptions
from tui.retune.options import ApplyOptions
from tui.rollout.rollout import RolloutOptions
from tui.state.fleet_state import read_records, read_running
from tui.ui.app import FleetApp
from tui.ui.confirm import ConfirmScreen
from tui.ui.grid.scope import scope_words
from tui.ui.retune.profile_picker import ProfilePickerScreen
from tui.ui.rollout.describe import canary_question
from tui.ui.rollout.rollout_screen import RolloutScreen

pytestmark = [pytest.mark.timeout(120)]

FAST = ApplyOptions(timeout_s=60.0, release_timeout_s=20.0, poll_s=0.1, measure=False)


def _fleet(names: dict[int, str]) -> FleetSnapshot:
    """Panels on nodes: console GPU -> node name ("" for one node)."""
    base = fleet_of(1).panels[0]
    panels = tuple(replace(base, gpu_index=g, node=n) for g, n in names.items())
    return FleetSnapshot(panels=panels)


def test_scope_words_name_the_gpus_and_their_nodes() -> None:
    one = _fleet({0: "", 1: "", 2: ""})
    assert scope_words(one, None) == "the whole fleet (3 GPUs)"
    assert scope_words(one, (1,)) == "GPU 1"
    assert scope_words(one, (0, 2)) == "GPUs 0,2"
    many = _fleet({0: "a", 1: "a", 100: "b", 101: "b"})
    assert scope_words(many, None) == "the whole fleet (4 GPUs on nodes a, b)"
    assert scope_words(many, (100, 101)) == "node b GPUs 100-101 (all of it)"
    assert scope_words(many, (1, 100)) == "node a GPU 1; node b GPU 100"
    assert scope_words(many, (1, 300)) == "node a GPU 1; GPU 300 (not shown)"


async def test_marks_scope_the_rollback_and_the_rollout_else_the_fleet() -> None:
    actions = RecordingFleet()
    app = make_app(actions=actions, running={})
    async with app.run_test(size=(150, 45)) as pilot:
        await settle(pilot, app)
        # Nothing marked: the rollback is the fleet's (the backend picks the GPUs).
        await press_until(pilot, ("b",), ConfirmScreen)
        confirm = app.screen
        assert isinstance(confirm, ConfirmScreen)
        assert "Scope: the whole fleet (7 GPUs)" in confirm.affected
        await pilot.press("y")
        await wait_for(pilot, lambda: Rollback() in actions.commands, "the fleet's rollback")
        await wait_for(pilot, lambda: isinstance(app.screen, RolloutScreen), "the report")
        report = app.screen
        assert isinstance(report, RolloutScreen)
        await wait_for(pilot, lambda: report.finished, "its end")
        await pilot.press("escape")
        # GPUs 2 and 4 marked: the rollout is theirs, and its confirm says so.
        await pilot.press("2", "space", "4", "space")
        await press_until(pilot, ("o",), ProfilePickerScreen)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirm")
        confirm = app.screen
        assert isinstance(confirm, ConfirmScreen)
        assert "Scope: GPUs 2,4" in confirm.affected and "GPUs 2,4" in confirm.title_text
        await pilot.press("y")
        await wait_for(pilot, lambda: isinstance(actions.commands[-1], Rollout), "rollout")
        assert actions.commands[-1] == Rollout("sim-aggressive", 1, (2, 4))


@pytest.fixture()
def three(
    tmp_path: Path, isolated_state: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[OpFleet]:
    """A running 3-GPU simulated fleet moved from op-baseline to op-aggressive (so every GPU
    has a previous profile to roll back to); everything is stopped afterwards."""
    made = write_profiles(tmp_path / "profiles", [0, 1, 2])
    monkeypatch.setenv(paths.PROFILES_ENV, str(made.profiles_dir))
    with cleaned(isolated_state, made.ports):
        ops = FleetOps(made.baseline, options=OpsOptions(apply=FAST))
        up = asyncio.run(ops.start(made.baseline))
        assert all(why is None for why in up.values()), up
        assert wait_until(lambda: all(healthy(p) for p in made.ports), 30)
        moved = asyncio.run(ops.apply("op-aggressive", (0, 1, 2)))
        assert moved.ok, moved.reports
        yield made


async def test_rollback_of_one_marked_gpu_of_three_leaves_the_others(three: OpFleet) -> None:
    # The walk's fleet verdict is not what this test is about: nothing sampled.
    walk = RolloutOptions(apply=FAST, measure_cost=False)
    options = OpsOptions(apply=FAST, stop=StopTimeouts(drain_s=10.0, release_s=20.0), rollout=walk)
    monitor = FleetMonitor(spec_for_profile(three.baseline), SimulatedSource(paths.sim_gpu_dir()))
    app = FleetApp(
        LocalFleet(FleetOps(three.baseline, options=options), monitor), poll_interval_s=0.5
    )
    before = {g: r.pid for g, r in read_records().items()}
    try:
        async with app.run_test(size=(160, 50)) as pilot:
            await wait_for(pilot, lambda: len(app.main_screen.fleet.panels) == 3, "3 panels", 20)
            await pilot.press("1", "space")
            await press_until(pilot, ("b",), ConfirmScreen)
            confirm = app.screen
            assert isinstance(confirm, ConfirmScreen)
            assert confirm.title_text == "Roll back GPU 1 to op-baseline?"
            assert confirm.affected.startswith("Scope: GPU 1\n")
            await pilot.press("y")
            await wait_for(pilot, lambda: isinstance(app.screen, RolloutScreen), "the report")
            report = app.screen
            assert isinstance(report, RolloutScreen) and report.rollback
            await wait_for(pilot, lambda: report.finished, "the rollback's end", 60)
            assert report.error is None, report.error
            result = report.result
            assert result is not None and result.ok and result.done == (1,)
    finally:
        await monitor.aclose()
    after = {g: r.pid for g, r in read_records().items()}
    assert after[1] != before[1] and not pid_alive(before[1])
    assert after[0] == before[0] and after[2] == before[2]
    running = read_running()
    assert running[1].current_name == "op-baseline"
    assert running[0].current_name == running[2].current_name == "op-aggressive"


def test_the_canary_confirm_says_a_worse_candidate_is_rolled_back_on_many_nodes() -> None:
    title, detail = canary_question("alt", 0, (0, 1, 100, 101), rolls_back_worse=True)
    assert title == "Try profile alt on GPU 0; GPUs 1,100-101 stay as control"
    assert detail.endswith("a worse one (or no verdict) is rolled back at once.")
    assert canary_question("alt", 0, (0, 1))[1].endswith("GPU 0 keeps alt afterwards.")

"""The operations core on a real simulated fleet, through the console's port: kill, relaunch,
apply with typed events, rollback, stop."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from fleet_helpers import MarksOnly
from operator_helpers import (
    BASELINE,
    OpFleet,
    cleaned,
    healthy,
    leftovers,
    pid_alive,
    profile_text,
    write_profiles,
)
from sim_helpers import wait_until

from tui import paths
from tui.control.stop_release import StopTimeouts
from tui.gpu.sim_records import live_processes
from tui.ops.commands import Apply, Kill, Relaunch, Rollback, SaveProfile, StopFleet
from tui.ops.events import OperationFinished, OperationStarted, OpEvent
from tui.ops.journal import read_journal
from tui.ops.local import LocalFleet
from tui.ops.marks import JournalMarks
from tui.ops.service import FleetOps, OperationError, OpsOptions
from tui.retune.events import ApplyFinished, GpuPhase, GpuReady
from tui.retune.options import ApplyOptions
from tui.rollout.rollout import RolloutOptions
from tui.state.fleet_state import ProcessRecord, put_record, read_records, read_running

GPUS = [0, 1]
FAST = ApplyOptions(timeout_s=60.0, release_timeout_s=20.0, poll_s=0.1, measure=False)


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
        assert wait_until(lambda: all(healthy(p) for p in made.ports), 30)
        yield made


def operator(fleet: OpFleet, marks: MarksOnly | None = None) -> LocalFleet:
    walk = RolloutOptions(apply=FAST, measure_cost=False)  # the rollback's walk: no verdict
    stop = StopTimeouts(drain_s=10.0, release_s=20.0)
    options = OpsOptions(apply=FAST, stop=stop, settle_s=0.2, rollout=walk)
    return LocalFleet(FleetOps(fleet.baseline, options=options, by="console"), marks)


async def test_kill_stops_one_gpu_and_waits_for_its_memory(fleet: OpFleet) -> None:
    marks = MarksOnly()
    before = read_records()
    await operator(fleet, marks).run(Kill((0,)))
    # Marked stopping first; the mark withdrawn once the stop ended (the process is gone by
    # then: the panel says STOPPED at the next poll), whatever the stop did (issue 35).
    assert marks.seen[0] == (0, True) and marks.seen[-1] == (0, False)
    assert not pid_alive(before[0].pid)
    assert live_processes(paths.sim_gpu_dir(), 0) == []  # the GPU's memory is released
    assert 0 not in read_records()
    assert pid_alive(before[1].pid) and healthy(fleet.ports[1])  # the other GPU is untouched


async def test_relaunch_starts_the_current_profile_again(fleet: OpFleet) -> None:
    old = read_records()[1]
    await operator(fleet).run(Relaunch((1,)))
    new = read_records()[1]
    assert new.pid != old.pid and not pid_alive(old.pid)
    assert new.profile == "op-baseline" and new.port == fleet.ports[1]
    assert wait_until(lambda: healthy(fleet.ports[1]), 30)
    assert read_running()[1].current_name == "op-baseline"


async def test_stop_refuses_a_pid_that_is_not_ours(fleet: OpFleet) -> None:
    real = read_records()[0]
    # The very process recorded (same start ticks) under another launch id: the record does not
    # describe it, and what it describes may still run. Refused, record kept.
    fake = ProcessRecord(
        **{**real.to_json(), "cmdline": tuple(real.cmdline), "launch_id": "0" * 32}
    )
    put_record(ProcessRecord.from_json(fake.to_json()))
    marks = MarksOnly()
    with pytest.raises(
        OperationError, match=r"refused on GPU 0: refusing to signal .*its launch id differs"
    ):
        await operator(fleet, marks).run(Kill((0,)))
    assert pid_alive(real.pid)  # nothing was signalled
    assert marks.seen[-1] == (0, False)  # the STOPPING mark is withdrawn
    assert read_records()[0].launch_id == fake.launch_id  # the record is kept for the operator
    put_record(real)


async def test_apply_forwards_events_journals_and_rolls_back(fleet: OpFleet) -> None:
    op = operator(fleet)
    assert op.current_profile() == "op-baseline"
    assert {"op-baseline", "op-aggressive"} <= set(op.profile_names())
    predicted = await op.preflight(op.load_profile("op-aggressive"), (0, 1))
    assert [p.calibrated for p in predicted] == [True, True]
    events: list[OpEvent] = []

    result = await op.run(Apply("op-aggressive", (0, 1)), events.append)

    assert result.ok, result.reports
    assert isinstance(events[0], OperationStarted) and events[0].gpus == (0, 1)
    assert isinstance(events[-1], OperationFinished) and events[-1].ok
    finished = [e for e in events if isinstance(e, ApplyFinished)]
    assert len(finished) == 1 and finished[0].result == result
    assert {e.gpu for e in events if isinstance(e, GpuReady)} == {0, 1}
    phases = [e.phase for e in events if isinstance(e, GpuPhase) and e.gpu == 0]
    assert phases and phases[-1] == "ready"
    for report, guess in zip(result.reports, predicted, strict=True):
        assert report.effective.kv_tokens == pytest.approx(guess.kv_tokens, rel=0.01)
    assert {r.profile for r in read_records().values()} == {"op-aggressive"}
    assert op.current_profile() == "op-aggressive"
    last = read_journal().entries[-1]
    assert (last.type, last.source, last.target) == ("apply", "op-baseline", "op-aggressive")
    assert last.by == "console" and last.gpus == (0, 1)
    applies = [e for e in read_journal().entries if e.type == "apply"]
    assert [e.started_at for e in applies] == [pytest.approx(result.started_at)]

    # A guarded rollback (a cross-node canary's) refuses when the GPUs no longer run what it
    # expects, and stops nothing.
    running = {g: r.pid for g, r in read_records().items()}
    with pytest.raises(OperationError, match="GPU 0 runs op-aggressive now, not op-baseline"):
        await op.ops.rollback((0, 1), expect="op-baseline")
    assert {g: r.pid for g, r in read_records().items()} == running
    back = await op.run(Rollback())
    assert back.ok and back.rollback and [s.gpus for s in back.steps] == [(1,), (0,)]
    assert {p for s in back.steps for p in s.profiles.values()} == {"op-baseline"}
    assert {r.profile for r in read_records().values()} == {"op-baseline"}
    assert read_journal().entries[-1].type == "rollback"
    # the start, the apply and the rollback's two GPUs (its summary changed no server)
    assert len(JournalMarks()()) == 4


async def test_a_profile_applied_itself_is_written_nowhere_and_still_reads_back(
    fleet: OpFleet,
) -> None:
    """The tuning form's Apply carries the profile itself (issue 37): no file is written to be
    applied, and the form opened again reads it back from what the GPUs run."""
    from dataclasses import replace

    op = operator(fleet)
    edited = replace(op.load_profile("op-aggressive"), name="op-edited")
    result = await op.run(Apply(edited, (0, 1)))
    assert result.ok, result.reports
    assert not (fleet.profiles_dir / "op-edited.toml").exists()
    assert "op-edited" not in op.profile_names()
    assert op.current_profile() == "op-edited"
    assert op.load_profile("op-edited").server == edited.server  # from the fleet state
    with pytest.raises(Exception, match="no-never-run"):
        op.load_profile("no-never-run")


async def test_apply_of_an_unknown_profile_stops_nothing(fleet: OpFleet) -> None:
    before = read_records()
    with pytest.raises(Exception, match="no-such-profile"):
        await operator(fleet).run(Apply("no-such-profile", (0, 1)))
    assert all(pid_alive(r.pid) for r in before.values())


async def test_save_profile_writes_a_loadable_file(fleet: OpFleet) -> None:
    op = operator(fleet)
    from dataclasses import replace

    saved = await op.run(SaveProfile(replace(op.load_profile("op-aggressive"), name="op-saved")))
    path = Path(saved.paths[0])
    assert path == fleet.profiles_dir / "op-saved.toml"
    assert op.load_profile("op-saved").server == op.load_profile("op-aggressive").server


async def test_stop_fleet_leaves_nothing_running(fleet: OpFleet, isolated_state: Path) -> None:
    pids = [r.pid for r in read_records().values()]
    await operator(fleet).run(StopFleet())
    assert read_records() == {}
    assert not any(pid_alive(p) for p in pids)
    assert leftovers(isolated_state, fleet.ports) == []
    assert all(live_processes(paths.sim_gpu_dir(), g) == [] for g in GPUS)


async def test_a_server_that_exits_on_its_arguments_gets_its_previous_profile_back(
    fleet: OpFleet,
) -> None:
    """A launch SGLang's parser accepts but the server still refuses (here the simulator's own
    range, as an installed SGLang that differs from the table would): the report carries the
    server's own error line, and the GPU runs its previous profile again."""
    text = profile_text("op-bad-args", GPUS, fleet.ports, BASELINE) + "page_size = 8192\n"
    (fleet.profiles_dir / "op-bad-args.toml").write_text(text)
    before = read_records()

    result = await operator(fleet).run(Apply("op-bad-args", (0,)))

    assert not result.ok
    (report,) = result.reports
    assert report.error_reason == "bad_arguments"
    assert (
        report.error_line is not None and "--page-size: 8192 is out of range" in report.error_line
    )
    after = read_records()
    assert after[0].profile == "op-baseline" and after[0].pid != before[0].pid
    assert wait_until(lambda: healthy(fleet.ports[0]), 30)
    assert after[1].pid == before[1].pid  # the other GPU was never touched
    last = read_journal().entries[-1]
    assert last.type == "apply" and last.target == "op-bad-args" and last.failed == (0,)
    assert list(last.detail["restored"]) == [0] and "restored the previous profile" in last.summary

"""Operations on servers the fleet state records nothing of say what happened (issue 35, point
2). Real processes: two simulated servers started by a script of the test's own, a hand-made
profile of them (as the issue's operator wrote one), never adopted.

- ``k`` from that profile's console: refused, naming the pid (it used to say 'done: no server
  recorded' and 'Done' while the server kept answering); stopped only when confirmed, its pid
  alone; the panel's STOPPING mark withdrawn when the stop ended, either way.
- ``gpufleet apply`` of that profile: refused before anything stops, naming each port, pid
  and command line, pointing to ``gpufleet adopt``; exit 2 (it printed '0 of 2 GPUs ready' and
  exit 1 while both servers were untouched and serving).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from control_helpers import running
from fleet_helpers import MarksOnly

from bench.operator_fleet import OperatorFleet, answers, operator_fleet, sim_server
from bench.ports import free_ports
from bench.simfleet import FAST_APPLY, kill_strays, stop_all
from tui import paths
from tui.control.adopt import ConfirmedServer
from tui.control.stop_release import StopTimeouts
from tui.ops.adoption import AdoptRequest, plan_adoption
from tui.ops.cli import apply as apply_cli
from tui.ops.commands import Adopt, Kill, Kind
from tui.ops.journal import read_journal
from tui.ops.local import LocalFleet
from tui.ops.port import Refused
from tui.ops.service import FleetOps, OperationError, OpsOptions
from tui.profiles import Profile, save_profile
from tui.servers.procinfo import start_ticks
from tui.state.fleet_state import read_fleet, read_records
from tui.ui.describe import stop_words

FLAGS = ["--mem-fraction-static", "0.88", "--max-mamba-cache-size", "80", "--enable-metrics"]


@pytest.fixture()
def script_fleet(tmp_path: Path) -> Iterator[tuple[OperatorFleet, Profile]]:
    """Two servers the operator's script started, and the profile the operator wrote of them
    (saved, never adopted: the fleet state records nothing)."""
    ports = free_ports(2)
    servers = [sim_server(g, p, tmp_path / "logs", FLAGS, 40.0) for g, p in enumerate(ports)]
    try:
        with operator_fleet(servers) as fleet:
            request = AdoptRequest(tuple(ports), "hand-written")
            profile = plan_adoption(request).profile
            save_profile(profile, paths.user_profiles_dir() / "hand-written.toml")
            assert not paths.fleet_state_file().exists()
            yield fleet, profile
    finally:
        stop_all()
        kill_strays(ports)


def test_k_on_an_unrecorded_server_is_refused_by_name_then_stopped_only_when_confirmed(
    script_fleet: tuple[OperatorFleet, Profile],
) -> None:
    fleet, profile = script_fleet
    pid, url = fleet.pids[0], fleet.urls[0]
    marks = MarksOnly()
    options = OpsOptions(stop=StopTimeouts(drain_s=10, kill_s=5, release_s=10))
    backend = LocalFleet(FleetOps(profile, options=options, by="console"), marks)
    with pytest.raises(OperationError) as refused:
        asyncio.run(backend.run(Kill((0,))))
    said = str(refused.value)
    assert said.startswith(f"refused on GPU 0: GPU 0: port {fleet.ports[0]} is held by pid {pid} (")
    assert "which is not verified as the fleet's" in said and "nothing was signalled" in said
    assert running(pid) and answers(url)
    assert marks.seen == [(0, True), (0, False)]  # the panel leaves STOPPING: the stop ended
    entry = read_journal().entries[-1]
    assert entry.type == "kill" and not entry.ok and "done" not in entry.summary.split()

    ticks = start_ticks(pid)
    assert ticks is not None
    confirmed = ConfirmedServer(0, pid, ticks, " ".join(fleet.servers[0].argv))
    outcomes = asyncio.run(backend.run(Kill((0,), "drain", (confirmed,))))
    assert [o.status for o in outcomes] == ["done"]
    assert f"GPU 0 (pid {pid}): drained and exited after SIGTERM to its main pid" in (
        outcomes[0].message
    )
    assert "stopped as confirmed: its pid only, never its group" in outcomes[0].message
    assert not running(pid)
    assert running(fleet.pids[1]) and answers(fleet.urls[1])  # the same script's other server
    assert marks.seen[-1] == (0, False)


def test_apply_on_ports_held_by_unadopted_servers_is_refused_before_anything_stops(
    script_fleet: tuple[OperatorFleet, Profile],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    fleet, _ = script_fleet
    code = apply_cli.main(["hand-written", *FAST_APPLY])
    out, err = capsys.readouterr()
    assert code == 2, out + err
    lines = err.strip().splitlines()
    a, b = fleet.ports
    tail = "a server gpufleet did not launch and has not adopted: nothing was stopped"
    for gpu, (port, pid) in enumerate(zip(fleet.ports, fleet.pids, strict=True)):
        head = f"gpufleet apply: refused: GPU {gpu}: port {port} is held by pid {pid} ("
        named = [line for line in lines if line.startswith(head)]
        assert len(named) == 1 and "-m tui sim" in named[0] and named[0].endswith(tail), err
    pairs = sorted(((a, "0"), (b, "1")))  # in port order, each port with its own GPU
    ports, gpus = ",".join(str(p) for p, _ in pairs), ",".join(g for _, g in pairs)
    assert lines[-1] == (
        f"gpufleet apply: refused: take them over first, signalling nothing: gpufleet adopt "
        f"--ports {ports} --gpus {gpus} --name NAME (see docs/operating-a-running-fleet.md); or "
        "stop them yourself"
    )
    assert "GPUs ready" not in out and "READY" not in out and "FAILED" not in out
    assert all(running(pid) for pid in fleet.pids) and all(answers(u) for u in fleet.urls)
    entry = read_journal().entries[-1]
    assert entry.type == "apply" and not entry.ok and entry.refused
    assert all(state.server is None for state in read_fleet().values())


def test_a_confirmed_relaunch_replaces_an_unrecorded_server_with_the_profile_s(
    script_fleet: tuple[OperatorFleet, Profile],
) -> None:
    """`r` on such a server, confirmed: its pid alone is stopped, the profile's server is
    launched on its port and recorded; the script's other server is untouched."""
    fleet, profile = script_fleet
    pid = fleet.pids[1]
    ticks = start_ticks(pid)
    assert ticks is not None
    options = OpsOptions(stop=StopTimeouts(drain_s=10, kill_s=5, release_s=10))
    ops = FleetOps(profile, options=options, by="console")
    confirmed = {1: ConfirmedServer(1, pid, ticks, " ".join(fleet.servers[1].argv))}
    (result,) = asyncio.run(ops.relaunch([1], confirmed=confirmed))
    assert result.ok, result.reports
    record = read_fleet()[1].server
    assert record is not None and record.pid != pid and record.launch_id
    assert record.port == fleet.ports[1] and answers(fleet.urls[1])
    assert not running(pid)
    assert running(fleet.pids[0])


def test_the_watching_console_s_backend_adopts_then_operates_them(
    script_fleet: tuple[OperatorFleet, Profile],
) -> None:
    """`gpufleet console --ports ...`: it only watches (k is off) until `A` adopts the servers;
    then its k drains an adopted server through its main pid."""
    fleet, _ = script_fleet
    marks = MarksOnly()
    options = OpsOptions(stop=StopTimeouts(drain_s=10, kill_s=5, release_s=10))
    backend = LocalFleet(FleetOps(options=options, by="console"), marks, watching=True)
    caps = backend.capabilities()
    assert Kind.ADOPT in caps and Kind.KILL not in caps
    with pytest.raises(Refused, match="only watches ports until their servers are adopted"):
        asyncio.run(backend.run(Kill((0,))))
    plan = asyncio.run(backend.plan_adoption(tuple(fleet.ports), (0, 1), "watched"))
    asyncio.run(backend.run(Adopt(plan)))
    assert Kind.KILL in backend.capabilities() and Kind.RELAUNCH in backend.capabilities()
    assert {g: r.pid for g, r in read_records().items()} == {0: fleet.pids[0], 1: fleet.pids[1]}
    outcomes = asyncio.run(backend.run(Kill((0,))))
    assert stop_words(outcomes, "")[0] == "Stopped"
    assert "drained and exited after SIGTERM to its main pid" in outcomes[0].message
    assert not running(fleet.pids[0]) and running(fleet.pids[1])

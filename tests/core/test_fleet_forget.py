"""``gpufleet fleet forget GPU``: a GPU once in the fleet state can leave it (issue 36).

The red team found no way out: a GPU of the fleet state whose server is gone for good keeps
``gpufleet status`` at exit 1 for ever. ``forget`` removes it (status then judges the GPUs that
remain), refuses in one line while a verified server of the fleet runs there (the server keeps
running, the state keeps the GPU), and refuses a GPU the state does not hold. Real simulated
servers, real processes.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from operator_helpers import cleaned, gpufleet_status, pid_alive, write_profiles

from tui import paths
from tui.ops.cli import fleet as fleet_cli
from tui.ops.cli import sim_fleet as sim_fleet_cli
from tui.ops.journal import read_journal
from tui.state.fleet_state import read_fleet, read_records

pytestmark = [pytest.mark.timeout(150)]


@pytest.fixture
def two_gpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """GPUs 0 and 1 running op-baseline (simulated), stopped and cleaned up afterwards."""
    fleet = write_profiles(tmp_path / "profiles", [0, 1])
    monkeypatch.setenv(paths.PROFILES_ENV, str(fleet.profiles_dir))
    with cleaned(paths.state_dir(), fleet.ports):
        assert sim_fleet_cli.main(["start", "--profile", "op-baseline", "--wait", "60"]) == 0
        yield fleet.ports


def test_a_gone_gpu_is_forgotten_and_status_judges_the_rest(
    two_gpus: list[int], capsys: pytest.CaptureFixture[str]
) -> None:
    assert sim_fleet_cli.main(["stop", "--gpus", "1", "--mode", "kill"]) == 0
    assert gpufleet_status().returncode == 1  # GPU 1 is down, for ever until forgotten
    capsys.readouterr()

    assert fleet_cli.main(["forget", "1"]) == 0
    out = capsys.readouterr().out
    assert out.strip() == f"forgot GPU 1: removed from {paths.fleet_state_file()}"
    assert sorted(read_fleet()) == [0]
    done = gpufleet_status()
    assert done.returncode == 0, done.stdout + done.stderr
    last = read_journal().entries[-1]
    assert (last.type, last.gpus, last.ok) == ("forget", (1,), True)


def test_forgetting_a_gpu_whose_server_runs_is_refused_in_one_line(
    two_gpus: list[int], capsys: pytest.CaptureFixture[str]
) -> None:
    server = read_records()[0]
    assert fleet_cli.main(["forget", "0,1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0, err
    assert f"GPU 0: the fleet's server pid {server.pid} on port {server.port} runs" in err
    assert "stop it first" in err and "nothing was forgotten" in err
    assert pid_alive(server.pid) and sorted(read_fleet()) == [0, 1]

    assert fleet_cli.main(["forget", "7"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "gpufleet fleet: GPU 7: not in the fleet state (its GPUs: 0,1)", err

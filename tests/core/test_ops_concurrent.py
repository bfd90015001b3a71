"""Two operations at once on one fleet: one runs, the other is refused before it stops anything,
nothing runs outside the fleet state, and ``sim-fleet stop`` stops everything that runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from rollout_helpers import sim_fleet

from bench.simfleet import FAST_APPLY, ROOT, sims_on_ports
from tui.ops.journal import read_journal
from tui.state.fleet_state import read_records


def _apply(profile: Path) -> subprocess.Popen[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return subprocess.Popen(
        [sys.executable, "-m", "tui", "apply", str(profile), *FAST_APPLY],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_a_second_apply_is_refused_and_nothing_is_orphaned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUFLEET_STATE_DIR", str(tmp_path / "state"))
    with sim_fleet(tmp_path, 2, 40.0) as fleet:
        first, second = _apply(fleet.files["aggressive"]), _apply(fleet.files["worse"])
        outs = [p.communicate(timeout=120) for p in (first, second)]
        codes = sorted([first.returncode, second.returncode])
        assert codes == [0, 2], outs
        refused = outs[0][1] if first.returncode == 2 else outs[1][1]
        assert "is changing the fleet" in refused and refused.count("\n") == 1, refused
        winner = "t-aggressive" if first.returncode == 0 else "t-worse"
        records = read_records()
        assert {r.profile for r in records.values()} == {winner}
        # Every simulated server on the fleet's ports is one the fleet state knows.
        recorded = {r.pid for r in records.values()}
        running = {p.pid for p in sims_on_ports(fleet.ports)}
        assert running == recorded, (running, recorded)
        applies = [e for e in read_journal().entries if e.type == "apply"]
        assert [e.ok for e in applies if not e.refused] == [True, True]  # baseline, winner
        (refusal,) = [e for e in applies if e.refused]
        assert "is changing the fleet" in refusal.refused[0]

        stop = subprocess.run(
            [sys.executable, "-m", "tui", "sim-fleet", "stop"],
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert stop.returncode == 0, stop.stdout + stop.stderr
        assert list(sims_on_ports(fleet.ports)) == []
        assert read_records() == {}

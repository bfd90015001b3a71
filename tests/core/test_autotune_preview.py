"""The preflight's verdict of a search space before it starts (what the console's form shows as
the operator types): every value of every knob predicted as a move from the running profile on
the canary GPU, counted and named when it will not fit (no servers: the fleet state is written
as a running fleet records it, and the preview only reads)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from bench.simfleet import BASELINE, sim_profile_text
from tui.autotune.options import SearchRefused
from tui.autotune.preview import RangePreview
from tui.autotune.space import SearchSpace
from tui.profiles import profile_from_dict
from tui.state.fleet_state import (
    FleetState,
    GpuState,
    ProcessRecord,
    record_outcome,
    update_fleet,
)


def seed_fleet(tmp_path: Path, gpus: tuple[int, ...] = (0, 1)) -> None:
    """The fleet state of ``gpus`` running one sim profile (records only: nothing runs)."""
    ports = [41000 + g for g in gpus]
    text = sim_profile_text("t-baseline", list(gpus), ports, str(tmp_path), BASELINE, 10.0)
    profile = profile_from_dict(tomllib.loads(text), "t-baseline")

    def change(state: FleetState) -> FleetState:
        for g, port in zip(gpus, ports, strict=True):
            log = str(tmp_path / f"gpu{g}.log")
            record = ProcessRecord(g, port, 999_999, 999_999, 1.0, ("sim",), log, "t-baseline")
            state[g] = GpuState(g, port, server=record)
        return state

    update_fleet(change)
    record_outcome(profile, gpus, [])


def test_the_preview_counts_and_names_the_moves_that_will_not_fit(tmp_path: Path) -> None:
    seed_fleet(tmp_path)
    space = SearchSpace(
        (
            ("mem_fraction_static", (0.3, 0.84, 0.88, 0.93, 0.98)),
            ("max_running_requests", (16, 32)),
        )
    )
    preview = RangePreview()
    verdict = preview.verdict(space)
    # 0.88 is the running value: not a move; 0.3 leaves no KV room, 0.98 runs out of memory
    assert (verdict.gpu, verdict.incumbent, verdict.moves) == (0, "t-baseline", 6)
    assert [r.split(":")[0] for r in verdict.rejected] == [
        "mem_fraction_static=0.3",
        "mem_fraction_static=0.98",
    ]
    line = verdict.describe()
    assert line.startswith(
        "Preflight on GPU 0: 2 of 6 single-knob moves from t-baseline predicted not to fit "
        "(never launched): mem_fraction_static=0.3: does not fit"
    )
    assert "\n" not in line
    fits = preview.verdict(SearchSpace((("max_running_requests", (16, 24)),)))
    assert fits.describe().endswith("2 single-knob moves from t-baseline predicted not to fit.")
    assert fits.rejected == ()


def test_a_fleet_that_cannot_be_searched_is_said_so(tmp_path: Path) -> None:
    seed_fleet(tmp_path, (0,))
    with pytest.raises(SearchRefused, match="at least 2 running GPUs"):
        RangePreview().verdict(SearchSpace.default())

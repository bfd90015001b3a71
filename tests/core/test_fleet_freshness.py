"""The age of every number: dim and blank bounds, the throughput's decay without a Decode line,
and which profile each GPU runs (with the knobs that differ from the fleet's)."""

from __future__ import annotations

import time
import tomllib
from dataclasses import replace

import pytest

from bench.simfleet import AGGRESSIVE, BASELINE, sim_profile_text
from tui.fleet.freshness import (
    BLANK_AFTER_S,
    DIM_AFTER_S,
    THROUGHPUT_HOLD_S,
    THROUGHPUT_ZERO_S,
    Freshness,
    decayed_throughput,
    freshness,
)
from tui.fleet.running_profiles import running_profiles
from tui.fleet.server_log import EMPTY_VIEW
from tui.fleet.spec import ServerSpec
from tui.fleet.tracker import Tracker, note_decode
from tui.logs.state import LogView
from tui.profiles import profile_from_dict, profile_to_dict
from tui.servers.payloads import ServerLoad
from tui.state.fleet_state import GpuState


def test_bounds() -> None:
    assert freshness(None) is Freshness.LIVE
    assert freshness(DIM_AFTER_S) is Freshness.LIVE
    assert freshness(DIM_AFTER_S + 0.1) is Freshness.DIM
    assert freshness(BLANK_AFTER_S) is Freshness.DIM
    assert freshness(BLANK_AFTER_S + 0.1) is Freshness.BLANK


def test_throughput_holds_then_decays_to_zero() -> None:
    assert decayed_throughput(6190.0, None) == 6190.0
    assert decayed_throughput(6190.0, THROUGHPUT_HOLD_S) == 6190.0
    middle = (THROUGHPUT_HOLD_S + THROUGHPUT_ZERO_S) / 2
    assert decayed_throughput(6190.0, middle) == pytest.approx(3095.0)
    assert decayed_throughput(6190.0, THROUGHPUT_ZERO_S) == 0.0
    assert decayed_throughput(6190.0, 180.0) == 0.0
    assert decayed_throughput(None, 180.0) is None


def _view(decode_lines: int, stamp: str | None) -> LogView:
    return replace(EMPTY_VIEW, decode_lines=decode_lines, decode_stamp=stamp)


def test_decode_age_counts_from_the_last_new_line() -> None:
    tracker = Tracker(ServerSpec(0, 40000), probe=None)  # type: ignore[arg-type]  # never probed
    assert note_decode(tracker, 100.0) is None  # no Decode line yet
    tracker.log = _view(3, None)
    tracker.load = ServerLoad(gen_throughput=6190.0)
    assert note_decode(tracker, 101.0) == 0.0
    assert note_decode(tracker, 111.0) == 10.0  # nothing new: it ages
    tracker.log = _view(4, None)
    assert note_decode(tracker, 112.0) == 0.0


def test_first_look_dates_the_line_from_its_log_stamp() -> None:
    tracker = Tracker(ServerSpec(0, 40000), probe=None)  # type: ignore[arg-type]  # never probed
    now = time.time()
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now - 180))
    tracker.log = _view(40, stamp)
    age = note_decode(tracker, now)
    assert age is not None and 179 <= age <= 182


def _state(gpus: list[int], name: str, server: str, on: list[int]) -> dict[int, GpuState]:
    text = sim_profile_text(name, gpus, [40000 + g for g in gpus], "/tmp/l", server, 10.0)
    doc = profile_to_dict(profile_from_dict(tomllib.loads(text), name))
    return {g: GpuState(g, 40000 + g, current=doc) for g in on}


def test_each_gpu_names_its_profile_and_what_differs_from_the_fleets() -> None:
    gpus = [0, 1, 2]
    state = {
        **_state(gpus, "base", BASELINE, [0, 1]),
        **_state(gpus, "aggr", AGGRESSIVE, [2]),
    }
    running = running_profiles(state)
    assert running[0].label() == "base" and running[0].differs == ()
    assert running[0].asked_value("max_running_requests") == "auto"
    assert running[2].asked_value("max_running_requests") == "64"
    assert running[2].label() == "aggr (mrr 64, mamba 200, mfs 0.93, mfr 0.6)"


def test_a_gpu_without_a_current_profile_names_none() -> None:
    state = {0: GpuState(0, 40000, current=None)}
    assert running_profiles(state) == {}

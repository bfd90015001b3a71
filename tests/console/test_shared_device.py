"""Slots that share one physical GPU (issue 35 on a one-GPU machine): the record says which
device a slot's server runs on, the release wait is for the stopped server's own pids on that
device (real stand-in processes), and both slots' panels read the shared card and say so."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

from control_helpers import parent_argv, read_pids, reaper
from ui_helpers import gpu, ready_server, settled_app

from tui.control import ManagedProcess, launch, stop_and_release
from tui.control.stop_release import StopTimeouts
from tui.fleet.panels import join_panels
from tui.fleet.snapshot import FleetSnapshot, GpuPanel
from tui.gpu.snapshot import GpuProcess
from tui.ops.fit import fit_to_fleet
from tui.paths import fleet_state_file
from tui.profiles import Profile, flags_for, profile_from_dict
from tui.retune.preflight import crowded, predict_walk, preflight
from tui.retune.sharing import Readings
from tui.sglang.models import GIB
from tui.state.fleet_state import GpuState, read_fleet
from tui.ui.grid.gpu_panel import GpuPanelView


def _stand_in(folder: Path, gpu: int, device: int | None = None) -> ManagedProcess:
    """A server stand-in launched on slot ``gpu`` (port ``gpu + 1``), on ``device``."""
    pids, log = folder / f"pids-{gpu}", folder / f"gpu{gpu}.log"
    env = dict(os.environ)
    return launch(parent_argv("term", pids), env, log, gpu=gpu, port=gpu + 1, device=device)


def test_a_slot_s_device_is_recorded_and_its_stop_waits_on_that_device(tmp_path: Path) -> None:
    with reaper() as groups:
        first = _stand_in(tmp_path, 0)
        second = _stand_in(tmp_path, 1, device=0)
        groups += [first.record.pgid, second.record.pgid]
        _, scheduler_a = read_pids(tmp_path / "pids-0")
        _, scheduler_b = read_pids(tmp_path / "pids-1")
        state = read_fleet()
        assert (state[0].device, state[0].device_index) == (None, 0)
        assert (state[1].device, state[1].server and state[1].server.device) == (0, 0)
        stored = json.loads(fleet_state_file().read_text())["gpus"]
        assert stored["1"]["device"] == 0 and stored["1"]["server"]["device"] == 0
        assert "device" not in stored["0"] and "device" not in stored["0"]["server"]

        # The driver still lists GPU 1's scheduler on device 0 after the stop (a slow CUDA
        # teardown) and GPU 0's, which keeps serving: the wait names the stopped one's alone.
        def device_pids(device: int) -> set[int]:
            return {scheduler_a, scheduler_b} if device == 0 else set()

        limits = StopTimeouts(drain_s=10, kill_s=5, release_s=0.5)
        stopped = stop_and_release(1, second.record, device_pids, timeouts=limits)
        assert stopped.status == "failed" and stopped.holding == (scheduler_b,)
        assert f"GPU memory still held by [{scheduler_b}]" in stopped.message
        first.popen.poll()
        assert first.popen.returncode is None  # the neighbour was never signalled


def test_two_slots_on_one_card_both_read_it_and_a_card_no_slot_runs_on_shows_alone() -> None:
    readings = [gpu(i) for i in range(4)]
    servers = {0: ready_server(0), 1: ready_server(1)}
    panels = join_panels([0, 1], {0: 0, 1: 0}, servers, readings, True, "no reading")
    assert [(p.gpu_index, p.gpu and p.gpu.index, p.device) for p in panels] == [
        (0, 0, None),
        (1, 0, 0),
        (2, 2, None),
        (3, 3, None),
    ]
    panels = join_panels([0, 1], {0: 3, 1: 3}, servers, readings[:2], False, "no reading")
    assert [(p.gpu, p.device, p.gpu_note) for p in panels] == [
        (None, 3, "no reading"),
        (None, 3, "no reading"),
    ]


async def test_the_panel_says_which_card_a_slot_shares() -> None:
    fleet = FleetSnapshot(
        panels=(
            GpuPanel(0, gpu(0), ready_server(0)),
            GpuPanel(1, gpu(0), ready_server(1), device=0),
        )
    )
    async with settled_app(fleet) as (app, _):
        titles = {v.gpu_index: str(v.border_title) for v in app.main_screen.query(GpuPanelView)}
    assert titles == {0: "GPU 0 · NVIDIA H200", 1: "GPU 1 · on device 0 · NVIDIA H200"}


def test_a_profile_is_fitted_to_the_card_each_slot_runs_on() -> None:
    """The card is the fleet's layout, as its ports are: a profile written for one server per
    card does not move a slot that shares card 0 onto card 1."""
    doc = {
        "engine": {"kind": "sim", "sim_gpu": "h100"},
        "fleet": {"gpus": [0, 1], "ports": [31000, 31001]},
        "server": {"mem_fraction_static": 0.3},
        "gpu": {"1": {"mem_fraction_static": 0.6}},
    }
    plain = profile_from_dict(doc, "plain")
    assert fit_to_fleet(plain, {}) == plain  # nothing recorded: the profile's own layout
    state = {
        0: GpuState(0, port=30000),
        1: GpuState(1, port=30001, device=0),
    }
    fitted = fit_to_fleet(plain, state)
    assert (fitted.device_for(0), fitted.device_for(1)) == (0, 0)
    assert fitted.ports == (30000, 30001) and fitted.neighbours_of(0) == (1,)
    assert flags_for(fitted, 1).mem_fraction_static == 0.6  # its override kept beside the card
    back = fit_to_fleet(fitted, {0: GpuState(0, port=30000), 1: GpuState(1, port=30001)})
    assert back.device_for(1) == 1 and back.override_for(1) is not None


def _shared_profile(fraction: float) -> Profile:
    return profile_from_dict(
        {
            "engine": {"kind": "sim", "sim_gpu": "h100", "sim_model": "llama-8b"},
            "fleet": {"gpus": [0, 1], "ports": [31000, 31001]},
            "server": {"mem_fraction_static": fraction},
            "gpu": {"1": {"device": 0}},
        },
        "shared",
    )


def test_a_relaunch_that_would_not_fit_beside_its_neighbour_is_refused(tmp_path: Path) -> None:
    """GPU 0 planned beside GPU 1's server as the driver reads it: 40 GB held leaves an 8B
    model no room at 0.30 (refused, naming both, before anything stops); 10 GB does."""
    with reaper() as groups:
        neighbour = _stand_in(tmp_path, 1, device=0)
        groups.append(neighbour.record.pgid)
        _, scheduler = read_pids(tmp_path / "pids-1")

        def holding(gib: float) -> Readings:
            used = int(gib * GIB)
            card = replace(gpu(0), processes=(GpuProcess(scheduler, used, "python3"),))
            return lambda: [card, gpu(1)]

        profile = _shared_profile(0.30)
        refused = crowded(profile, [0], lambda g: None, holding(40))
        assert len(refused) == 1 and refused[0].startswith("GPU 0: does not fit: "), refused
        assert refused[0].endswith(
            "; on device 0 beside GPU 1 (40.0 GB, the driver's reading): subtracted from the "
            "free memory it finds: nothing was stopped"
        )
        assert crowded(profile, [0], lambda g: None, holding(10)) == []
        # Walked: GPU 1 is planned beside GPU 0's predicted new server, not what it held.
        walk = predict_walk(profile, [0, 1], lambda g: None, readings=holding(10))
        (_, first, _), (_, second, _) = walk
        assert first is not None and second is not None and first.fits, walk
        assert "beside GPU 1 (10.0 GB, the driver's reading)" in first.describe()
        resident = first.plan.resident_bytes / GIB
        assert f"beside GPU 0 ({resident:.1f} GB, its new server, predicted)" in second.describe()
        alone = preflight(profile, 1)
        assert second.kv_tokens < alone.kv_tokens and not alone.beside
        # No driver reading of the card: said, never a guess.
        (_, none, why), _ = predict_walk(profile, [0, 1], lambda g: None, readings=lambda: [])
        assert none is None
        assert why == (
            f"GPU 0 shares device 0 with GPU 1's server (pid {neighbour.record.pid}), whose "
            "memory no driver reports here: the free memory it will find is unknown"
        )
        blind = replace(gpu(0), processes=())
        (_, none, why), _ = predict_walk(profile, [0, 1], lambda g: None, readings=lambda: [blind])
        assert none is None and "the driver lists none of its processes" in why, why

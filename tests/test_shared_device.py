"""Slots that share one physical GPU (issue 35 on a one-GPU machine): the record says which
device a slot's server runs on, and the release wait is for the stopped server's own pids on
that device, with real stand-in processes."""

from __future__ import annotations

import json
import os
from pathlib import Path

from control_helpers import parent_argv, read_pids, reaper

from tui.control import launch, stop_and_release
from tui.control.stop_release import StopTimeouts
from tui.paths import fleet_state_file
from tui.state.fleet_state import read_fleet


def test_a_slot_s_device_is_recorded_and_its_stop_waits_on_that_device(tmp_path: Path) -> None:
    with reaper() as groups:
        first = launch(
            parent_argv("term", tmp_path / "a"), dict(os.environ), tmp_path / "a.log", gpu=0, port=1
        )
        second = launch(
            parent_argv("term", tmp_path / "b"),
            dict(os.environ),
            tmp_path / "b.log",
            gpu=1,
            port=2,
            device=0,
        )
        groups += [first.record.pgid, second.record.pgid]
        _, scheduler_a = read_pids(tmp_path / "a")
        _, scheduler_b = read_pids(tmp_path / "b")
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

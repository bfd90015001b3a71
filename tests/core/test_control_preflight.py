"""Preflight checks, GPU-release waiting and the fleet-level helper, with real sockets/processes."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
from control_helpers import parent_argv, read_pids, reaper, wait_for

from bench.ports import free_port
from tui.control import (
    PreflightError,
    check_gpu_free,
    check_port,
    check_stale,
    launch,
    port_holder,
    sim_gpu_pids,
    wait_gpu_released,
)
from tui.gpu.sim_records import SimProcessRecord, publish_process
from tui.ops.service import FleetOps, OpsOptions
from tui.paths import sim_gpu_dir
from tui.profiles import Profile, profile_from_dict
from tui.state.fleet_state import read_records


def test_port_holder_names_pid_and_cmdline() -> None:
    port = free_port()
    assert port_holder(port) is None
    code = (
        "import socket, sys, threading; s = socket.socket(); "
        "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
        f"s.bind(('127.0.0.1', {port})); s.listen(); print('up', flush=True); "
        "threading.Event().wait()"
    )
    holder = subprocess.Popen([sys.executable, "-c", code, "port-holder"], stdout=subprocess.PIPE)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"up\n"
        found = port_holder(port)
        assert found is not None and found.pid == holder.pid and "port-holder" in found.cmdline
        with pytest.raises(PreflightError, match=rf"GPU 2: port {port} .* pid {holder.pid}"):
            check_port(port, gpu=2)
    finally:
        holder.kill()
        holder.wait(timeout=10)


def test_stale_server_from_earlier_run_is_named(tmp_path: Path) -> None:
    with reaper() as groups:
        proc = launch(
            parent_argv("term", tmp_path / "p"), dict(os.environ), tmp_path / "l", gpu=3, port=31003
        )
        groups.append(proc.record.pgid)
        with pytest.raises(PreflightError, match=rf"earlier run .*pid {proc.record.pid}"):
            check_stale(3, 39999)
        with pytest.raises(PreflightError, match="earlier run"):
            check_stale(5, 31003)  # same port, other GPU
        check_stale(4, 31004)  # unrelated GPU and port: fine


def _publish(pid: int, gpu: int) -> None:
    proc = psutil.Process(pid)
    record = SimProcessRecord(pid, proc.create_time(), 10 * 1024**3)
    publish_process(sim_gpu_dir(), gpu, record)


def test_wait_gpu_released_with_simulated_records(tmp_path: Path) -> None:
    with reaper() as groups:
        proc = launch(
            parent_argv("term", tmp_path / "p"), dict(os.environ), tmp_path / "l", gpu=1, port=1
        )
        groups.append(proc.record.pgid)
        parent, child = read_pids(tmp_path / "p")
        _publish(child, 1)  # the "scheduler" holds the memory, as in SGLang
        source = sim_gpu_pids()
        assert source(1) == {child}
        with pytest.raises(PreflightError, match=rf"GPU 1 still has .*pid {child}"):
            check_gpu_free(1, source)
        # Not released while it runs: the wait times out and says who still holds memory.
        held = wait_gpu_released(1, [parent, child], source, time.monotonic() + 0.3)
        assert held == {child}
        killer = threading.Thread(target=lambda: os.killpg(proc.record.pgid, 9))
        killer.start()
        held = wait_gpu_released(1, [parent, child], source, time.monotonic() + 10)
        killer.join()
        assert held == set()
        check_gpu_free(1, source)


def test_a_neighbour_of_the_fleet_on_the_device_is_expected_and_a_stranger_refused(
    tmp_path: Path,
) -> None:
    """Two slots on device 0: slot 1's launch accepts slot 0's verified server holding memory
    there, and still refuses (naming it) any other process holding memory on the device."""
    with reaper() as groups:
        first = launch(
            parent_argv("term", tmp_path / "a"), dict(os.environ), tmp_path / "a.log", gpu=0, port=1
        )
        groups.append(first.record.pgid)
        _, scheduler = read_pids(tmp_path / "a")
        _publish(scheduler, 0)
        source = sim_gpu_pids()
        check_gpu_free(1, source, device=0)  # GPU 0's server shares device 0: expected
        with pytest.raises(PreflightError, match=rf"GPU 0 still has .*pid {scheduler}"):
            check_gpu_free(0, source)  # its own slot: the old server was not stopped
        stranger = subprocess.Popen(
            [sys.executable, "-c", "import sys; sys.stdin.read()", "stranger"],
            stdin=subprocess.PIPE,
            start_new_session=True,
        )
        try:
            _publish(stranger.pid, 0)
            with pytest.raises(PreflightError) as refused:
                check_gpu_free(1, source, device=0)
            text = str(refused.value)
            assert text.startswith(
                f"GPU 1 (device 0) still has processes holding memory: pid {stranger.pid} ("
            )
            assert "stranger" in text and f"pid {scheduler}" not in text.split(";")[0]
            assert (
                f"GPU 0's server (pid {first.record.pid}) shares device 0 and is expected" in text
            )
            with pytest.raises(PreflightError, match=rf"GPU 1 still has .*pid {stranger.pid}"):
                check_gpu_free(1, lambda gpu: {stranger.pid} if gpu == 1 else set())
        finally:
            stranger.kill()
            stranger.wait(timeout=10)


def _profile(ports: list[int], python: str = sys.executable) -> Profile:
    return profile_from_dict(
        {
            "engine": {"kind": "sglang", "python": python},
            "fleet": {"gpus": [0, 1], "ports": ports, "log_dir": "{state}/logs"},
            "server": {"model_path": "Qwen/Qwen3.6-27B-FP8"},  # SGLang requires --model-path
        },
        "t",
    )


@pytest.mark.skipif(importlib.util.find_spec("sglang") is not None, reason="sglang installed")
def test_start_reports_each_gpu_independently() -> None:
    busy, free = free_port(), free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", busy))
        sock.listen()
        ops = FleetOps(options=OpsOptions(settle_s=20))
        why = asyncio.run(ops.start(_profile([busy, free])))
    assert why[0] is not None and f"port {busy} is still held" in why[0]
    # GPU 1 started, but python -m sglang.launch_server dies at once without sglang installed.
    assert why[1] is not None and "exited at once with code 1" in why[1]
    assert "No module named 'sglang'" in why[1]
    assert read_records() == {}


def test_stop_fleet_drains_every_recorded_server_and_waits_for_memory(tmp_path: Path) -> None:
    with reaper() as groups:
        procs = [
            launch(
                parent_argv("term", tmp_path / f"p{g}"),
                dict(os.environ),
                tmp_path / f"l{g}",
                gpu=g,
                port=32000 + g,
            )
            for g in (0, 1)
        ]
        groups += [p.record.pgid for p in procs]
        children = [read_pids(tmp_path / f"p{g}")[1] for g in (0, 1)]
        for g, child in enumerate(children):
            _publish(child, g)
        assert sorted(read_records()) == [0, 1]
        outcomes = asyncio.run(FleetOps(gpu_pids=sim_gpu_pids()).stop_fleet())
        assert [o.ok for o in outcomes] == [True, True]
        assert all("GPU memory released" in o.message for o in outcomes)
        assert read_records() == {}
        wait_for(lambda: all(not psutil.pid_exists(c) for c in children), 10, "children reaped")

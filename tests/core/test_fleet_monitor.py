"""The fleet monitor against real processes, real loopback HTTP and real simulated-GPU records."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest
from fleet_helpers import poll_until, reading, served
from repo_paths import FIXTURES
from repo_paths import ROOT as REPO
from servers_helpers import canned_server

from bench.ports import free_port
from tui import paths
from tui.fleet.monitor import FleetMonitor
from tui.fleet.snapshot import FleetSnapshot, ServerState
from tui.fleet.spec import FleetSpec, ServerSpec
from tui.gpu.simulated import DRIVER_RESERVED_BYTES, SimulatedSource
from tui.gpu.source import NoGpuSource
from tui.profiles import load_profile, profile_to_dict
from tui.state.fleet_state import GpuState, update_fleet

GIB = 1024**3
FAKE = FIXTURES / "servers" / "fake_sglang.py"


def _listeners_readable() -> bool:
    try:
        psutil.net_connections(kind="tcp")
    except (psutil.AccessDenied, OSError):
        return False
    return True


async def _poll_until(
    monitor: FleetMonitor, done: Callable[[FleetSnapshot], bool]
) -> FleetSnapshot:
    return await poll_until(monitor, done, deadline_s=30.0)  # canned servers: a short deadline


class FakeFleet:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.sim_root = tmp / "simgpu"
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(
        self, gpu: int, fail: bool = False
    ) -> tuple[ServerSpec, subprocess.Popen[bytes], Path]:
        port = free_port()
        log = self.tmp / f"sglang_gpu{gpu}.log"
        gate = self.tmp / f"gate{gpu}"
        argv = [sys.executable, str(FAKE), "--port", str(port), "--gpu", str(gpu)]
        argv += ["--log", str(log), "--sim-root", str(self.sim_root), "--gate", str(gate)]
        if fail:
            argv.append("--fail")
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        proc = subprocess.Popen(argv, env=env, start_new_session=True, cwd=REPO)
        self.procs.append(proc)
        return ServerSpec(gpu, port, log_path=str(log)), proc, gate

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[FakeFleet]:
    if not _listeners_readable():
        pytest.skip("the kernel socket table is not readable here; discovery needs it")
    fake = FakeFleet(tmp_path)
    try:
        yield fake
    finally:
        fake.stop()


async def test_starting_ready_then_sigkill_stopped(fleet: FakeFleet) -> None:
    spec, proc, gate = fleet.start(gpu=2)
    fleet.sim_root.mkdir(parents=True, exist_ok=True)
    monitor = FleetMonitor(
        FleetSpec((spec,)), SimulatedSource(fleet.sim_root), probe_timeout=2.0, discovery_interval=0
    )
    try:
        snap = await _poll_until(
            monitor,
            lambda s: served(s).state is ServerState.STARTING and served(s).pid is not None,
        )
        server = served(snap)
        assert server.pid == proc.pid
        assert server.phase  # the log says how far startup got
        gate.touch()
        snap = await _poll_until(
            monitor,
            lambda s: served(s).state is ServerState.READY and served(s).running is not None,
        )
        (panel,) = snap.panels
        server = served(snap)
        assert panel.gpu_index == 2 and panel.gpu is not None
        assert panel.gpu.memory_used == 120 * GIB + DRIVER_RESERVED_BYTES
        assert [p.pid for p in panel.gpu.processes] == [proc.pid]
        assert server.kv_tokens == 798080
        assert server.mamba_slots == 200
        assert server.max_running_requested == 64
        assert server.max_running_effective == 40
        assert server.capped
        assert (server.running, server.queued) == (14, 34)
        assert server.gen_throughput == pytest.approx(1934.5)
        assert server.ready_at is not None and server.last_error is None
        assert any("KV Cache is allocated" in line for line in server.allocation_lines)

        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        # SIGKILLed behind the monitor's back: a crash, never the word of an orderly stop
        snap = await _poll_until(monitor, lambda s: served(s).state is ServerState.CRASHED)
        assert reading(snap).memory_used == DRIVER_RESERVED_BYTES
        assert reading(snap).processes == ()
        assert served(snap).running is None
    finally:
        await monitor.aclose()


async def test_oom_while_alive_is_failed_with_the_error(fleet: FakeFleet) -> None:
    spec, proc, _ = fleet.start(gpu=0, fail=True)
    monitor = FleetMonitor(FleetSpec((spec,)), NoGpuSource("none here"), discovery_interval=0)
    try:
        # The fake is found by its listening socket, which may open after the OOM line is logged.
        snap = await _poll_until(
            monitor,
            lambda s: served(s).state is ServerState.FAILED and served(s).pid is not None,
        )
        server = served(snap)
        assert server.pid == proc.pid and psutil.pid_exists(proc.pid)
        assert server.error_reason == "oom"
        assert "Not enough memory" in (server.last_error or "")
        assert snap.panels[0].gpu is None and "none here" in snap.panels[0].gpu_note
    finally:
        await monitor.aclose()


async def test_timeouts_mark_a_live_server_stale() -> None:
    if not _listeners_readable():
        pytest.skip("the kernel socket table is not readable here; discovery needs it")
    with canned_server({}) as hung, canned_server({"/ready": (200, "text/plain", "")}) as ok:
        hung.routes["/ready"] = hung.slow((200, "text/plain", ""))
        spec = FleetSpec.from_ports([hung.port, ok.port], gpus=[0, 1])
        monitor = FleetMonitor(spec, NoGpuSource("none"), probe_timeout=0.3, discovery_interval=0)
        try:
            start = time.monotonic()
            snap = await monitor.poll()
            elapsed = time.monotonic() - start
        finally:
            await monitor.aclose()
    states = [served(snap, i).state for i in range(len(snap.panels))]
    assert states == [ServerState.STALE, ServerState.READY]
    # The hung server's route answers only after 30 s: the poll cost one 0.3 s timeout, not the
    # hang. The bound is far from both (a loaded 2-core machine took 2.1 s once; a poll that
    # waited on the hung server would take 30).
    assert elapsed < 10.0


async def test_nothing_running_is_absent_and_gpus_listed(tmp_path: Path) -> None:
    spec = FleetSpec((ServerSpec(0, free_port()),), extra_gpus=(3,))
    monitor = FleetMonitor(spec, NoGpuSource("no NVIDIA driver"), discovery_interval=0)
    try:
        snap = await monitor.poll()
    finally:
        await monitor.aclose()
    assert [p.gpu_index for p in snap.panels] == [0, 3]
    assert served(snap).state is ServerState.ABSENT
    assert snap.panels[1].server is None
    assert snap.gpu_source == "no NVIDIA driver"


async def test_a_damaged_fleet_state_costs_no_poll(tmp_path: Path) -> None:
    # A server down sends the monitor to the fleet records; a damaged state file there must
    # cost the panels their record, not the poll (the operations that need it report it).
    paths.fleet_state_file().parent.mkdir(parents=True, exist_ok=True)
    paths.fleet_state_file().write_text("{not json")
    spec = FleetSpec((ServerSpec(0, free_port()),))
    monitor = FleetMonitor(spec, NoGpuSource("no NVIDIA driver"), discovery_interval=0)
    try:
        snap = await monitor.poll()
    finally:
        await monitor.aclose()
    assert served(snap).state is ServerState.ABSENT


async def test_a_state_rewritten_within_one_timestamp_is_read_again(tmp_path: Path) -> None:
    # The state is replaced atomically (a new file): one rewritten to the same size within the
    # file system's timestamp granularity still reads as changed (a stale state would show the
    # old profile, and judge a relaunched server against its predecessor's record).
    base = profile_to_dict(load_profile(REPO / "profiles" / "sim-baseline.toml"))
    port = free_port()

    def write(name: str) -> None:
        update_fleet(lambda _: {0: GpuState(0, port, current={**base, "name": name})})

    write("aaaa")
    spec = FleetSpec((ServerSpec(0, port),))
    monitor = FleetMonitor(spec, NoGpuSource("no NVIDIA driver"), discovery_interval=0)
    try:
        first = await monitor.poll()
        stamp = paths.fleet_state_file().stat()
        write("bbbb")
        os.utime(paths.fleet_state_file(), ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
        assert paths.fleet_state_file().stat().st_size == stamp.st_size
        second = await monitor.poll()
    finally:
        await monitor.aclose()
    profiles = [served(s).profile for s in (first, second)]
    assert [p.name if p else None for p in profiles] == ["aaaa", "bbbb"]


def test_spec_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match=r"port=70000 is out of range; allowed 1\.\.65535"):
        ServerSpec(0, 70000)
    with pytest.raises(ValueError, match=r"gpu_index \[1\] has more than one server"):
        FleetSpec.from_ports([30000, 30001], gpus=[1, 1])
    with pytest.raises(ValueError, match="gpus has 1 entries; expected 2"):
        FleetSpec.from_ports([30000, 30001], gpus=[0])

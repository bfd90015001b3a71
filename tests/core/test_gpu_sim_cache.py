"""The simulated GPU source reads a GPU's records again only when its folder changed."""

from __future__ import annotations

import os
import time
from pathlib import Path

import psutil
import pytest
from pipeline_helpers import sim_server

from tui import paths
from tui.gpu import sim_records
from tui.gpu.sim_cache import RACY_NS, RecordCache
from tui.gpu.simulated import DRIVER_RESERVED_BYTES, SimulatedSource

GIB = 1024**3


def _record(proc: psutil.Process, used: int, util: float) -> sim_records.SimProcessRecord:
    return sim_records.SimProcessRecord(
        pid=proc.pid, create_time=proc.create_time(), used_bytes=used, utilization_gpu=util
    )


def _age_folders(root: Path) -> None:
    """Date every folder back past the racy window (as a fleet under steady load leaves them)."""
    past = time.time() - 10 * RACY_NS / 1e9
    for folder in (root, *root.glob("gpu*")):
        os.utime(folder, (past, past))


def test_unchanged_folders_are_not_read_again(tmp_path: Path, child: psutil.Process) -> None:
    for index in range(3):
        sim_records.ensure_device(tmp_path, index, "b200")
        sim_records.publish_process(tmp_path, index, _record(child, (index + 1) * GIB, 50.0))
    _age_folders(tmp_path)
    cache = RecordCache(tmp_path)
    first = cache.devices()
    assert cache.reads == 4  # the root and three GPUs
    expected = [
        (device, sim_records.live_processes(tmp_path, device.index))
        for device in sim_records.list_devices(tmp_path)
    ]
    assert first == expected
    for _ in range(3):
        assert cache.devices() == first
    assert cache.reads == 4


def test_a_rewritten_record_is_read_at_the_next_sample(
    tmp_path: Path, child: psutil.Process
) -> None:
    """A rename into a GPU's folder moves its mtime: that folder, and only it, is read again;
    a folder changed within the racy window is read at every sample until it settles."""
    sim_records.ensure_device(tmp_path, 0, "b200")
    sim_records.ensure_device(tmp_path, 1, "b200")
    sim_records.publish_process(tmp_path, 0, _record(child, 10 * GIB, 20.0))
    _age_folders(tmp_path)
    source = SimulatedSource(tmp_path)
    assert source.sample()[0].utilization_gpu == 20.0
    reads = source._records.reads
    sim_records.publish_process(tmp_path, 0, _record(child, 12 * GIB, 90.0))
    gpu0, _ = source.sample()
    assert gpu0.utilization_gpu == 90.0 and gpu0.memory_used == 12 * GIB + DRIVER_RESERVED_BYTES
    assert source._records.reads == reads + 1  # GPU 0's folder only
    # within the racy window a same-size rewrite (same mtime tick) must still be seen
    sim_records.publish_process(tmp_path, 0, _record(child, 12 * GIB, 70.0))
    assert source.sample()[0].utilization_gpu == 70.0


def test_a_dead_process_is_released_though_its_record_is_cached(
    tmp_path: Path, child: psutil.Process
) -> None:
    sim_records.ensure_device(tmp_path, 0, "h200")
    sim_records.publish_process(tmp_path, 0, _record(child, 40 * GIB, 80.0))
    _age_folders(tmp_path)
    source = SimulatedSource(tmp_path)
    assert source.sample()[0].memory_used == 40 * GIB + DRIVER_RESERVED_BYTES
    reads = source._records.reads
    child.kill()
    child.wait(timeout=10)
    (gpu,) = source.sample()
    assert source._records.reads == reads  # the record was not read again
    assert gpu.memory_used == DRIVER_RESERVED_BYTES and gpu.processes == ()


def test_a_new_gpu_is_listed_at_the_next_sample(tmp_path: Path) -> None:
    sim_records.ensure_device(tmp_path, 0, "h100")
    _age_folders(tmp_path)
    source = SimulatedSource(tmp_path)
    assert [gpu.index for gpu in source.sample()] == [0]
    sim_records.ensure_device(tmp_path, 1, "h100")
    assert [gpu.index for gpu in source.sample()] == [0, 1]
    assert "2 x NVIDIA H100" in source.describe()


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The pids ``sim_records.alive`` (psutil's identity check) is asked about, in order."""
    asked: list[int] = []
    original = sim_records.alive

    def counted(pid: int, create_time: float) -> bool:
        asked.append(pid)
        return original(pid, create_time)

    monkeypatch.setattr(sim_records, "alive", counted)
    return asked


def test_a_live_record_is_checked_by_psutil_once_then_by_its_pidfd(
    tmp_path: Path, child: psutil.Process, checks: list[int]
) -> None:
    """The identity is psutil's (the start time), once; later samples ask the pidfd opened
    before that check, and a record gone from its folder takes its pidfd with it."""
    from tui.pidwatch import PidWatch

    probe = PidWatch.open(child.pid)
    if probe is None:
        pytest.skip("no pidfd_open here")
    probe.close()
    sim_records.ensure_device(tmp_path, 0, "h200")
    sim_records.publish_process(tmp_path, 0, _record(child, 40 * GIB, 80.0))
    cache = RecordCache(tmp_path)
    for _ in range(4):
        ((_, live),) = cache.devices()
        assert [r.pid for r in live] == [child.pid]
    assert checks == [child.pid]
    for path in (tmp_path / "gpu0").glob("proc-*.json"):
        path.unlink()
    ((_, live),) = cache.devices()
    assert live == [] and cache._watches == {}


def test_a_dead_record_is_checked_once(
    tmp_path: Path, child: psutil.Process, checks: list[int]
) -> None:
    """A record whose process is gone stays gone (a reused pid starts at another time): it is
    not checked again at every sample (records of a killed fleet stay until pruned); a new
    record of the same pid with another start time is checked afresh."""
    sim_records.ensure_device(tmp_path, 0, "h200")
    dead = sim_records.SimProcessRecord(
        pid=child.pid, create_time=child.create_time() - 100.0, used_bytes=GIB, utilization_gpu=1
    )
    sim_records.publish_process(tmp_path, 0, dead)
    cache = RecordCache(tmp_path)
    for _ in range(4):
        ((_, live),) = cache.devices()
        assert live == []
    assert checks == [child.pid]  # once, then remembered as gone
    sim_records.publish_process(tmp_path, 0, _record(child, 40 * GIB, 80.0))
    ((_, live),) = cache.devices()
    assert [r.pid for r in live] == [child.pid] and checks == [child.pid, child.pid]


def test_a_changed_folder_reads_only_its_changed_records(
    tmp_path: Path, child: psutil.Process
) -> None:
    """Records of killed processes pile up beside a live one; a change of the live record reads
    that one file again, not the pile, and a removed record is forgotten."""
    sim_records.ensure_device(tmp_path, 0, "b200")
    for pid in range(4_000_000, 4_000_040):  # dead: never valid pids of this machine
        stale = sim_records.SimProcessRecord(pid=pid, create_time=1.0, used_bytes=GIB)
        sim_records.publish_process(tmp_path, 0, stale)
    sim_records.publish_process(tmp_path, 0, _record(child, GIB, 10.0))
    _age_folders(tmp_path)
    source = SimulatedSource(tmp_path)
    assert source.sample()[0].utilization_gpu == 10.0
    assert source._records.record_reads == 41
    sim_records.publish_process(tmp_path, 0, _record(child, 2 * GIB, 70.0))
    sim_records.withdraw_process(tmp_path, 0, 4_000_000)
    _age_folders(tmp_path)
    sample = source.sample()[0]
    assert (sample.utilization_gpu, len(sample.processes)) == (70.0, 1)
    assert sample.memory_used == DRIVER_RESERVED_BYTES + 2 * GIB
    assert source._records.record_reads == 42  # the live record alone
    assert len(source._records._files[tmp_path / "gpu0"]) == 40  # the withdrawn one forgotten


def test_a_starting_sim_server_prunes_the_dead_records_of_its_gpu() -> None:
    """A killed server's record stays behind (nothing withdrew it); the next server on that
    GPU removes it, as a driver forgets a dead process, so the pile never grows."""
    root = paths.sim_gpu_dir()  # the test's own state directory (conftest)
    sim_records.ensure_device(root, 3, "b200")
    stale = sim_records.SimProcessRecord(pid=4_000_001, create_time=1.0, used_bytes=GIB)
    left = sim_records.publish_process(root, 3, stale)
    server = sim_server(3)
    server.start()
    try:
        assert not left.exists()
        assert server.process is not None
        family = psutil.Process(server.process.pid).children(recursive=True)
        held = [r.pid for r in sim_records.live_processes(root, 3)]
        assert held == [p.pid for p in family if p.pid in held] and len(held) == 1  # its own
    finally:
        server.kill()

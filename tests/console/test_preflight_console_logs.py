"""The preflight calibrates on the logs the console reads, not only on gpufleet's own records.

Seen on the GPU machine (issue 35): servers started by the operator's own script, their output in
their own log files; the console showed those logs, and the preflight said "sizes from the model's
constants (no running server's log to calibrate on)": it read only the fleet state's records,
which a server gpufleet did not launch never has. Here the server is ``gpufleet sim --sim-build
0.5.17`` with the recorded ``base`` scenario's flags, started by the test in its own session with
its stdout in a file of its own, as the seed's script does (``> sglang_gpu0.log 2>&1``).
"""

from __future__ import annotations

import shutil
import socket
from pathlib import Path

import pytest
import tomli_w
from real0517_helpers import REAL, running_0517

from tui import paths
from tui.fleet import log_paths
from tui.fleet.log_paths import server_logs
from tui.fleet.monitor import FleetMonitor
from tui.fleet.spec import FleetSpec
from tui.gpu.simulated import SimulatedSource
from tui.ops.cli import apply as apply_cli
from tui.ops.local import LocalFleet
from tui.ops.service import FleetOps, OpsOptions
from tui.profiles import Profile, load_profile
from tui.state.fleet_state import read_fleet, read_records
from tui.ui.tuning.preflight_panel import sizes_source

H100_BYTES = 81559 * 1024**2


def _profile(tmp_path: Path, port: int) -> Path:
    """A real-SGLang profile of the recorded model on ``port``, its own log folder empty."""
    path = tmp_path / "own.toml"
    path.write_text(
        tomli_w.dumps(
            {
                "name": "own",
                "engine": {"kind": "sglang", "python": "python3", "sglang_version": "0.5.17"},
                "fleet": {
                    "gpus": [0],
                    "base_port": port,
                    "log_dir": str(tmp_path / "profile-logs"),
                },
                "server": {
                    "model_path": str(REAL / "model"),
                    "mem_fraction_static": 0.25,
                    "max_mamba_cache_size": 48,
                    "extra_flags": {"load_format": "dummy", "context_length": 4096},
                },
            }
        )
    )
    return path


async def test_a_script_started_servers_stdout_log_calibrates_the_preflight(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(paths.STATE_ENV, str(tmp_path))
    with running_0517("base", tmp_path, speed=5.0) as sim:
        assert sim.wait_log("fired up and ready to roll", 60), sim.log()[-2000:]
        path = _profile(tmp_path, sim.port)
        profile = load_profile(path)
        assert read_records() == {}  # gpufleet launched nothing: no record to read
        assert server_logs(profile, [0], read_fleet()) == {0: sim.log_path}
        assert apply_cli.main([str(path), "--preflight-only", "--card", "h100"]) == 0
        (line,) = [x for x in capsys.readouterr().out.splitlines() if "GPU 0" in x]
        assert line.endswith("(calibrated)"), line
        ops = FleetOps(profile, options=OpsOptions(card_bytes=H100_BYTES))
        (item,) = await ops.preflight(profile, [0])
        assert item.calibrated
        assert sizes_source([item]) == "sizes calibrated on the running servers' logs"


def _recorded_log(tmp_path: Path) -> Path:
    """A log where neither the profile, the fleet state nor a process points: a folder given to
    the console (``--log-dir``), the real server's recorded ``base`` launch."""
    folder = tmp_path / "given"
    folder.mkdir()
    log = folder / "sglang_gpu0.log"
    shutil.copyfile(REAL / "base" / "server.log", log)
    return log


async def test_the_forms_preflight_calibrates_on_the_log_the_monitor_follows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(paths.STATE_ENV, str(tmp_path))
    log = _recorded_log(tmp_path)
    with socket.socket() as bound:  # bound, never listening: no other server can be found there
        bound.bind(("127.0.0.1", 0))
        port = bound.getsockname()[1]
        await _monitor_then_preflight(tmp_path, port, log)


async def _monitor_then_preflight(tmp_path: Path, port: int, log: Path) -> None:
    profile: Profile = load_profile(_profile(tmp_path, port))
    spec = FleetSpec.from_ports([port], [0], log_paths=[str(log)])
    monitor = FleetMonitor(spec, SimulatedSource(paths.sim_gpu_dir()), discovery_interval=0)
    try:
        await monitor.poll()
    finally:
        await monitor.aclose()
    assert monitor.log_paths() == {0: str(log)}
    ops = FleetOps(profile, options=OpsOptions(card_bytes=H100_BYTES))
    (alone,) = await LocalFleet(ops).preflight(profile, (0,))
    assert not alone.calibrated  # nothing else leads to that file
    (item,) = await LocalFleet(ops, monitor).preflight(profile, (0,))
    assert item.calibrated


def test_with_the_monitors_logs_no_process_table_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The form predicts at each keystroke: the monitor already looks for the running servers,
    so given its logs nothing scans the process table again (~90 ms a scan)."""

    def no_scan(*args: object, **kwargs: object) -> None:
        raise AssertionError("the process table was scanned")

    monkeypatch.setattr(log_paths, "find_servers", no_scan)
    log = _recorded_log(tmp_path)
    profile = load_profile(_profile(tmp_path, 31990))
    assert server_logs(profile, [0], {}, known={0: str(log)}) == {0: log}
    assert server_logs(profile, [0], {}, known={0: str(tmp_path / "none.log")}) == {}
    own = tmp_path / "profile-logs" / "sglang_gpu0.log"  # the profile's own log path
    own.parent.mkdir()
    shutil.copyfile(log, own)
    assert server_logs(profile, [0], {}, known={}) == {0: own}

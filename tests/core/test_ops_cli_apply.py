"""``gpufleet apply`` input handling: bad input exits 2 and stops nothing; preflight-only."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from repo_paths import FIXTURES

from tui.ops.cli import apply as cli
from tui.state.fleet_state import ProcessRecord, put_record, read_records


def write_profile(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "p.toml"
    path.write_text(
        '[engine]\nkind = "sim"\nsim_model = "qwen3.6-27b"\n'
        "[fleet]\ngpus = [0, 1]\nbase_port = 31000\n"
        f'[server]\nmodel_path = "Qwen/Qwen3.6-27B-FP8"\n{body}'
    )
    return path


@pytest.fixture()
def recorded_server() -> Iterator[ProcessRecord]:
    """A real process recorded as GPU 0's server; a refusal must leave it running."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True
    )
    try:
        info = psutil.Process(proc.pid)
        record = ProcessRecord(
            0, 31000, proc.pid, proc.pid, info.create_time(), tuple(info.cmdline()), "/dev/null"
        )
        put_record(record)
        yield record
        assert proc.poll() is None, "the recorded server was stopped"
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_invalid_profile_value_exits_2_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], recorded_server: ProcessRecord
) -> None:
    record = recorded_server
    path = write_profile(tmp_path, "mem_fraction_static = 1.5\n")
    assert cli.main([str(path), "--no-measure"]) == 2
    err = capsys.readouterr().err
    assert "mem_fraction_static" in err and "1.5" in err
    assert read_records()[0] == record  # nothing stopped, record untouched


def test_gpu_outside_profile_is_refused_before_stopping(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], recorded_server: ProcessRecord
) -> None:
    record = recorded_server
    path = write_profile(tmp_path, "max_running_requests = 64\n")
    assert cli.main([str(path), "--gpus", "0,7", "--no-measure"]) == 2
    captured = capsys.readouterr()
    assert "GPU 7 is not in profile" in captured.err
    assert "GPU 0: stopping" not in captured.out
    assert read_records()[0] == record


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["--gpus", "0,x"], "'x' is not a GPU index"),
        ([], "PROFILE is required"),
        (["--rollback"], "no GPU has a previous profile"),
        (["no-such-profile-anywhere"], "no-such-profile-anywhere"),
    ],
)
def test_bad_arguments_exit_2(
    argv: list[str], needle: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if argv[:1] == ["--gpus"]:
        argv = [str(write_profile(tmp_path, "")), *argv]
    assert cli.main(argv) == 2
    assert needle in capsys.readouterr().err


def test_preflight_only_prints_predictions_and_launches_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_profile(
        tmp_path,
        "mem_fraction_static = 0.93\nmax_mamba_cache_size = 200\nmax_running_requests = 64\n"
        'mamba_radix_cache_strategy = "extra_buffer"\nspeculative_algorithm = "EAGLE"\n'
        "speculative_num_draft_tokens = 4\n[gpu.1]\nmem_fraction_static = 0.35\n",
    )
    assert cli.main([str(path), "--preflight-only"]) == 0
    out = capsys.readouterr().out
    assert "preflight GPU 0: mamba slots 200" in out and "64 -> 40 (capped)" in out
    assert "preflight GPU 1: does not fit: " in out
    assert read_records() == {}


def test_preflight_only_plans_a_model_from_its_config_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A simulated fleet serving the GPU machine's tiny Qwen3.5 model by its config folder: a
    plan per GPU, not "cannot predict: unknown model"."""
    folder = FIXTURES / "model_configs" / "gpufleet--tiny-qwen35"
    path = tmp_path / "tiny.toml"
    path.write_text(
        f'[engine]\nkind = "sim"\nsim_gpu = "h200"\nsim_model = "{folder}"\n'
        "[fleet]\ngpus = [0]\nbase_port = 31000\n"
        f'[server]\nmodel_path = "{folder}"\nmem_fraction_static = 0.2\n'
        "max_mamba_cache_size = 64\nmax_running_requests = 16\n"
    )
    assert cli.main([str(path), "--preflight-only"]) == 0
    out = capsys.readouterr().out
    assert "preflight GPU 0: mamba slots 64, KV tokens " in out
    assert "max_running 16 -> 12 (capped)" in out  # 0.5.23: extra_buffer, 5 slots a request
    assert "cannot predict" not in out
    assert read_records() == {}

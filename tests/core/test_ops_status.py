"""``gpufleet status``: the whole fleet and its job, with exit codes a script can branch on.

Against a real two-GPU simulated fleet: all ready (0), one stopped (1), all stopped (2); bad
input and a damaged state file exit 3 with one line; ``--watch`` polls until ``--count``.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

import pytest
from operator_helpers import gpufleet_status
from rollout_helpers import sim_fleet

from tui import paths
from tui.control.stop_release import StopTimeouts
from tui.fleet.snapshot import FleetSnapshot, GpuPanel, ServerSnapshot, ServerState
from tui.gpu.snapshot import GpuSnapshot
from tui.ops.cli import status as status_cli
from tui.ops.fleet_status import exit_code
from tui.ops.service import FleetOps, OpsOptions
from tui.pipeline.status import PipelineStatus, Rate, write_status
from tui.state.fleet_state import GpuState, update_fleet

SPEED = 40.0


def _job(state: str = "running") -> PipelineStatus:
    rate = Rate(window_s=60.0, requests_per_s=2.5, output_tokens_per_s=900.0)
    now = time.time()
    return PipelineStatus(
        schema=1,
        state=state,
        pid=os.getpid(),
        started_at=now - 100,
        updated_at=now - 4,
        total=1000,
        done=250,
        failed=1,
        in_flight=8,
        rate_1m=rate,
        rate_10m=rate,
        eta_s=300.0,
    )


def test_status_of_a_real_fleet_ready_then_one_stopped_then_none(tmp_path: Path) -> None:
    with sim_fleet(tmp_path, 2, SPEED) as fleet:
        write_status(paths.pipeline_status_file(), _job())
        ready = gpufleet_status("--json")
        assert ready.returncode == 0, ready.stderr
        doc = json.loads(ready.stdout)
        assert (doc["exit_code"], doc["ready"], doc["servers"]) == (0, 2, 2)
        assert [g["port"] for g in doc["gpus"]] == fleet.ports
        for gpu in doc["gpus"]:
            assert gpu["state"] == "ready" and gpu["pid"] > 0
            assert gpu["profile"] == "t-baseline" and gpu["profile_differs"] == {}
            assert gpu["requested"]["mem_fraction_static"] == 0.88  # typed (schema 2)
            assert gpu["requested"]["max_mamba_cache_size"] == 80
            assert gpu["requested"]["max_running_requests"] is None  # auto
            assert gpu["effective"]["kv_tokens"] > 0 and gpu["effective"]["mamba_slots"] > 0
            assert gpu["effective"]["max_running_requests"] > 0
            assert gpu["running"] == 0 and gpu["queued"] == 0
            assert gpu["ages_s"]["load"] is not None and gpu["ages_s"]["load"] < 5
        job = doc["job"]
        assert (job["state"], job["done"], job["total"]) == ("running", 250, 1000)
        assert 3 <= job["age_s"] < 30

        text = gpufleet_status()
        assert text.returncode == 0
        assert "fleet: 2/2 ready (exit 0)" in text.stdout
        assert text.stdout.count("t-baseline") == 2
        assert "job: running 250/1,000 done" in text.stdout

        ops = FleetOps(options=OpsOptions(stop=StopTimeouts(drain_s=5, kill_s=5, release_s=10)))
        asyncio.run(ops.kill([1], mode="terminate"))
        one = gpufleet_status("--json")
        assert one.returncode == 1, one.stdout
        states = [g["state"] for g in json.loads(one.stdout)["gpus"]]
        assert states[0] == "ready" and states[1] != "ready"

        asyncio.run(ops.kill([0], mode="terminate"))
        none = gpufleet_status()
        assert none.returncode == 2, none.stdout
        assert "fleet: 0/2 ready (exit 2)" in none.stdout


def test_watch_prints_one_document_per_poll_until_count(tmp_path: Path) -> None:
    with sim_fleet(tmp_path, 1, SPEED):
        started = time.monotonic()
        watched = gpufleet_status("--json", "--watch", "0.5", "--count", "3")
        assert watched.returncode == 0, watched.stderr
        docs = [json.loads(line) for line in watched.stdout.splitlines()]
        assert len(docs) == 3
        assert docs[0]["taken_at"] < docs[1]["taken_at"] < docs[2]["taken_at"]
        assert time.monotonic() - started >= 1.0  # two waits of 0.5 s between three polls


def test_nothing_on_the_ports_is_unreachable() -> None:
    from bench.simfleet import free_ports

    result = gpufleet_status("--ports", ",".join(str(p) for p in free_ports(2)))
    assert result.returncode == 2
    assert "fleet: 0/2 ready (exit 2)" in result.stdout


class SevenGpus:
    """A GPU source that samples seven GPUs (a demo's simulated fleet, or a node's NVML)."""

    kind = "sim"

    def sample(self) -> tuple[GpuSnapshot, ...]:
        return tuple(
            GpuSnapshot(i, "B200", f"GPU-{i}", 180, 60, 120, 0.0, 0.0, 30.0, 100.0, 1000.0, 1, 1)
            for i in range(7)
        )

    def describe(self) -> str:
        return "seven GPUs"

    def close(self) -> None:
        pass


def test_ports_and_gpus_show_exactly_those_rows(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 35: 'status --ports A-B --gpus 0-1' printed the seven GPUs the source samples."""
    from bench.simfleet import free_ports

    monkeypatch.setattr(status_cli, "open_gpu_source", SevenGpus)
    a, b = free_ports(2)
    assert status_cli.main(["--ports", f"{a},{b}", "--gpus", "3,5", "--json"]) == 2
    doc = json.loads(capsys.readouterr().out)
    assert [g["gpu"] for g in doc["gpus"]] == [3, 5]
    assert status_cli.main(["--ports", f"{a},{b}", "--gpus", "3,5"]) == 2
    rows = [line.split()[0] for line in capsys.readouterr().out.splitlines()[2:-1]]
    assert rows == ["3", "5"]
    # The fleet the state records (GPU 3 on port a): every GPU the source samples is shown.
    update_fleet(lambda state: {**state, 3: GpuState(3, port=a)})
    assert status_cli.main([]) == 2
    assert len(capsys.readouterr().out.splitlines()) == 2 + 7 + 1  # head, seven GPUs, the job


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--watch", "0"], "--watch"),
        (["--watch", "nan"], "--watch"),
        (["--ports", "x"], "--ports"),
        (["--ports", "70000"], "--ports"),
        (["--ports", "40000-40001", "--gpus", "0"], "--gpus"),
        (["--count", "2"], "--count"),
        (["--bogus"], "--bogus"),
    ],
)
def test_bad_input_exits_3_in_one_line(
    args: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        code = status_cli.main(args)
        raise SystemExit(code)
    assert exited.value.code == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and named in err, err


def test_a_damaged_state_file_exits_3_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    paths.fleet_state_file().parent.mkdir(parents=True, exist_ok=True)
    paths.fleet_state_file().write_text("{not json")
    assert status_cli.main([]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and paths.fleet_state_file().name in err, err


def _panel(gpu: int, state: ServerState | None) -> GpuPanel:
    server = None if state is None else ServerSnapshot(port=40000 + gpu, state=state)
    return GpuPanel(gpu_index=gpu, gpu=None, server=server)


@pytest.mark.parametrize(
    ("states", "code"),
    [
        ([ServerState.READY, ServerState.READY], 0),
        ([ServerState.READY, ServerState.STARTING], 1),
        ([ServerState.READY, ServerState.FAILED], 1),
        ([ServerState.STUCK, ServerState.READY], 1),
        ([ServerState.FAILED, ServerState.STOPPED], 2),
        ([ServerState.ABSENT, ServerState.ABSENT], 2),
        ([], 2),
    ],
)
def test_exit_code_by_states(states: list[ServerState], code: int) -> None:
    panels = tuple(_panel(i, s) for i, s in enumerate(states))
    assert exit_code(FleetSnapshot(panels=panels)) == code

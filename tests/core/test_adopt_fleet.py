"""Taking over a fleet gpufleet did not launch (issue 35, point 1), real processes end to end.

Three simulated servers (a drop-in for SGLang) started by a script of the test's own
(``bench.operator_fleet``: one new session, ``CUDA_VISIBLE_DEVICES``, a log file each, no
gpufleet launch) are adopted: the profile carries each server's knobs, a difference as its GPU's
override; ``gpufleet status`` counts them ready; then, with ``gpufleet generate`` sending to all
three, a rollout replaces them one GPU at a time: every prompt done exactly once, nothing lost,
and the script's other servers (in the same process group) untouched by each GPU's stop.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from control_helpers import running
from rollout_helpers import pipeline, wait_done_at_least

from bench.operator_fleet import operator_fleet, sim_server
from bench.ports import free_ports
from bench.simfleet import FAST_APPLY, kill_strays, stop_all
from tui import paths
from tui.ops.cli import adopt as adopt_cli
from tui.ops.cli import apply as apply_cli
from tui.ops.cli import status as status_cli
from tui.ops.journal import read_journal
from tui.ops.service import FleetOps
from tui.profiles import Profile, load_named, profile_from_dict, profile_to_dict, save_profile
from tui.retune.events import GpuPhase
from tui.retune.options import ApplyOptions
from tui.rollout.fleet_verdict import VerdictWindows
from tui.rollout.rollout import RolloutOptions, RolloutResult
from tui.state.fleet_state import read_fleet, read_records

SPEED = 20.0
TOTAL = 1200
KNOBS = ["--mem-fraction-static", "0.88", "--mamba-full-memory-ratio", "0.4", "--enable-metrics"]


def test_a_script_started_fleet_is_adopted_then_rolled_out_under_the_job(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ports = free_ports(3)
    logs = tmp_path / "logs"
    slots = {0: "80", 1: "80", 2: "120"}  # GPU 2 runs a pool of its own
    servers = [
        sim_server(gpu, port, logs, [*KNOBS, "--max-mamba-cache-size", slots[gpu]], SPEED)
        for gpu, port in enumerate(ports)
    ]
    try:
        with operator_fleet(servers) as fleet:
            script_pids = dict(zip(range(3), fleet.pids, strict=True))
            argv = ["--ports", ",".join(map(str, ports)), "--name", "mine"]
            assert adopt_cli.main(argv) == 0
            out = capsys.readouterr().out
            assert "nothing was signalled" in out and "not kept: nothing" in out
            # The servers kept running: the same processes, now the fleet's records.
            records = read_records()
            assert {g: r.pid for g, r in records.items()} == script_pids
            assert all(r.adopted and r.log_path == str(logs / f"sglang_gpu{g}.log")
                       for g, r in records.items())  # fmt: skip
            profile = load_named("mine")
            assert profile.server.mem_fraction_static == 0.88
            assert profile.server.mamba_full_memory_ratio == 0.4
            assert profile.server.max_mamba_cache_size == 80
            assert [(o.gpu, o.values) for o in profile.overrides] == [
                (2, (("max_mamba_cache_size", 120),))
            ]
            assert dict(profile.server.extra_flags) == {"enable_metrics": True}
            assert profile.engine.sim_speed == SPEED and list(profile.ports) == ports
            assert (profile.log_dir, profile.log_file) == (str(logs), "sglang_gpu{gpu}.log")

            assert status_cli.main([]) == 0
            assert "fleet: 3/3 ready (exit 0)" in capsys.readouterr().out

            with pipeline(tmp_path, fleet.urls, prompts=TOTAL, max_tokens=2000) as run:
                wait_done_at_least(run, 20, timeout=60)
                result = asyncio.run(_roll_out(profile, script_pids))
                assert result.ok, result.describe()
                assert [s.gpus for s in result.steps] == [(0,), (1,), (2,)]
                assert run.proc.poll() in (None, 0), "the pipeline died during the rollout"
                assert run.proc.wait(timeout=120) == 0, run.log.read_text()[-2000:]
                indices = []
                for shard in sorted(run.out.glob("shard-*.jsonl")):
                    lines = shard.read_text().splitlines()
                    indices += [json.loads(line)["index"] for line in lines]
                assert sorted(indices) == list(range(TOTAL)), "every prompt exactly once"
                status = json.loads(run.status.read_text())
                assert status["failed"] == 0 and status["done"] == TOTAL
            # Every adopted server drained through its main pid, none killed.
            kills = [e for e in read_journal().entries if e.type == "rollout-step"]
            assert len(kills) == 3
            state = read_fleet()
            assert {g: s.current_name for g, s in state.items()} == {g: "retuned" for g in range(3)}
            assert {g: s.previous_name for g, s in state.items()} == {g: "mine" for g in range(3)}
            assert not any(r.adopted for r in read_records().values())
    finally:
        stop_all()
        kill_strays(ports)


async def _roll_out(adopted: Profile, script_pids: dict[int, int]) -> RolloutResult:
    """Roll a retuned copy of the adopted profile out; at each GPU's stop, the script's servers
    not yet replaced must still run (one GPU's stop never reaches the shared group)."""
    doc = profile_to_dict(adopted)
    doc["name"] = "retuned"
    doc["server"]["max_running_requests"] = 24
    retuned = profile_from_dict(doc, default_name="retuned")
    save_profile(retuned, paths.user_profiles_dir() / "retuned.toml")
    seen: list[tuple[int, list[int]]] = []

    def on_event(event: object) -> None:
        if isinstance(event, GpuPhase) and event.phase == "stopping":
            left = [g for g in script_pids if g >= event.gpu and running(script_pids[g])]
            seen.append((event.gpu, left))

    options = RolloutOptions(
        batch=1,
        apply=ApplyOptions(timeout_s=60, release_timeout_s=20, measure=False),
        interval_s=0.5,
        baseline_s=2.0,
        settle_s=2.0,
        verdict=VerdictWindows(window_s=0),
    )
    result = await FleetOps().rollout("retuned", 1, on_event=on_event, options=options)
    assert seen == [(0, [0, 1, 2]), (1, [1, 2]), (2, [2])]
    return result


def test_the_first_apply_on_adopted_servers_walks_them_one_gpu_at_a_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`gpufleet apply` of new knobs on two adopted servers: GPU 1 stops only once GPU 0 is
    ready again (the job keeps running on the other); the next apply, on gpufleet's own
    servers, changes them together."""
    ports = free_ports(2)
    servers = [sim_server(g, p, tmp_path / "logs", KNOBS, 40.0) for g, p in enumerate(ports)]
    try:
        with operator_fleet(servers) as fleet:
            assert adopt_cli.main(["--ports", ",".join(map(str, ports)), "--name", "mine"]) == 0
            doc = profile_to_dict(load_named("mine"))
            doc["name"], doc["server"]["max_running_requests"] = "retuned", 24
            save_profile(
                profile_from_dict(doc, default_name="retuned"),
                paths.user_profiles_dir() / "retuned.toml",
            )
            capsys.readouterr()
            assert apply_cli.main(["retuned", *FAST_APPLY]) == 0
            lines = capsys.readouterr().out.splitlines()
            ready_0 = lines.index(next(x for x in lines if x.startswith("GPU 0: READY")))
            stop_1 = next(i for i, x in enumerate(lines) if x.startswith("GPU 1: stopping ("))
            assert ready_0 < stop_1, lines
            assert any(
                x.startswith("throughput: not measured (walked one GPU at a time") for x in lines
            )
            assert "2/2 GPUs ready; profile retuned" in lines
            assert not any(running(pid) for pid in fleet.pids)
            assert not any(r.adopted for r in read_records().values())
            # gpufleet's own servers now: the next apply stops them together.
            assert apply_cli.main(["mine", *FAST_APPLY]) == 0
            lines = capsys.readouterr().out.splitlines()
            first_ready = next(i for i, x in enumerate(lines) if ": READY" in x)
            stop_1 = next(i for i, x in enumerate(lines) if x.startswith("GPU 1: stopping ("))
            assert stop_1 < first_ready, lines
            assert not any("walked one GPU at a time" in x for x in lines)
    finally:
        stop_all()
        kill_strays(ports)

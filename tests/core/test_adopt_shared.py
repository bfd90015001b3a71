"""Two servers on one card, started by the operator's script, adopted and retuned one slot at a
time (issue 35 on a machine lent with one GPU), real processes end to end.

The script (``bench.operator_fleet``: one new session, both servers with
``CUDA_VISIBLE_DEVICES=0``, the second started once the first answers, a log each) starts two
simulated SGLang 0.5.17 servers serving the recorded tiny model on one simulated H100, at
fractions 0.30 and 0.60: the second sizes its pools from what the first left free, as SGLang
does. ``gpufleet adopt`` takes them as GPU 0 and GPU 1 (numbered automatically, each with its
card as its ``device``); ``status`` counts 2/2 ready, both panels read card 0. The retune to
(0.45, 200, 0.6, 64) walks them under ``gpufleet generate`` (every prompt once, nothing lost),
each relaunch planned beside its neighbour's memory; the retune back walks them again under a
client that never stops sending (``load_client``): what it lost is said, exit 3.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from repo_paths import ROOT
from rollout_helpers import pipeline, wait_done_at_least
from sim_helpers import active_requests, wait_until

from bench.operator_fleet import answers, operator_fleet, sim_server
from bench.ports import free_ports
from bench.simfleet import FAST_APPLY, kill_strays, stop_all
from tui import paths
from tui.gpu.sim_records import live_processes
from tui.ops.cli import adopt as adopt_cli
from tui.ops.cli import apply as apply_cli
from tui.ops.cli import status as status_cli
from tui.ops.journal import read_journal
from tui.profiles import flags_for, load_named, profile_from_dict, profile_to_dict, save_profile
from tui.state.fleet_state import read_fleet, read_records

MODEL = ROOT / "tests" / "fixtures" / "real_sglang" / "0.5.17" / "model"
CLIENT = ROOT / "bench" / "real_sglang" / "load_client.py"
SPEED = 20.0
TOTAL = 600
FLAGS = [
    "--sim-build", "0.5.17", "--sim-gpu", "h100", "--sim-model", str(MODEL), "--enable-metrics",
    "--max-mamba-cache-size", "80", "--mamba-full-memory-ratio", "0.4",
]  # fmt: skip
AFTER = {
    "mem_fraction_static": 0.45,
    "max_mamba_cache_size": 200,
    "mamba_full_memory_ratio": 0.6,
    "max_running_requests": 64,
}


def _lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return capsys.readouterr().out.splitlines()


def _walked(lines: list[str]) -> None:
    """GPU 1 stopped only once GPU 0 was ready again."""
    ready_0 = next(i for i, x in enumerate(lines) if x.startswith("GPU 0: READY"))
    stop_1 = next(i for i, x in enumerate(lines) if x.startswith("GPU 1: stopping ("))
    assert ready_0 < stop_1, lines


def test_two_servers_on_one_card_are_adopted_as_two_slots_and_walked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ports = free_ports(2)
    logs = tmp_path / "logs"
    servers = [
        sim_server(0, ports[0], logs, [*FLAGS, "--mem-fraction-static", "0.30"], SPEED,
                   "sglang_{port}.log", wait=True),
        sim_server(0, ports[1], logs, [*FLAGS, "--mem-fraction-static", "0.60"], SPEED,
                   "sglang_{port}.log"),
    ]  # fmt: skip
    try:
        with operator_fleet(servers) as fleet:
            # The second measured the card with the first's memory taken (the driver has both).
            first, second = (s.log.read_text() for s in servers)
            assert "avail mem=79.05 GB" in first and "avail mem=54.13 GB" in second
            assert len(live_processes(paths.sim_gpu_dir(), 0)) == 2  # each one's scheduler

            assert adopt_cli.main(["--ports", f"{ports[0]},{ports[1]}", "--name", "mine"]) == 0
            out = capsys.readouterr().out
            assert (
                f"GPU 1: port {ports[1]} shares device 0 with GPU 0: numbered automatically"
            ) in out
            assert f"GPU 1 (device 0): port {ports[1]}, pid {fleet.pids[1]} (" in out
            assert "not kept: nothing" in out
            profile = load_named("mine")
            assert profile.gpus == (0, 1) and list(profile.ports) == ports
            assert (profile.device_for(0), profile.device_for(1)) == (0, 0)
            knobs = [flags_for(profile, g).mem_fraction_static for g in (0, 1)]
            assert knobs == [0.30, 0.60]
            assert profile.log_file == "sglang_{port}.log"
            assert {g: (r.pid, r.device_index) for g, r in read_records().items()} == {
                0: (fleet.pids[0], 0),
                1: (fleet.pids[1], 0),
            }

            # The script's poll took /model_info's 200; /health answers once warm-up is done.
            assert wait_until(lambda: all(answers(s.url, ("/health",)) for s in servers), 30)
            assert status_cli.main([]) == 0
            assert "fleet: 2/2 ready (exit 0)" in capsys.readouterr().out
            assert status_cli.main(["--json"]) == 0
            rows = json.loads(capsys.readouterr().out)["gpus"]
            assert [(r["gpu"], r["device"], r["state"]) for r in rows] == [
                (0, 0, "ready"),
                (1, 0, "ready"),
            ]
            assert rows[0]["memory_used_bytes"] == rows[1]["memory_used_bytes"]  # one card

            doc = profile_to_dict(profile)
            doc["name"] = "retuned"
            doc["server"].update(AFTER)
            doc["gpu"] = {"1": {"device": 0}}  # the card stays; the knobs are the fleet's
            save_profile(
                profile_from_dict(doc, "retuned"), paths.user_profiles_dir() / "retuned.toml"
            )
            with pipeline(tmp_path, fleet.urls, prompts=TOTAL, max_tokens=600) as run:
                wait_done_at_least(run, 20, timeout=60)
                assert apply_cli.main(["retuned", *FAST_APPLY]) == 0
                lines = _lines(capsys)
                assert run.proc.wait(timeout=180) == 0, run.log.read_text()[-2000:]
                status = json.loads(run.status.read_text())
                assert status["failed"] == 0 and status["done"] == TOTAL
                indices = [
                    json.loads(line)["index"]
                    for shard in sorted(run.out.glob("shard-*.jsonl"))
                    for line in shard.read_text().splitlines()
                ]
                assert sorted(indices) == list(range(TOTAL)), "every prompt exactly once"
            _walked(lines)
            beside = [x for x in lines if x.startswith("preflight GPU")]
            assert "on device 0 beside GPU 1 (" in beside[0], beside
            assert "the driver's reading" in beside[0]
            assert "on device 0 beside GPU 0 (" in beside[1], beside
            assert "its new server, predicted" in beside[1]
            assert "2/2 GPUs ready; profile retuned" in lines
            assert read_journal().entries[-1].lost_in_flight == 0
            state = read_fleet()
            assert {g: (s.current_name, s.device_index) for g, s in state.items()} == {
                0: ("retuned", 0),
                1: ("retuned", 0),
            }

            # gpufleet's own servers now, still sharing the card: walked again, under a client
            # that never stops sending; what the drains lost is said (exit 3).
            _back_under_a_client(tmp_path, ports, capsys)
    finally:
        stop_all()
        kill_strays(ports)


def _back_under_a_client(
    tmp_path: Path, ports: list[int], capsys: pytest.CaptureFixture[str]
) -> None:
    stop = tmp_path / "stop"
    clients = []
    for port in ports:
        out = tmp_path / f"client-{port}.json"
        # Long answers, their starts spread over 3 s (about one answer's time at SPEED): a drain's
        # watchdog that finds every request ended at one of its checks (16 answers ending
        # together, before the client sends again) ends the drain early (seen in CI once GPU 0's
        # walk had taken one answer's time: GPU 1's drain ended, its timeout was not said).
        argv = [sys.executable, str(CLIENT), str(port), str(out), str(stop), "16", "3000", "120"]
        argv += ["0.2"]
        clients.append((subprocess.Popen(argv), out))
    try:
        assert wait_until(lambda: all(active_requests(p) == 16 for p in ports), 30), (
            "not 16 in flight"
        )
        status = apply_cli.main(["mine", *FAST_APPLY, "--drain-timeout", "3"])
        lines = _lines(capsys)
    finally:
        stop.touch()
        for proc, _ in clients:
            try:
                proc.wait(60)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
    lost = [json.loads(out.read_text())["lost"] for _, out in clients]
    assert status == 3, "\n".join(lines)
    assert all(n > 0 for n in lost), lost
    _walked(lines)
    assert any("walked one GPU at a time: GPUs 0,1 share a card" in x for x in lines), lines
    said = [x for x in lines if x.startswith("  old server: drain timed out after 3 s: ")]
    assert len(said) == 4, lines  # each GPU's, under its READY line and its verify line
    entry = read_journal().entries[-1]
    assert entry.type == "apply" and entry.lost_in_flight is not None
    assert 28 <= entry.lost_in_flight <= sum(lost), (entry.lost_in_flight, lost)
    assert "2/2 GPUs ready; profile mine" in "\n".join(lines)

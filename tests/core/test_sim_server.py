"""Real ``gpufleet sim`` processes on loopback: startup lines, endpoints, failures, signals."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest
from sim_helpers import ROOT, running_sim, sim_env, wait_until

from bench.ports import free_port
from tui.gpu.sim_records import live_processes
from tui.sim import cli

SEED = [
    "--mem-fraction-static",
    "0.93",
    "--max-mamba-cache-size",
    "200",
    "--mamba-full-memory-ratio",
    "0.6",
    "--max-running-requests",
    "64",
    "--speculative-algorithm",
    "EAGLE",
    "--sim-gpu",
    "b200",
]
FAST = ["--sim-speed", "100", "--sim-startup-seconds", "1", "--enable-metrics"]


def _run_to_exit(args: list[str], tmp_path: Path) -> tuple[int, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "tui", "sim", "--port", str(free_port()), *args],
        capture_output=True,
        text=True,
        env=sim_env(tmp_path),
        cwd=ROOT,
        timeout=30,
    )
    return proc.returncode, proc.stdout + proc.stderr


def test_seed_build_reproduces_the_seed_story_lines(tmp_path: Path) -> None:
    seed_lines = (ROOT / "tests/fixtures/logs/seed-lines.txt").read_text().splitlines()
    with running_sim([*SEED, *FAST, "--sim-build", "seed"], tmp_path) as sim:
        log = sim.log()
    for line in seed_lines[:3]:  # the Mamba line and both KV lines, character for character
        assert line.split("] ", 1)[1] + "\n" in log, line
    assert "max_total_num_tokens=798080, chunked_prefill_size=16384, m" in log
    assert log.index("Mamba Cache") < log.index("max_running_requests is capped to 40")
    assert "Reserving" not in log


def test_acceptance_0523_startup_lines_in_order_and_serve(tmp_path: Path) -> None:
    with running_sim([*SEED, *FAST], tmp_path) as sim:
        log = sim.log()
        assert (
            "Mamba Cache is allocated. max_mamba_cache_size: 200, conv_state size: 0.55GB, "
            "ssm_state size: 28.27GB intermediate_ssm_state_cache size: 23.06GB "
            "intermediate_conv_window_cache size: 0.23GB \n" in log
        )
        assert log.count("KV Cache is allocated. dtype: torch.bfloat16, #tokens: 796544, ") == 2
        assert "max_running_requests=40," in log and "max_prefill_tokens=16384," in log
        order = [
            log.index(s)
            for s in (
                "server_args=",
                "Memory baseline taken",
                "Load weight begin",
                "Load weight end",
                "Reserving 0.10 GB of the KV budget for post-sizing multimodal allocations",
                "max_running_requests is capped to 40",
                "Mamba Cache",
                "KV Cache is allocated",
                "Memory pool end",
                "CUDA graph begin",
                "CUDA graph end",
                "max_total_num_tokens=",
                "Engine startup timings (s): load_weight=",
                "Started server process",
                "Application startup complete",
                "Uvicorn running on",
                '"GET /model_info HTTP/1.1" 200',
                '"POST /v1/chat/completions HTTP/1.1" 200',
                '"POST /freeze_gc HTTP/1.1" 200',
                "The server is fired up",
            )
        ]
        assert order == sorted(order)

        info = httpx.get(sim.url + "/server_info").json()
        internal = info["internal_states"][0]
        assert internal["effective_max_running_requests_per_dp"] == 40
        assert internal["max_mamba_cache_size"] == 200
        assert info["max_running_requests"] == 64 and info["max_total_num_tokens"] == 796544
        assert (info["status"], info["frontend"], info["version"]) == ("ready", "python", "0.5.23")
        memory = internal["memory_usage"]  # scheduler_components/memory_usage.py
        assert set(memory) == {
            "weight",
            "kvcache",
            "startup_available",
            "token_capacity",
            "token_capacity_swa",
            "graph",
        }
        assert set(memory["graph"]) == {
            "prefill",
            "decode",
            "target_verify",
            "draft_prefill",
            "draft_decode",
            "draft_extend",
        }
        assert memory["graph"]["target_verify"] > 0 and memory["token_capacity"] == 796544
        assert set(info["startup_time"]) >= {"load_weight", "cuda_graph", "tokenizer_e2e"}

        loads = httpx.get(sim.url + "/v1/loads").json()  # v1_loads.py + load_snapshot.py
        assert isinstance(loads["timestamp"], str) and "T" in loads["timestamp"]
        assert (loads["accelerator"], loads["num_accelerators"]) == ("NVIDIA B200", 1)
        load = loads["loads"][0]
        assert load["max_running_requests"] == 40
        assert {"memory", "speculative", "disaggregation", "queues"} <= set(load)
        assert set(load["memory"]) == {"weight_gb", "kv_cache_gb", "graph_gb", "token_capacity"}
        assert set(load["queues"]) == {
            "waiting",
            "grammar",
            "paused",
            "retracted",
            "prealloc_ready",
        }
        assert load["disaggregation"]["mode"] == "null"
        core = httpx.get(sim.url + "/v1/loads", params={"include": "core"}).json()["loads"][0]
        assert "memory" not in core and "num_running_reqs" in core
        assert httpx.get(sim.url + "/v1/loads", params={"include": "nope"}).status_code == 400
        prom = httpx.get(sim.url + "/v1/loads", params={"format": "prometheus"}).text
        assert 'sglang_num_running_reqs{dp_rank="0"}' in prom
        assert 'sglang_memory_token_capacity{dp_rank="0"} 796544' in prom

        mi = httpx.get(sim.url + "/model_info").json()
        assert mi["is_generation"] is True and mi["architectures"]
        assert mi["has_image_understanding"] is True  # Qwen3.6: the warmup sends an image
        models = httpx.get(sim.url + "/v1/models").json()
        assert models["data"][0]["id"] == mi["served_model_name"]
        assert httpx.get(sim.url + "/ready").status_code == 200
        assert httpx.get(sim.url + "/health_generate", timeout=25).status_code == 200

        chat = httpx.post(
            sim.url + "/v1/chat/completions",
            json={"messages": [{"role": "user", "content": "hello"}], "max_tokens": 30},
            timeout=20,
        ).json()
        assert chat["choices"][0]["message"]["content"]
        assert chat["usage"]["completion_tokens"] <= 30
        comp = httpx.post(
            sim.url + "/v1/completions",
            json={"prompt": "x", "max_tokens": 12, "ignore_eos": True},
            timeout=20,
        ).json()
        assert comp["usage"]["completion_tokens"] == 12 and comp["choices"][0]["text"]
        gen = httpx.post(
            sim.url + "/generate",
            json={"text": "hi", "sampling_params": {"max_new_tokens": 8, "ignore_eos": True}},
            timeout=20,
        ).json()
        assert gen["meta_info"]["completion_tokens"] == 8
        stream = httpx.post(
            sim.url + "/v1/chat/completions",
            json={"messages": [{"role": "user", "content": "s"}], "max_tokens": 5, "stream": True},
            timeout=20,
        ).text
        assert stream.rstrip().endswith("data: [DONE]")
        bad = httpx.post(sim.url + "/v1/chat/completions", json={"messages": []})
        assert bad.status_code == 400

        metrics = httpx.get(sim.url + "/metrics").text
        for name in (
            "sglang:num_running_reqs",
            "sglang:num_queue_reqs",
            "sglang:gen_throughput",
            "sglang:token_usage",
            "sglang:mamba_usage",
            "sglang:generation_tokens_total",
            "sglang:prompt_tokens_total",
            "sglang:num_requests_total",
            "sglang:max_total_num_tokens",
            'mode="decode"',
        ):
            assert name in metrics
        assert "sglang:max_running_requests" not in metrics  # no such metric in 0.5.23
        total = [ln for ln in metrics.splitlines() if ln.startswith("sglang:max_total_num_tokens{")]
        assert float(total[0].rsplit(" ", 1)[1]) == 796544
        decode = [
            ln for ln in metrics.splitlines() if ln.startswith("sglang:realtime_tokens_total")
        ]
        assert any('mode="decode"' in ln and float(ln.rsplit(" ", 1)[1]) > 0 for ln in decode)

        # The scheduler child holds the simulated memory; the detokenizer holds none.
        records = live_processes(tmp_path / "simgpu", 0)
        children = {c.name(): c.pid for c in psutil.Process(sim.proc.pid).children()}
        assert set(children) == {"sglang::scheduler", "sglang::detokenizer"}
        assert [r.pid for r in records] == [children["sglang::scheduler"]]
        assert records[0].used_bytes > 150 * 10**9 and records[0].name == "sglang::scheduler"


def test_metrics_absent_without_enable_metrics(tmp_path: Path) -> None:
    with running_sim(
        [
            "--sim-model",
            "llama-8b",
            "--sim-gpu",
            "h100",
            "--sim-speed",
            "100",
            "--sim-startup-seconds",
            "1",
        ],
        tmp_path,
    ) as sim:
        assert httpx.get(sim.url + "/metrics").status_code == 404
        assert "Mamba Cache" not in sim.log()


def test_model_info_answers_before_health(tmp_path: Path) -> None:
    # A startup long enough that the checks below fit in it on a loaded machine (5 s once did not).
    with running_sim([*SEED, "--sim-startup-seconds", "15"], tmp_path, wait_healthy=False) as sim:

        def model_info_up() -> bool:
            try:
                return httpx.get(sim.url + "/model_info", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        assert wait_until(model_info_up, 20, interval=0.02)
        started = time.monotonic()
        assert httpx.get(sim.url + "/health_generate").status_code == 503
        assert time.monotonic() - started < 1.0  # while starting, 503 without a healthy one's 1 s
        assert httpx.get(sim.url + "/ready").status_code == 503
        assert "The server is fired up" not in sim.log()
        assert wait_until(lambda: httpx.get(sim.url + "/ready").status_code == 200, 40)


@pytest.mark.parametrize(
    ("flags", "text"),
    [
        (
            ["--mem-fraction-static", "0.5", "--max-mamba-cache-size", "200"],
            "ValueError: Loaded weights leave no GPU memory for the KV cache",
        ),
        (
            ["--mem-fraction-static", "0.3"],
            "RuntimeError: Not enough GPU memory for hybrid (mamba/linear-attention) state cache.",
        ),
        (
            ["--mem-fraction-static", "0.97", "--max-mamba-cache-size", "200"],
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate",
        ),
        (
            [
                "--mem-fraction-static",
                "0.5",
                "--max-mamba-cache-size",
                "200",
                "--sim-build",
                "seed",
            ],
            "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
            "Current value: mem_fraction_static=0.5",
        ),
    ],
)
def test_impossible_config_dies_like_sglang(tmp_path: Path, flags: list[str], text: str) -> None:
    base = ["--speculative-algorithm", "EAGLE", "--max-running-requests", "64", "--sim-gpu", "b200"]
    code, log = _run_to_exit([*base, *flags, "--sim-startup-seconds", "0.2"], tmp_path)
    # The scheduler's traceback, its SIGQUIT, the launch-phase handler, kill_process_tree: 137.
    assert code == -signal.SIGKILL
    assert text in log
    assert "Scheduler hit an exception: Traceback" in log
    tail = [ln.split("] ", 1)[-1] for ln in log.rstrip().splitlines()[-2:]]
    assert tail[0] == "Received sigquit from a child process. It usually means the child failed."
    pid = re.fullmatch(
        r"kill_process_tree called: parent_pid=(\d+), include_parent=True, pid=(\d+)", tail[1]
    )
    assert pid is not None and pid.group(1) == pid.group(2)
    assert wait_until(lambda: live_processes(tmp_path / "simgpu", 0) == [], 10)


def test_bad_flag_values_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    for bad in (["--mem-fraction-static", "1.5"], ["--sim-gpu", "a100"], ["--port", "x"]):
        with pytest.raises(SystemExit) as exc:
            cli.main(bad)
        assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--mem-fraction-static" in err and "out of range" in err


def test_sigkill_of_the_group_leaves_nothing(tmp_path: Path) -> None:
    with running_sim([*SEED, *FAST], tmp_path) as sim:
        pids = [sim.proc.pid] + [c.pid for c in psutil.Process(sim.proc.pid).children(True)]
        assert len(pids) >= 2
        os.killpg(sim.proc.pid, signal.SIGKILL)
        sim.wait_exit(10)
        assert wait_until(
            lambda: (
                not any(
                    psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE
                    for p in pids
                )
            ),
            10,
        )
        assert live_processes(tmp_path / "simgpu", 0) == []


def test_children_die_with_the_parent_alone(tmp_path: Path) -> None:
    """PR_SET_PDEATHSIG, as kill_itself_when_parent_died: a SIGKILL of the main pid alone."""
    with running_sim([*SEED, *FAST], tmp_path) as sim:
        children = psutil.Process(sim.proc.pid).children()
        assert len(children) == 2
        os.kill(sim.proc.pid, signal.SIGKILL)
        sim.wait_exit(10)
        for child in children:
            child.wait(10)  # raises psutil.TimeoutExpired if it lingers
        assert live_processes(tmp_path / "simgpu", 0) == []

"""Real ``gpufleet sim`` processes on loopback: startup lines, endpoints, failures, signals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import psutil
import pytest
from sim_helpers import ROOT, free_port, running_sim, sim_env, wait_until

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


def test_acceptance_seed_flags_log_allocation_lines_and_serve(tmp_path: Path) -> None:
    with running_sim([*SEED, *FAST], tmp_path) as sim:
        log = sim.log()
        assert (
            "Mamba Cache is allocated. max_mamba_cache_size: 200, conv_state size: 0.55GB, "
            "ssm_state size: 28.27GB intermediate_ssm_state_cache size: 23.06GB "
            "intermediate_conv_window_cache size: 0.45GB \n" in log
        )
        assert log.count("#tokens: 798080") == 2
        assert "max_running_requests is capped to 40" in log
        assert "max_running_requests=40," in log
        order = [
            log.index(s)
            for s in (
                "server_args=",
                "Load weight begin",
                "Load weight end",
                "Mamba Cache",
                "KV Cache is allocated",
                "Memory pool end",
                "CUDA graph begin",
                "CUDA graph end",
                "max_total_num_tokens=",
                "Uvicorn running on",
                "The server is fired up",
            )
        ]
        assert order == sorted(order)

        info = httpx.get(sim.url + "/server_info").json()
        assert info["internal_states"][0]["effective_max_running_requests_per_dp"] == 40
        assert info["internal_states"][0]["max_mamba_cache_size"] == 200
        assert info["max_running_requests"] == 64 and info["max_total_num_tokens"] == 798080
        assert set(info["internal_states"][0]["memory_usage"]) >= {"weight", "kv_cache", "graph"}

        loads = httpx.get(sim.url + "/v1/loads").json()
        assert loads["loads"][0]["max_running_requests"] == 40
        assert {"memory", "speculative", "queues", "token_usage"} <= set(loads["loads"][0])

        mi = httpx.get(sim.url + "/model_info").json()
        assert mi["is_generation"] is True and mi["architectures"]
        models = httpx.get(sim.url + "/v1/models").json()
        assert models["data"][0]["id"] == mi["served_model_name"]
        assert httpx.get(sim.url + "/ready").status_code == 200
        assert httpx.get(sim.url + "/health_generate").status_code == 200

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
            "sglang:num_requests_total",
            "sglang:max_total_num_tokens",
        ):
            assert name in metrics
        total = [ln for ln in metrics.splitlines() if ln.startswith("sglang:max_total_num_tokens{")]
        assert float(total[0].rsplit(" ", 1)[1]) == 798080

        # The scheduler child holds the simulated memory.
        records = live_processes(tmp_path / "simgpu", 0)
        child = psutil.Process(sim.proc.pid).children()
        assert [r.pid for r in records] == [c.pid for c in child]
        assert records[0].used_bytes > 150 * 10**9


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
    with running_sim([*SEED, "--sim-startup-seconds", "5"], tmp_path, wait_healthy=False) as sim:

        def model_info_up() -> bool:
            try:
                return httpx.get(sim.url + "/model_info", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        assert wait_until(model_info_up, 20, interval=0.02)
        assert httpx.get(sim.url + "/health_generate").status_code == 503
        assert httpx.get(sim.url + "/ready").status_code == 503
        assert "The server is fired up" not in sim.log()
        assert wait_until(lambda: httpx.get(sim.url + "/ready").status_code == 200, 20)


@pytest.mark.parametrize(
    ("fraction", "text"),
    [
        (
            "0.5",
            "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
            "Current value: mem_fraction_static=0.5",
        ),
        ("0.3", "ValueError: Loaded weights leave no GPU memory for the KV cache"),
        ("0.97", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate"),
    ],
)
def test_impossible_fraction_fails_like_sglang(tmp_path: Path, fraction: str, text: str) -> None:
    args = [a if a != "0.93" else fraction for a in SEED]
    code, log = _run_to_exit([*args, "--sim-startup-seconds", "0.2"], tmp_path)
    assert code == 1
    assert text in log
    assert "Scheduler hit an exception: Traceback" in log
    assert log.rstrip().endswith(
        "Received sigquit from a child process. It usually means the child failed."
    )
    assert live_processes(tmp_path / "simgpu", 0) == []


def test_bad_flag_values_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    for bad in (["--mem-fraction-static", "1.5"], ["--sim-gpu", "a100"], ["--port", "x"]):
        with pytest.raises(SystemExit) as exc:
            cli.main(bad)
        assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--mem-fraction-static" in err and "out of range" in err


def test_sigterm_drains_in_flight_requests_then_exits_0(tmp_path: Path) -> None:
    with running_sim([*SEED, "--sim-speed", "20", "--sim-startup-seconds", "1"], tmp_path) as sim:
        result: dict[str, object] = {}

        def call() -> None:
            r = httpx.post(
                sim.url + "/v1/completions",
                json={"prompt": "p", "max_tokens": 900, "ignore_eos": True},
                timeout=30,
            )
            result["status"], result["body"] = r.status_code, r.json()

        worker = threading.Thread(target=call)
        worker.start()
        assert wait_until(
            lambda: httpx.get(sim.url + "/v1/loads").json()["loads"][0]["num_running_reqs"] == 1, 10
        )
        os.killpg(sim.proc.pid, signal.SIGTERM)  # the whole group, as the console does
        assert sim.wait_exit(30) == 0
        worker.join(30)
        assert result["status"] == 200
        assert json.dumps(result["body"]).count('"completion_tokens": 900') == 1
        assert "SIGTERM received" in sim.log()
        assert wait_until(lambda: live_processes(tmp_path / "simgpu", 0) == [], 10)


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


def test_child_exits_when_the_parent_alone_is_killed(tmp_path: Path) -> None:
    with running_sim([*SEED, *FAST], tmp_path) as sim:
        child = psutil.Process(sim.proc.pid).children()[0]
        os.kill(sim.proc.pid, signal.SIGKILL)
        sim.wait_exit(10)
        child.wait(10)  # raises psutil.TimeoutExpired if it lingers
        assert not child.is_running() or child.status() == psutil.STATUS_ZOMBIE
        assert live_processes(tmp_path / "simgpu", 0) == []

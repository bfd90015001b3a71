"""Record what a real SGLang server does, scenario by scenario, with the standard library only.

Run on the GPU machine (its own Python, SGLang on ``PYTHONPATH``), not here: each scenario launches
``python -m sglang.launch_server`` with its flags on a loopback port, waits for ``/health``, reads
every endpoint gpufleet reads (timing each), optionally sends load and stops the server the way the
scenario says (SIGTERM to the main pid with requests in flight: the drain; SIGTERM to the group),
and writes what happened under ``OUTDIR/<scenario>/``: ``server.log``, ``endpoints.json``,
``metrics.txt``, ``stop.json``, ``ps.txt``. This is the raw record the harness
(``bench.real_sglang.harness``) and the parser's fixtures are built from.

usage: python explore.py OUTDIR MODEL_DIR SCENARIO[,SCENARIO...] [--budget S]
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

PORT = 30000
BASE_FLAGS = [
    "--load-format", "dummy", "--host", "127.0.0.1", "--port", str(PORT),
    "--attention-backend", "triton", "--sampling-backend", "pytorch",
    "--grammar-backend", "none", "--enable-metrics", "--context-length", "4096",
    "--random-seed", "0", "--log-level", "info",
]  # fmt: skip

# name -> (extra flags, stop mode, in-flight requests at the stop)
SCENARIOS: dict[str, tuple[list[str], str, int]] = {
    # serve.sh's own flags; the drain with 12 requests in flight
    "base": (["--disable-cuda-graph", "--mem-fraction-static", "0.2",
              "--max-running-requests", "16", "--max-mamba-cache-size", "64"], "drain", 12),
    # an explicit pool that caps max_running_requests; the group SIGTERM with 12 in flight
    "cap": (["--disable-cuda-graph", "--mem-fraction-static", "0.3",
             "--max-running-requests", "64", "--max-mamba-cache-size", "32"], "group", 12),
    # everything auto but the fraction
    "auto": (["--disable-cuda-graph", "--mem-fraction-static", "0.25"], "drain", 0),
    # the ratio branch (no explicit pool), a small max running
    "ratio": (["--disable-cuda-graph", "--mem-fraction-static", "0.25",
               "--mamba-full-memory-ratio", "2.0", "--max-running-requests", "8"], "drain", 0),
    "ratio_low": (["--disable-cuda-graph", "--mem-fraction-static", "0.2",
                   "--mamba-full-memory-ratio", "0.3"], "drain", 0),
    # the strategy spelled out, radix cache off
    "noradix": (["--disable-cuda-graph", "--mem-fraction-static", "0.2",
                 "--disable-radix-cache", "--max-running-requests", "24"], "drain", 0),
    "extra": (["--disable-cuda-graph", "--mem-fraction-static", "0.2",
               "--mamba-radix-cache-strategy", "extra_buffer", "--max-mamba-cache-size", "100",
               "--max-running-requests", "48"], "drain", 0),
    # speculative decoding (the model's own MTP layer as the draft, as the seed ran it): the
    # intermediate caches, the seed's knobs scaled down, the cap; and with everything auto
    "spec": (["--disable-cuda-graph", "--mem-fraction-static", "0.25",
              "--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3",
              "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4",
              "--max-mamba-cache-size", "80", "--mamba-full-memory-ratio", "0.4",
              "--mamba-radix-cache-strategy", "extra_buffer", "--max-running-requests", "64"],
             "drain", 8),
    "spec_auto": (["--disable-cuda-graph", "--mem-fraction-static", "0.25",
                   "--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3",
                   "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"],
                  "drain", 0),
    # CUDA graphs on: the capture lines
    "graph": (["--mem-fraction-static", "0.2", "--max-mamba-cache-size", "64",
               "--cuda-graph-max-bs", "16"], "drain", 0),
    # failures: a pool that cannot fit, a fraction that leaves nothing
    "oom_mamba": (["--disable-cuda-graph", "--mem-fraction-static", "0.2",
                   "--max-mamba-cache-size", "2000000"], "none", 0),
    "low_fraction": (["--disable-cuda-graph", "--mem-fraction-static", "0.001"], "none", 0),
    # a plain SIGKILL of the main pid with load: what is left behind
    "kill": (["--disable-cuda-graph", "--mem-fraction-static", "0.2"], "kill", 8),
}  # fmt: skip

ENDPOINTS = [
    "/health", "/health_generate", "/ready", "/model_info", "/server_info", "/get_server_info",
    "/v1/models", "/get_load", "/metrics",
]  # fmt: skip


def call(path: str, body: dict | None = None, timeout: float = 30.0) -> tuple[int, str, float]:
    """(status, text, seconds) of one request; status -1 for a connection error."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(
        f"http://127.0.0.1:{PORT}{path}", data=data, headers={"Content-Type": "application/json"}
    )
    t0 = time.monotonic()
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read().decode(errors="replace"), time.monotonic() - t0
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace"), time.monotonic() - t0
    except Exception as exc:  # recorded, not handled
        return -1, f"{type(exc).__name__}: {exc}", time.monotonic() - t0


def ps_tree(pid: int) -> str:
    out = subprocess.run(
        ["ps", "-eo", "pid,ppid,pgid,sid,stat,etimes,comm,args", "--forest"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    return out.stdout


def gpu_mem() -> str:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=memory.used,memory.total", "--format=csv,noheader"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
    except FileNotFoundError:  # a dry run here, against the simulator
        return "0 MiB, 0 MiB"
    return out.stdout.strip()


def wait_gpu_free(limit_s: float = 60.0) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit_s:
        used = gpu_mem().split(",")[0].strip().split()[0]
        if used.isdigit() and int(used) < 1500:
            break
        time.sleep(0.5)
    return time.monotonic() - t0


def load(results: list[dict], n: int, tokens: int) -> list[threading.Thread]:
    def one(i: int) -> None:
        body = {
            "text": f"Request {i}: tell me a long story about the sea.",
            "sampling_params": {"max_new_tokens": tokens, "ignore_eos": True, "temperature": 0},
        }
        st, text, secs = call("/generate", body, timeout=300)
        got = None
        if st == 200:
            try:
                got = json.loads(text)["meta_info"]["completion_tokens"]
            except (ValueError, KeyError, TypeError):
                got = None
        results.append({"i": i, "status": st, "seconds": round(secs, 2), "tokens": got,
                        "error": None if st == 200 else text[:300]})  # fmt: skip

    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    return threads


def running_now() -> float:
    st, text, _ = call("/metrics", timeout=5)
    if st != 200:
        return -1
    for line in text.splitlines():
        if line.startswith("sglang:num_running_reqs"):
            return float(line.rsplit(" ", 1)[1])
    return -1


def scenario(out: Path, model: str, name: str, py: str) -> dict:
    flags, stop_mode, inflight = SCENARIOS[name]
    d = out / name
    d.mkdir(parents=True, exist_ok=True)
    argv = [py, "-m", "sglang.launch_server", "--model-path", model,
            "--served-model-name", f"tiny-{name}", *BASE_FLAGS, *flags]  # fmt: skip
    (d / "argv.json").write_text(json.dumps(argv))
    rec: dict = {"scenario": name, "argv": argv, "gpu_before": gpu_mem()}
    log = open(d / "server.log", "wb")  # noqa: SIM115 - the server's stdout for its whole life
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    rec["pid"] = proc.pid
    ready = None
    while time.monotonic() - t0 < 420:
        if proc.poll() is not None:
            break
        st, _, _ = call("/health", timeout=3)
        if st == 200:
            ready = time.monotonic() - t0
            break
        time.sleep(0.5)
    rec["ready_s"] = ready
    rec["exit_before_ready"] = proc.poll()
    if ready is None:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
        rec["exit_code"] = proc.returncode
        rec["gpu_after"] = gpu_mem()
        log.close()
        (d / "stop.json").write_text(json.dumps(rec, indent=1))
        return rec
    rec["gpu_ready"] = gpu_mem()
    eps = {}
    for path in ENDPOINTS:
        st, text, secs = call(path, timeout=30)
        eps[path] = {"status": st, "seconds": round(secs, 3), "body": text[:200000]}
    (d / "endpoints.json").write_text(json.dumps(eps, indent=1))
    (d / "metrics_idle.txt").write_text(str(eps["/metrics"]["body"]))
    # a little traffic through both APIs, then the batch lines have something to say
    st, text, secs = call(
        "/generate",
        {"text": "Hello world", "sampling_params": {"max_new_tokens": 64, "temperature": 0}},
    )
    rec["generate"] = {"status": st, "seconds": round(secs, 3), "body": text[:2000]}
    st, text, secs = call(
        "/v1/chat/completions",
        {"model": "x", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 32},
    )
    rec["chat"] = {"status": st, "seconds": round(secs, 3), "body": text[:2000]}
    results: list[dict] = []
    threads: list[threading.Thread] = []
    if inflight:
        threads = load(results, inflight, 3000)
        t1 = time.monotonic()
        while time.monotonic() - t1 < 30 and running_now() < min(inflight, 8):
            time.sleep(0.2)
        time.sleep(2.0)  # let decode lines be written with the batch running
        rec["running_at_stop"] = running_now()
        st, text, _ = call("/metrics", timeout=5)
        (d / "metrics_busy.txt").write_text(text)
        st, text, _ = call("/server_info", timeout=10)
        (d / "server_info_busy.json").write_text(text)
    (d / "ps.txt").write_text(ps_tree(proc.pid))
    rec["stop_mode"] = stop_mode
    ts = time.monotonic()
    if stop_mode == "drain":
        os.kill(proc.pid, signal.SIGTERM)
    elif stop_mode == "group":
        os.killpg(proc.pid, signal.SIGTERM)
    elif stop_mode == "kill":
        os.kill(proc.pid, signal.SIGKILL)
    if stop_mode != "none":
        try:
            proc.wait(180)
        except subprocess.TimeoutExpired:
            rec["stop_timeout"] = True
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
        rec["exit_code"] = proc.returncode
        rec["stop_s"] = round(time.monotonic() - ts, 2)
        time.sleep(1.0)
        rec["ps_after"] = ps_tree(proc.pid)[-3000:]
        # the rest of the group (a plain SIGKILL of the main pid leaves children?)
        left = subprocess.run(["pgrep", "-g", str(proc.pid)], capture_output=True, text=True)
        rec["group_left"] = left.stdout.split()
        for t in threads:
            t.join(60)
        rec["requests"] = sorted(results, key=lambda r: r["i"])
        rec["lost"] = sum(1 for r in results if r["status"] != 200 or r["tokens"] != 3000)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        rec["gpu_release_s"] = round(wait_gpu_free(), 2)
    else:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
        rec["gpu_release_s"] = round(wait_gpu_free(), 2)
    log.close()
    (d / "stop.json").write_text(json.dumps(rec, indent=1))
    return rec


def main() -> int:
    out, model, names = Path(sys.argv[1]), sys.argv[2], sys.argv[3].split(",")
    budget = float(sys.argv[5]) if len(sys.argv) > 5 and sys.argv[4] == "--budget" else 1e9
    py = sys.executable
    t0 = time.monotonic()
    for name in names:
        if time.monotonic() - t0 > budget:
            print(f"skip {name}: budget", flush=True)
            continue
        ts = time.monotonic()
        rec = scenario(out, model, name, py)
        keys = ("ready_s", "exit_code", "stop_s", "lost", "running_at_stop", "gpu_release_s")
        brief = {k: rec.get(k) for k in keys}
        print(f"{name}: {time.monotonic() - ts:.0f}s {json.dumps(brief)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

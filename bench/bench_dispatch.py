"""Pipeline dispatch: requests/s and CPU per request against an endpoint that answers at once.

The endpoint (``bench/peers/instant_openai.py``) runs in its own process pinned to one core; the
client runs in a fresh process pinned to the other core: either the whole pipeline
(``tui.pipeline.runner.Pipeline``: prompt file, dispatcher, shard writer, done record, status
file; no S3) or a bare httpx loop (the same number of workers, each posting a prebuilt body and
reading the answer). The bare loop uses one ``httpx.AsyncClient`` with a pool as large as the
concurrency, the obvious way; the pipeline sends to a plain ``http://`` server through its lean
keep-alive transport (``tui.pipeline.sender``): httpx's pool costs CPU per request in proportion to
the requests it holds (encode/httpx#3215), and its client, pool and h11 cost ~1 ms of CPU a
request even in 8-connection clients (``ClientPool``, now only for https and proxied servers).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from bench.harness import Context, Row, Stat
from bench.ports import free_port

BENCH = "pipeline dispatch"
ROOT = Path(__file__).resolve().parent.parent
CONCURRENCY = 48
"""The seed's per-server in-flight limit."""
_SERVER_CORE, _CLIENT_CORE = 1, 0


def _pin(core: int) -> None:
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > core:
        os.sched_setaffinity(0, {core})


def _wait_listening(port: int, deadline_s: float) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.02)  # startup poll with a deadline
    raise RuntimeError(f"endpoint on port {port} did not listen within {deadline_s} s")


def write_prompts(path: Path, count: int) -> None:
    """``count`` chat prompts, one JSON object per line."""
    with open(path, "w") as handle:
        for i in range(count):
            message = {"role": "user", "content": f"Write a short story about the number {i}."}
            handle.write(json.dumps({"messages": [message]}) + "\n")


async def _pipeline(url: str, prompts: Path, out_dir: Path, count: int) -> None:
    from tui.pipeline.prompts import PromptFile
    from tui.pipeline.runner import GenerateConfig, Pipeline

    config = GenerateConfig(
        prompts=PromptFile.open(prompts),
        out_dir=out_dir,
        servers=(url,),
        status_path=out_dir / "status.json",
        per_server_inflight=CONCURRENCY,
        max_tokens=16,
    )
    code = await Pipeline(config).run()
    if code != 0:
        raise RuntimeError(f"pipeline exited with {code}")


async def _bare(url: str, count: int) -> None:
    import httpx

    body = json.dumps(
        {"model": "default", "messages": [{"role": "user", "content": "Write."}], "max_tokens": 16}
    ).encode()
    headers = {"content-type": "application/json"}
    left = count
    limits = httpx.Limits(max_connections=CONCURRENCY, max_keepalive_connections=CONCURRENCY)
    async with httpx.AsyncClient(limits=limits, timeout=60.0) as client:

        async def worker() -> None:
            nonlocal left
            while left > 0:
                left -= 1
                response = await client.post(
                    url + "/v1/chat/completions", content=body, headers=headers
                )
                if response.status_code != 200:
                    raise RuntimeError(f"HTTP {response.status_code}")

        await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))


def child(kind: str, url: str, count: int, work: Path) -> dict[str, float]:
    """Run one client in this process (pinned); returns wall and CPU seconds."""
    _pin(_CLIENT_CORE)
    prompts = work / "prompts.jsonl"
    if kind == "pipeline":
        write_prompts(prompts, count)
    wall0, cpu0 = time.perf_counter(), time.process_time()
    if kind == "pipeline":
        asyncio.run(_pipeline(url, prompts, work / "out", count))
    else:
        asyncio.run(_bare(url, count))
    return {"wall": time.perf_counter() - wall0, "cpu": time.process_time() - cpu0}


def _run_child(kind: str, url: str, count: int, work: Path) -> dict[str, float]:
    work.mkdir(parents=True)
    env = {**os.environ, "GPUFLEET_STATE_DIR": str(work / "state")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.bench_dispatch", kind, url, str(count), str(work)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    if proc.returncode != 0:
        raise RuntimeError(f"{kind} client failed: {err[-2000:]}")
    result: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return result


def run(ctx: Context) -> list[Row]:
    """Start the endpoint, run both clients alternately, return the rows."""
    count = 500 if ctx.quick else 2000
    runs = 1 if ctx.quick else 3
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "peers" / "instant_openai.py"), str(port)],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > _SERVER_CORE:
            os.sched_setaffinity(server.pid, {_SERVER_CORE})
        _wait_listening(port, 10.0)
        url = f"http://127.0.0.1:{port}"
        results: dict[str, list[dict[str, float]]] = {"pipeline": [], "bare": []}
        for n in range(runs):
            for kind in ("bare", "pipeline"):
                results[kind].append(_run_child(kind, url, count, ctx.scratch / f"disp-{kind}-{n}"))
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGKILL)
        server.wait()
    rps = {k: Stat.of([count / r["wall"] for r in v]) for k, v in results.items()}
    cpu = {k: Stat.of([r["cpu"] / count * 1e6 for r in v]) for k, v in results.items()}
    ratio = rps["pipeline"].median / rps["bare"].median
    peer = f"bare httpx loop ({CONCURRENCY} workers)"
    note = (
        f"{count} requests a run, {CONCURRENCY} in flight, client pinned to core {_CLIENT_CORE}, "
        f"endpoint (raw asyncio) pinned to core {_SERVER_CORE}. The bare loop is one httpx client "
        "with a 48-connection pool; httpx's pool costs CPU per request in proportion to the "
        "requests it holds (encode/httpx#3215). The pipeline sends through its keep-alive "
        "transport (tui.pipeline.sender: a prebuilt request head, the answer read with a few "
        "bytes operations), which is why it beats the obvious loop; its wall includes the run's "
        "start (job files, the health probe) and end (the last shard's fsyncs)"
    )
    return [
        Row(
            BENCH,
            "requests/s on one core",
            rps["pipeline"],
            peer,
            rps["bare"],
            ">= 90% of bare, >= 1,000/s",
            ratio >= 0.9 and rps["pipeline"].median >= 1000,
            note=note,
            higher_is_better=True,
            fmt="{:.0f}",
        ),
        Row(
            BENCH,
            "client CPU per request (µs)",
            cpu["pipeline"],
            peer,
            cpu["bare"],
            "(follows from the rate)",
            None,
            fmt="{:.0f}",
        ),
    ]


if __name__ == "__main__":
    result = child(sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4]))
    print(json.dumps(result))

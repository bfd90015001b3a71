"""A job's acknowledgement of a cordon: what a stop waits for before its SIGTERM.

The pipeline's own dispatch is covered end to end in ``test_ops_drain_lost.py``; here the file
itself (a job that no longer runs is never waited for) and the router's sync (a cordoned worker
leaves the router at once, not at the next one-second round, and the job then says so).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tui.pipeline.router import WorkerSync, servers_source
from tui.servers.procinfo import start_ticks
from tui.state.cordon_acks import AckWriter, senders, wait_acknowledged
from tui.state.cordons import address_of, cordon

A, B = "127.0.0.1:30000", "127.0.0.1:30001"


def test_a_job_that_stopped_sending_is_not_waited_for(tmp_path: Path) -> None:
    writer = AckWriter([A, B], "gpufleet generate", tmp_path)
    try:
        assert [s.sends_to for s in senders(tmp_path)] == [frozenset({A, B})]
        started = time.monotonic()
        silent = wait_acknowledged(A, timeout_s=0.3, directory=tmp_path)
        assert [s.pid for s in silent.silent] == [os.getpid()] and not silent.acknowledged
        assert time.monotonic() - started >= 0.3  # it waited, to its deadline
        assert "did not say it stopped sending" in silent.describe()
        writer.acknowledge([A, "10.0.0.9:1"])  # a server it does not send to is not kept
        assert json.loads(writer.path.read_text())["closed"] == [A]
        done = wait_acknowledged(A, timeout_s=30, directory=tmp_path)
        assert [s.pid for s in done.acknowledged] == [os.getpid()] and not done.silent
        assert done.describe() == f"gpufleet generate (pid {os.getpid()}) stopped sending to it"
        assert wait_acknowledged("127.0.0.1:1", 30, tmp_path).acknowledged == ()  # not its
    finally:
        writer.close()
    assert not writer.path.exists()


def test_the_file_of_a_job_that_no_longer_runs_is_ignored_and_removed(tmp_path: Path) -> None:
    """A job killed -9 leaves its file: its pid is gone (or another process's, with other
    start ticks), so no stop waits for it."""
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], check=True,
                          capture_output=True, text=True)  # fmt: skip
    dead = int(done.stdout)
    reused = {"pid": os.getpid(), "start_ticks": (start_ticks(os.getpid()) or 0) + 1}
    for name, who in (("dead", {"pid": dead, "start_ticks": 1}), ("reused", reused)):
        doc = {"version": 1, **who, "job": "gpufleet generate", "sends_to": [A], "closed": []}
        (tmp_path / f"{name}.json").write_text(json.dumps(doc))
    started = time.monotonic()
    wait = wait_acknowledged(A, timeout_s=30, directory=tmp_path)
    assert wait.silent == () and time.monotonic() - started < 5
    assert list(tmp_path.iterdir()) == []


async def test_a_cordoned_worker_leaves_the_router_at_once_and_the_job_says_so() -> None:
    """The router's sync reconciles once a second; a cordon is looked for every 0.1 s in
    between, so the worker is deregistered (and acknowledged) long before the next round."""
    urls = ["http://127.0.0.1:30000", "http://127.0.0.1:30001"]
    workers: dict[str, str] = {}

    def router(request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/health":
            return httpx.Response(200)
        if path == "/workers" and request.method == "GET":
            listed = [{"url": u, "id": i} for u, i in workers.items()]
            return httpx.Response(200, json={"workers": listed})
        if path == "/workers" and request.method == "POST":
            url = json.loads(request.content)["url"]
            workers[url] = f"w{len(workers)}"
            return httpx.Response(202)
        if path.startswith("/workers/") and request.method == "DELETE":
            gone = path.rsplit("/", 1)[1]
            for url, worker_id in list(workers.items()):
                if worker_id == gone:
                    del workers[url]
            return httpx.Response(200)
        return httpx.Response(404)

    synced: list[frozenset[str]] = []
    async with httpx.AsyncClient(transport=httpx.MockTransport(router)) as client:
        sync = WorkerSync(
            "http://router", servers_source(urls, client), client, on_synced=synced.append
        )
        task = asyncio.create_task(sync.run(interval_s=30.0))
        try:
            for _ in range(200):
                if synced and synced[-1] == frozenset(urls):
                    break
                await asyncio.sleep(0.02)
            assert synced[-1] == frozenset(urls)
            cordon([address_of(urls[1])], "test")
            started = time.monotonic()
            for _ in range(500):
                if synced[-1] == frozenset(urls[:1]):
                    break
                await asyncio.sleep(0.02)
            assert synced[-1] == frozenset(urls[:1]), synced
            assert time.monotonic() - started < 10  # not the 30 s round
            assert set(workers) == {urls[0]}
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

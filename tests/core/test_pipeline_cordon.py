"""The dispatcher honours cordons, and waits out SGLang 0.5.23's slow /health.

The cordon test counts requests where they arrive: at the simulated server, from its /metrics
(finished + running + queued requests = requests it has received).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from pipeline_helpers import (
    ProcessServer,
    generate_argv,
    set_mode,
    sim_server,
    start_generate,
    status_when,
    write_batch,
)

from tui.pipeline.batch_output import output_record
from tui.pipeline.dispatch import HEALTH_TIMEOUT_S, Answer, Dispatcher
from tui.pipeline.prompts import PromptFile
from tui.pipeline.sender import Route
from tui.pipeline.status import PipelineStatus
from tui.state.cordons import CordonWatch, address_of, cordon, uncordon

_ARRIVALS = ("sglang:num_requests_total", "sglang:num_running_reqs", "sglang:num_queue_reqs")


def _metric(text: str, name: str) -> float:
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(name) and line[len(name)] in " {"
    )


def _arrivals(server: ProcessServer) -> int:
    """Requests the server has received: finished + running + queued (one /metrics scrape)."""
    text = httpx.get(server.url + "/metrics", timeout=5).text
    return round(sum(_metric(text, name) for name in _ARRIVALS))


def _aborted(server: ProcessServer) -> int:
    text = httpx.get(server.url + "/metrics", timeout=5).text
    return round(_metric(text, "sglang:num_aborted_requests_total"))


@pytest.fixture
def two_sims() -> Iterator[list[ProcessServer]]:
    """Two simulated servers slow enough (speed 2: ~2 s a request) that a cordon finds work in
    flight at the one it closes."""
    servers = [sim_server(0), sim_server(1)]
    try:
        for server in servers:
            server.argv[server.argv.index("--sim-speed") + 1] = "2"
            server.argv.append("--enable-metrics")
            server.start()
        yield servers
    finally:
        for server in servers:
            server.kill()


def test_a_cordoned_server_gets_nothing_new_and_finishes_what_it_has(
    tmp_path: Path, two_sims: list[ProcessServer]
) -> None:
    a, b = two_sims
    prompts = write_batch(tmp_path / "p.jsonl", [f"q{i}" for i in range(5_000)])
    status_path = tmp_path / "status.json"
    argv = generate_argv(tmp_path, "--prompts", str(prompts), "--server", a.url)
    argv += ["--server", b.url, "--max-tokens", "512", "--per-server-inflight", "8"]
    process = start_generate(argv)

    def status(check: Callable[[PipelineStatus], bool], what: str) -> PipelineStatus:
        return status_when(status_path, process.pid, check, what)

    try:
        status(lambda s: s.servers[1].done > 8 and s.servers[1].in_flight > 0, "b busy")
        cordon([address_of(b.url)], "test: drain b")
        seen = status(lambda s: s.servers[1].cordoned, "the cordon seen")
        assert seen.servers[1].in_flight > 0  # ~2 s requests, the status is written each 1 s
        assert not seen.servers[0].cordoned
        drained = status(lambda s: s.servers[1].in_flight == 0, "b's in-flight requests done")
        # Every request b had in flight when the cordon was seen completed normally there.
        assert drained.servers[1].done == seen.servers[1].done + seen.servers[1].in_flight
        assert drained.servers[1].failed == seen.servers[1].failed == 0
        received = _arrivals(b)
        busy = status(
            lambda s: s.servers[0].done >= drained.servers[0].done + 24, "a working alone"
        )
        assert _arrivals(b) == received  # nothing new reached b
        assert busy.servers[1].done == drained.servers[1].done and busy.servers[1].cordoned
        assert _aborted(b) == 0  # nothing was cut off at b either
        uncordon([address_of(b.url)])
        back = status(
            lambda s: not s.servers[1].cordoned and s.servers[1].done > busy.servers[1].done + 8,
            "b working again",
        )
        assert back.servers[1].healthy and _arrivals(b) > received
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 143
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    final = json.loads(status_path.read_text())
    assert final["state"] == "stopped" and "cordoned" in final["servers"][1]


def _one_server_dispatcher(
    server: ProcessServer,
    prompts: PromptFile,
    on_result: Callable[[Answer], int],
    cordons: CordonWatch | None = None,
) -> Dispatcher:
    """Four in flight to ``server``, no retries: any failure fails the test."""
    return Dispatcher(
        [server.url],
        prompts,
        per_server_inflight=4,
        model="m",
        max_tokens=8,
        max_retries=0,
        on_result=on_result,
        on_failed=lambda *failure: pytest.fail(f"failed: {failure}"),
        cordons=cordons,
    )


async def test_a_slow_health_answer_is_up_not_down(tmp_path: Path, server: ProcessServer) -> None:
    """SGLang 0.5.23's /health takes >= 1 s (it generates a token, then sleeps 1 s): the probe
    waits HEALTH_TIMEOUT_S for it. The fake endpoint answers in 2.5 s, past the old 2 s."""
    assert HEALTH_TIMEOUT_S > 20  # SGLANG_HEALTH_CHECK_TIMEOUT's default
    set_mode(server, "slowhealth")
    prompts = PromptFile.open(write_batch(tmp_path / "p.jsonl", ["a", "b", "c"]))
    results: list[str] = []

    def on_result(answer: Answer) -> int:
        line, tokens = output_record(answer.prompt, 0, answer.content, answer.server, 0, 0)
        results.append(json.loads(line)["custom_id"])
        return tokens

    dispatcher = _one_server_dispatcher(server, prompts, on_result)
    t0 = time.monotonic()
    dispatcher.start_probes()
    assert await dispatcher.wait_any_healthy(15)
    assert time.monotonic() - t0 >= 2.4 and dispatcher.servers[0].last_error == ""
    await asyncio.wait_for(dispatcher.run(iter(range(3)), 3), 30)
    await dispatcher.aclose()
    prompts.close()
    assert sorted(results) == ["a", "b", "c"]


class _CordonedAfter(CordonWatch):
    """The cordon file as a dispatch reads it: ``address`` cordoned from the ``reads``-th read
    of the run on (the stop's cordon landing between two picks of one busy loop pass)."""

    def __init__(self, address: str) -> None:
        super().__init__()
        self.address, self.reads = address, 0
        self.left: int | None = None

    def current(self) -> frozenset[str]:
        self.reads += 1
        if self.left is None or self.reads < self.left:
            return frozenset()
        return frozenset({self.address})


async def test_requests_picked_before_the_cordon_are_not_sent_after_the_job_said_so(
    tmp_path: Path, server: ProcessServer
) -> None:
    """One pass of the dispatch loop picks the server for two prompts (their tasks run later),
    then reads the cordon and tells the stop it sends nothing new there. Those two went out all
    the same, after the acknowledgement: a drain then saw requests arrive (on a loaded machine,
    after its end: SGLang waited for them with its scheduler gone, until the deadline)."""
    prompts = PromptFile.open(write_batch(tmp_path / "p.jsonl", [f"q{i}" for i in range(50)]))
    watch = _CordonedAfter(address_of(server.url))
    dispatcher = _one_server_dispatcher(server, prompts, lambda answer: 1, watch)
    sent_after_ack: list[str] = []
    acknowledged = asyncio.Event()
    real_post = dispatcher._sender.post

    async def post(url: str, route: Route | None, path: str, body: bytes) -> tuple[int, bytes]:
        if acknowledged.is_set():
            sent_after_ack.append(path)
        return await real_post(url, route, path, body)

    def on_closed(closed: frozenset[str]) -> None:
        if watch.address in closed:
            acknowledged.set()

    dispatcher._sender.post = post  # type: ignore[method-assign]  # the test's stand-in
    dispatcher.on_closed = on_closed
    dispatcher.start_probes()
    assert await dispatcher.wait_any_healthy(15)
    watch.left = watch.reads + 3  # two picks, then the cordon
    run = asyncio.create_task(dispatcher.run(iter(range(50)), 50))
    await asyncio.wait_for(acknowledged.wait(), 10)
    for _ in range(20):  # the picked tasks run (and, cordoned, must not send)
        await asyncio.sleep(0.02)
    dispatcher.stop()
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.wait_for(run, 10)
    await dispatcher.aclose()
    prompts.close()
    assert sent_after_ack == []
    assert dispatcher.servers[0].in_flight == 0

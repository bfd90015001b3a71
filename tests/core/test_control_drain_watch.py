"""The drain's progress reads: the server's /metrics over plain loopback HTTP, read cheaply."""

from __future__ import annotations

import ssl
import time
from functools import partial
from typing import Any

import pytest
from servers_helpers import canned_server

from tui.control.drain_watch import DrainProgress, DrainWatch
from tui.state.fleet_state import ProcessRecord


def test_the_drain_watch_reads_running_and_queued_without_loading_a_ca_bundle(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Seven stops start at once, each with its own watch: a client that loaded the CA bundle
    (~0.2 s of CPU, under the GIL) delayed every drain; a loopback /metrics read needs none."""

    def refused(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a CA bundle was loaded for a plain-http loopback read")

    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", refused)
    text = "sglang:num_running_reqs 3\nsglang:num_queue_reqs 2\nsglang:gen_throughput 10\n"
    seen: list[DrainProgress] = []
    with canned_server({"/metrics": (200, "text/plain; version=0.0.4", text)}) as server:
        record = ProcessRecord(
            gpu=4,
            port=server.port,
            pid=1,
            pgid=1,
            create_time=0.0,
            cmdline=(),
            log_path="",
        )
        watch = DrainWatch(record.gpu, record.host, record.port, seen.append, time.monotonic())
        try:
            watch.tick()
            watch.tick()  # within DRAIN_POLL_S: no second read
        finally:
            watch.close()
    assert [(p.gpu, p.stage, p.running, p.queued) for p in seen] == [(4, "draining", 3, 2)]


async def test_every_stop_of_a_large_fleet_runs_at_once() -> None:
    """A stop blocks for its whole drain: ten GPUs' stops all run together (asyncio's default
    pool has cpu_count + 4 threads, and its seventh stop on two cores waited for another to
    end). Each stop here waits for all the others; one left queued would break the barrier."""
    import asyncio
    import threading

    from tui.control.stop_release import StopReleased, in_stop_thread

    gpus = 10
    together = threading.Barrier(gpus, timeout=20)

    def stop(gpu: int) -> StopReleased:
        together.wait()
        return StopReleased(gpu, "done", f"GPU {gpu}: stopped")

    results = await asyncio.gather(*(in_stop_thread(partial(stop, gpu)) for gpu in range(gpus)))
    assert [r.gpu for r in results] == list(range(gpus)) and all(r.ok for r in results)


def test_the_drain_watch_keeps_no_connection_to_the_server_it_stops(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """uvicorn's shutdown waits for every connection it accepted to close, and never tells one it
    accepted as the shutdown began: a watch that kept its connection and read every second held
    the server up until the stop's deadline and its SIGKILL (seen as 'killed' in a two-server
    test). Each read is on a connection of its own that the server closes after the answer."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    monkeypatch.setattr("tui.control.drain_watch.DRAIN_POLL_S", 0.0)
    seen: list[tuple[int, str]] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive unless the client says close

        def do_GET(self) -> None:
            seen.append((self.client_address[1], self.headers.get("Connection", "")))
            data = b"sglang:num_running_reqs 1\n"
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, args=(0.02,), daemon=True).start()
    record = ProcessRecord(
        gpu=0, port=httpd.server_address[1], pid=1, pgid=1, create_time=0.0, cmdline=(), log_path=""
    )
    progress: list[DrainProgress] = []
    watch = DrainWatch(record.gpu, record.host, record.port, progress.append, time.monotonic())
    try:
        for _ in range(3):
            watch.tick()
    finally:
        watch.close()
        httpd.shutdown()
        httpd.server_close()
    assert [p.running for p in progress] == [1, 1, 1]
    assert [header.lower() for _, header in seen] == ["close"] * 3
    assert len({port for port, _ in seen}) == 3  # three connections, none kept


def _exposition(arrived: int, active: int, running: int) -> str:
    """SGLang 0.5.17's families a drain reads: the scheduler's gauges and the HTTP counters
    (the /metrics read itself is counted too, under its own endpoint)."""
    return (
        f'sglang:num_running_reqs{{tp_rank="0"}} {running}\n'
        'sglang:num_queue_reqs{tp_rank="0"} 0\n'
        f'sglang:http_requests_total{{endpoint="/generate",method="POST"}} {arrived}\n'
        'sglang:http_requests_total{endpoint="/metrics",method="GET"} 99\n'
        f'sglang:http_requests_active{{endpoint="/generate",method="POST"}} {active}\n'
        'sglang:http_requests_active{endpoint="/metrics",method="GET"} 1\n'
    )


def test_a_drain_that_times_out_counts_the_arrivals_and_what_the_signal_drops(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before the SIGTERM 10 requests had arrived; a client kept sending (30, then 874): the
    progress says so, and at the deadline the 16 in flight are the ones the group's signal
    drops."""
    monkeypatch.setattr("tui.control.drain_watch.DRAIN_POLL_S", 0.0)
    plain = "text/plain; version=0.0.4"
    replies = [
        (200, plain, _exposition(10, 4, 4)),
        (200, plain, _exposition(30, 16, 16)),
        (200, plain, _exposition(874, 16, 16)),
    ]
    seen: list[DrainProgress] = []
    with canned_server({"/metrics": replies}) as server:
        watch = DrainWatch(0, "127.0.0.1", server.port, seen.append, time.monotonic())
        try:
            watch.begin()
            watch.tick()
            watch.deadline(60.0)
            account = watch.account(drained=False, signalled_in_flight=True)
        finally:
            watch.close()
    assert [(p.stage, p.arrived, p.running) for p in seen] == [
        ("draining", 20, 16),
        ("drain timed out", 864, 16),
    ]
    assert "a client is still sending" in seen[0].describe()
    assert account.timed_out and account.arrived == 864 and account.lost_in_flight == 16
    assert account.timeout_words() == (
        "drain timed out after 60 s: 16 requests running, 864 arrived during the drain"
    )
    assert account.lost_words() == "16 in-flight requests lost"


def test_a_drain_that_ended_lost_nothing_and_an_unreadable_server_is_not_guessed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    plain = "text/plain; version=0.0.4"
    with canned_server({"/metrics": (200, plain, _exposition(10, 4, 4))}) as server:
        watch = DrainWatch(0, "127.0.0.1", server.port, None, time.monotonic())
        watch.begin()
        drained = watch.account(drained=True, signalled_in_flight=False)
        terminated = watch.account(drained=False, signalled_in_flight=True)
        watch.close()
    assert drained.lost_in_flight == 0 and not drained.lost_some
    assert terminated.lost_in_flight == 4  # the group's SIGTERM at once: the 4 in flight
    dead = DrainWatch(0, "127.0.0.1", 9, None, time.monotonic())  # nothing listens on port 9
    dead.begin()
    dead.deadline(5.0)
    unknown = dead.account(drained=False, signalled_in_flight=True)
    dead.close()
    assert unknown.timed_out and unknown.lost_in_flight is None and unknown.lost_some
    assert "how many is unknown" in unknown.lost_words()


def test_what_a_server_accepts_as_it_goes_down_is_lost_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """After the group's signal uvicorn may accept a few more requests for the moment the main
    process takes to die; those are dropped too, and counted (seen: 19 lost, 16 in flight)."""
    monkeypatch.setattr("tui.control.drain_watch.LATE_POLL_S", 0.0)
    plain = "text/plain; version=0.0.4"
    replies = [
        (200, plain, _exposition(10, 4, 4)),
        (200, plain, _exposition(874, 16, 16)),
        (200, plain, _exposition(877, 19, 0)),
    ]
    with canned_server({"/metrics": replies}) as server:
        watch = DrainWatch(0, "127.0.0.1", server.port, None, time.monotonic())
        try:
            watch.begin()
            watch.deadline(60.0)
            watch.tick()  # the group is signalled: it is going down
            account = watch.account(drained=False, signalled_in_flight=True)
        finally:
            watch.close()
    assert account.in_flight_at_deadline == 16 and account.lost_in_flight == 19
    assert account.timeout_words().startswith("drain timed out after 60 s: 16 requests running")


@pytest.mark.parametrize(
    ("during", "still_sending"),
    [
        # (arrived so far, running/in flight) at each read after the SIGTERM
        (((30, 16), (60, 16)), True),  # arrivals in the last interval before the exit
        (((30, 0), (31, 1), (31, 1)), True),  # one came after a reading that found none
        (((30, 16), (30, 0), (30, 0)), False),  # the client stopped before the drain ended
        (((10, 4), (10, 0)), False),  # nothing arrived during the drain
    ],
)
def test_a_drain_that_ended_says_whether_a_client_was_still_sending(
    monkeypatch: pytest.MonkeyPatch, during: tuple[tuple[int, int], ...], still_sending: bool
) -> None:
    """SGLang's drain ends at a check that finds nothing running, and its exit drops what came
    after: the account says a client was still sending when the counter grew in the last
    interval read, or after the latest reading that found nothing in flight."""
    monkeypatch.setattr("tui.control.drain_watch.DRAIN_POLL_S", 0.0)
    plain = "text/plain; version=0.0.4"
    replies = [(200, plain, _exposition(10, 4, 4))]
    replies += [(200, plain, _exposition(arrived, n, n)) for arrived, n in during]
    with canned_server({"/metrics": replies}) as server:
        watch = DrainWatch(0, "127.0.0.1", server.port, None, time.monotonic())  # no sink
        try:
            watch.begin()
            for _ in during:
                watch.tick()
            account = watch.account(drained=True, signalled_in_flight=False)
        finally:
            watch.close()
    assert account.still_sending is still_sending and account.at_risk is still_sending
    assert account.lost_in_flight == 0 and not account.timed_out
    if still_sending:
        assert account.still_sending_words() == (
            f"drain ended while a client was still sending ({account.arrived} arrived during "
            "the drain): requests sent in its last moment may have been lost"
        )

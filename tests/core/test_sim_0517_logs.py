"""``gpufleet sim --sim-build 0.5.17`` against the real SGLang 0.5.17 it imitates.

Each recorded scenario (``tests/fixtures/real_sglang/0.5.17``, flags from ``bench/real_sglang/
explore.py``) is replayed on the simulator with the same flags (parsed with 0.5.17's own flag
table: ``--cuda-graph-max-bs`` included), the same model (its config.json), the same traffic (the
endpoints the recorder read, one ``/generate``, one chat completion, the requests in flight) and
stopped the same way (SIGTERM to the main pid, to the group, SIGKILL, or none). Then:

* the sequence of line kinds (``tui.logs.blocks``: a traceback is one error) and each line's
  fixed text, numbers aside, equal the real log's; left out of the sequence: the batch lines (how
  many depends on timing; their shapes are compared as a set), uvicorn's access lines (the
  recorder removed them), Python's own warnings about its environment, the benign lines of
  ``test_real_0517_logs.BENIGN``, and the simulator's own notes;
* the exit code equals the real one (-9 after a clean drain too), and so does what the requests
  in flight got (all answered in a drain, all lost to a group SIGTERM or a SIGKILL).
"""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from real0517_helpers import REAL, SCENARIOS, running_0517
from sim_helpers import SimProcess

from tui.logs import events as ev
from tui.logs.blocks import read_records
from tui.logs.parser import split_prefix

from .test_real_0517_logs import BENIGN

LEFT_OUT = {ev.DECODE, ev.PREFILL, ev.ACCESS, ev.WARNING}
"""Kinds not in the compared sequence (see the module docstring)."""

COLLAPSED = {ev.PROGRESS, ev.SHUTDOWN}
"""Kinds whose repeats in a row count once (tqdm redraws, the drain's 5 s checks)."""

_SIM_NOTES = re.compile(r"^Simulator: ")


@dataclass
class Run:
    """What the simulator did in one scenario."""

    log: str
    """Its whole log."""
    exit_code: int | None
    """Its exit status."""
    outcomes: list[int | str]
    """What each request in flight got: the HTTP status, or the client's exception name."""


def _template(kind: str, message: str) -> str:
    text = re.sub(r"remaining_rids=\[.*\]", "remaining_rids=[...]", message)
    text = re.sub(r"https?://\S+", "URL", text)
    if kind == ev.PROGRESS:
        text = re.sub(r"\|[^|]*\|", "|BAR|", text)
        text = re.sub(r"\[[^\]]*\]\s*$", "[TIME]", text)
    text = re.sub(r"\d+(?:\.\d+)?(?:e[+-]?\d+)?", "N", text)
    return re.sub(r"\[N(?:, N)*\]", "[N...]", text).strip()


def _key(event: ev.LogEvent) -> str:
    detail = event.get("event") or event.get("stage") or event.get("reason") or ""
    return f"{event.kind}:{detail}" if detail else event.kind


def _compared(log: str) -> tuple[list[tuple[str, str]], set[str]]:
    """(the compared sequence of (kind key, fixed text), the batch lines' fixed texts)."""
    sequence: list[tuple[str, str]] = []
    batches: set[str] = set()
    for record in read_records(log.split("\n")):
        event = record.event
        if event is None:
            continue
        message = split_prefix(event.text)[0]
        if event.kind in (ev.DECODE, ev.PREFILL):
            batches.add(_template(event.kind, message))
        if event.kind in LEFT_OUT:
            continue
        key = _key(event)
        text = "" if event.kind == ev.SERVER_ARGS else _template(event.kind, message)
        if event.kind in COLLAPSED and sequence and sequence[-1][0] == key:
            continue
        sequence.append((key, text))
    return sequence, batches


def _unknown(log: str) -> list[str]:
    return [
        r.text
        for r in read_records(log.split("\n"))
        if r.event is None
        and not r.blank
        and not any(p.search(r.text) for p in BENIGN)
        and not _SIM_NOTES.match(split_prefix(r.text)[0])
    ]


_ENDPOINTS = ["/ready", "/model_info", "/server_info", "/get_server_info", "/v1/models"]
_ENDPOINTS += ["/get_load", "/metrics"]


def _running(url: str) -> float:
    try:
        text = httpx.get(url + "/metrics", timeout=2).text
    except httpx.HTTPError:
        return -1
    found = re.search(r"^sglang:num_running_reqs\{[^}]*\} (\S+)", text, re.M)
    return float(found.group(1)) if found else -1


def _drive(sim: SimProcess, name: str) -> Run:
    """The recorder's traffic and stop (``explore.scenario``), without the two 1 s health reads
    (they print nothing but batch lines)."""
    _, stop, inflight = SCENARIOS[name]
    if not sim.wait_log(r"fired up and ready to roll|Received sigquit", 60):
        raise AssertionError(f"{name}: never ready:\n{sim.log()[-3000:]}")
    outcomes: list[int | str] = []
    if "ready to roll" in sim.log():
        for path in _ENDPOINTS:
            httpx.get(sim.url + path, timeout=10)
        sampling = {"max_new_tokens": 64, "temperature": 0}
        httpx.post(sim.url + "/generate", json={"text": "Hello", "sampling_params": sampling})
        chat = {"model": "x", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 32}
        httpx.post(sim.url + "/v1/chat/completions", json=chat, timeout=10)
        threads = [threading.Thread(target=_one, args=(sim.url, outcomes)) for _ in range(inflight)]
        for thread in threads:
            thread.start()
        info = httpx.get(sim.url + "/server_info", timeout=10).json()
        cap = info["internal_states"][0]["effective_max_running_requests_per_dp"]
        deadline = time.monotonic() + 20
        while inflight and _running(sim.url) < min(inflight, cap) and time.monotonic() < deadline:
            time.sleep(0.05)  # poll with a deadline: the requests reach the scheduler
        if stop == "drain":
            os.kill(sim.proc.pid, signal.SIGTERM)
        elif stop == "group":
            os.killpg(sim.proc.pid, signal.SIGTERM)
        elif stop == "kill":
            os.kill(sim.proc.pid, signal.SIGKILL)
        else:
            os.killpg(sim.proc.pid, signal.SIGKILL)
        code = sim.proc.wait(60)
        for thread in threads:
            thread.join(60)
    else:
        code = sim.proc.wait(60)
    return Run(sim.log(), code, outcomes)


def _one(url: str, outcomes: list[int | str]) -> None:
    body = {
        "text": "Request: tell me a long story about the sea.",
        "sampling_params": {"max_new_tokens": 3000, "ignore_eos": True, "temperature": 0},
    }
    try:
        reply = httpx.post(url + "/generate", json=body, timeout=60)
        got = reply.json()["meta_info"]["completion_tokens"] if reply.status_code == 200 else 0
        outcomes.append(200 if got == 3000 else reply.status_code)
    except httpx.HTTPError as exc:
        outcomes.append(type(exc).__name__)


def _run(name: str, tmp: Path) -> Run:
    # Its own state directory: its own simulated GPU (servers sharing one see each other's
    # memory, and their plans would depend on which started first).
    state = tmp / name
    state.mkdir()
    # At --sim-speed 20 the drain's 5 s checks take 0.25 s, and 3000 tokens of the recorded
    # model still ~2.5 s: requests in flight are so when the stop comes, on a busy machine too.
    with running_0517(name, state, speed=20.0) as sim:
        return _drive(sim, name)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Run]]:
    """Every scenario, four at a time (their waits are the simulator's scaled sleeps)."""
    tmp = tmp_path_factory.mktemp("sim0517")
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = {n: pool.submit(_run, n, tmp) for n in SCENARIOS}
        yield {n: f.result() for n, f in futures.items()}


def _real(name: str) -> str:
    return (REAL / name / "server.log").read_text()


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_the_simulated_0517_log_is_the_real_ones_shape(name: str, runs: dict[str, Run]) -> None:
    run = runs[name]
    real, real_batches = _compared(_real(name))
    sim, sim_batches = _compared(run.log)
    if SCENARIOS[name][1] == "group":
        # The drain's first 5 s check races the watchdog's 1 s tick that finds the scheduler
        # dead (then SIGQUIT blocks the loop): a real server may print a check first too.
        sim = [item for item in sim if item[0] != "shutdown:draining"]
        real = [item for item in real if item[0] != "shutdown:draining"]
    assert sim == real, (
        "\n".join(
            f"{'==' if s == r else '!='} sim {s}\n   real {r}"
            for s, r in zip(sim, real, strict=False)
        )
        + f"\nsim {len(sim)} items, real {len(real)}"
    )
    # Every shape the simulator printed is a real one; the real server printed a health probe's
    # eager one-token prefill too (the recorder read /health; this driver does not).
    assert sim_batches <= real_batches
    assert {b for b in sim_batches if "Decode" in b} == {b for b in real_batches if "Decode" in b}
    assert not _unknown(run.log)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_the_simulated_0517_exit_and_requests_are_the_real_ones(
    name: str, runs: dict[str, Run]
) -> None:
    stop = json.loads((REAL / name / "stop.json").read_text())
    run = runs[name]
    # The recorder SIGKILLed the group of a scenario it did not stop: -9 as well.
    assert run.exit_code == stop.get("exit_code", -9) == -9
    lost = sum(1 for outcome in run.outcomes if outcome != 200)
    assert (len(run.outcomes), lost) == (len(stop.get("requests", [])), stop.get("lost", 0))


def test_the_build_picks_its_releases_flag_table() -> None:
    from tui.sim.build_table import table_version
    from tui.sim.parser import requested_build

    assert requested_build(["--port", "1", "--sim-build", "0.5.17"]) == "0.5.17"
    assert requested_build(["--sim-build=seed", "--sim-build", "0.5.23"]) == "0.5.23"
    assert requested_build(["--port", "1"]) is None
    assert table_version("0.5.17") == "0.5.17"
    assert table_version("seed") == table_version(None) == "0.5.23"

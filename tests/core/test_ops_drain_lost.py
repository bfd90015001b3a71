"""A drain that cannot finish is said; with gpufleet's own job there is nothing to lose.

The simulated server is SGLang 0.5.17's build (``--sim-build 0.5.17``, the recorded tiny model):
a draining server keeps accepting ``/generate``, as the real one did on an H100. The client is
``bench/real_sglang/load_client.py``, the one that measured it there: 16 requests in flight, it
never reads ``/health``. ``gpufleet apply`` with a short drain deadline then loses what is in
flight, and says so: the count on the GPU's line, ``lost_in_flight`` in the journal, exit 3.
Under ``gpufleet generate`` the GPU is cordoned before the SIGTERM: the job sends nothing new,
the drain ends, nothing is lost, exit 0.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from repo_paths import ROOT
from sim_helpers import active_requests, wait_until

from bench.simfleet import FAST_APPLY, free_ports, kill_strays, pipeline, stop_all
from tui.ops.cli import apply as cli
from tui.ops.journal import read_journal

MODEL = ROOT / "tests" / "fixtures" / "real_sglang" / "0.5.17" / "model"
CLIENT = ROOT / "bench" / "real_sglang" / "load_client.py"
FAST = [a for a in FAST_APPLY if a not in ("--term-timeout", "5")]
"""The fast apply's flags without its drain deadline (each test names its own)."""


def profile_0517(
    name: str, port: int, logs: Path, knobs: str, stop: str = "", speed: float = 5
) -> str:
    """One simulated GPU serving the recorded tiny model as SGLang 0.5.17 does."""
    return f"""
name = "{name}"
[engine]
kind = "sim"
sim_gpu = "h100"
sim_model = "{MODEL}"
sim_speed = {speed:g}
[fleet]
gpus = [0]
ports = [{port}]
host = "127.0.0.1"
log_dir = "{logs}"
[server]
model_path = "/tmp/tiny"
{knobs}
[server.extra_flags]
enable_metrics = true
load_format = "dummy"
sim_build = "0.5.17"
{stop}"""


@pytest.fixture()
def fleet(tmp_path: Path) -> Iterator[tuple[int, Path, Path]]:
    """GPU 0 on the seed's first knobs (0.30, 80, 0.4, auto), drained for at most 3 s
    (``[stop] drain_timeout_s``); the retune's profile, (0.45, 200, 0.6, 64), beside."""
    port = free_ports(1)[0]
    logs = tmp_path / "logs"
    before = tmp_path / "before.toml"
    after = tmp_path / "after.toml"
    before.write_text(
        profile_0517(
            "t-before",
            port,
            logs,
            "mem_fraction_static = 0.30\nmax_mamba_cache_size = 80\n"
            "mamba_full_memory_ratio = 0.4\n",
            # How long its servers may drain: the running server's profile says it.
            "[stop]\ndrain_timeout_s = 3\n",
        )
    )
    after.write_text(
        profile_0517(
            "t-after",
            port,
            logs,
            "mem_fraction_static = 0.45\nmax_mamba_cache_size = 200\n"
            "mamba_full_memory_ratio = 0.6\nmax_running_requests = 64\n",
        )
    )
    try:
        assert cli.main([str(before), *FAST, "--drain-timeout", "5"]) == 0
        yield port, before, after
    finally:
        stop_all()
        kill_strays([port])


def test_a_drain_under_a_client_that_never_stops_says_what_it_lost(
    fleet: tuple[int, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port, _, after = fleet
    out, stopfile = tmp_path / "client.json", tmp_path / "stop"
    client = subprocess.Popen(
        [sys.executable, str(CLIENT), str(port), str(out), str(stopfile), "16", "400", "120"]
    )
    try:
        assert wait_until(lambda: active_requests(port) == 16, 30), (
            "the client never had 16 in flight"
        )
        capsys.readouterr()
        status = cli.main([str(after), *FAST])  # the running profile's [stop]: 3 s
        printed = capsys.readouterr().out
        assert client.wait(60) == 0
    finally:
        stopfile.touch()
        if client.poll() is None:
            client.kill()
            client.wait()
    seen = json.loads(out.read_text())
    assert seen["lost"] > 0, seen  # the group's signal dropped what was in flight
    assert status == 3, printed
    entry = read_journal().entries[-1]
    assert entry.type == "apply" and entry.ok  # the new server is ready: the apply happened
    assert entry.lost_in_flight is not None
    # The 16 the server held at the deadline (one may end or begin in that instant), and what
    # it accepted as it went down. The client may lose more: a connection it opens to a dying
    # server sits in the kernel's backlog and is reset, a request the server never saw.
    assert 14 <= entry.lost_in_flight <= seen["lost"], (entry.lost_in_flight, seen)
    assert "a client is still sending" in printed
    assert "drain timed out after 3 s: " in printed
    assert f"{entry.lost_in_flight} in-flight requests lost" in printed
    assert f"drain timed out on GPU 0: {entry.lost_in_flight} in-flight requests lost" in (
        entry.summary
    )
    report = entry.detail["reports"][0]
    assert report["ok"] and report["drain_timed_out"]
    assert report["lost_in_flight"] == entry.lost_in_flight
    assert printed.rstrip().endswith("(exit 3)")


def test_the_same_retune_under_gpufleet_generate_loses_nothing(
    fleet: tuple[int, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port, _, after = fleet
    url = f"http://127.0.0.1:{port}"
    with pipeline(tmp_path, [url], prompts=100_000, max_tokens=400, inflight=16) as job:
        assert wait_until(lambda: active_requests(port) >= 8, 60), job.log.read_text()[-2000:]
        capsys.readouterr()
        status = cli.main([str(after), *FAST, "--drain-timeout", "30"])
        printed = capsys.readouterr().out
    assert status == 0, printed
    entry = read_journal().entries[-1]
    assert entry.ok and entry.lost_in_flight == 0, entry
    report = entry.detail["reports"][0]
    assert report["ok"] and not report["drain_timed_out"] and report["lost_in_flight"] == 0
    assert "lost" not in printed and "timed out" not in printed
    # Cordoned first, and the job said it stopped sending before the SIGTERM.
    assert f"GPU 0: cordoned: gpufleet generate (pid {job.proc.pid}) stopped sending to it" in (
        printed
    )
    assert "a client is still sending" not in printed
    assert "still sending" not in printed and not entry.client_still_sending, entry
    assert entry.arrived_during_drain in (None, 0) and not report["client_still_sending"]


def test_a_drain_that_ends_while_a_client_still_sends_says_requests_may_be_lost(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """SGLang 0.5.17's drain ends at the first check that finds nothing running; one worker
    sending 20-token requests back to back leaves such an instant within a second, so the drain
    ends (no deadline) while the client still sends, and what arrived after that check is
    dropped by the exit: not counted, but said, exit 3."""
    port = free_ports(1)[0]
    logs, before, after = tmp_path / "logs", tmp_path / "before.toml", tmp_path / "after.toml"
    before.write_text(profile_0517("t-before", port, logs, "mem_fraction_static = 0.30", speed=40))
    after.write_text(profile_0517("t-after", port, logs, "mem_fraction_static = 0.45", speed=40))
    out, stopfile = tmp_path / "client.json", tmp_path / "stop"
    client = None
    try:
        assert cli.main([str(before), *FAST, "--drain-timeout", "5"]) == 0
        client = subprocess.Popen(
            [sys.executable, str(CLIENT), str(port), str(out), str(stopfile), "1", "20", "120"]
        )
        assert wait_until(lambda: (active_requests(port) or 0) >= 1, 30), "the client never sent"
        capsys.readouterr()
        # A deadline far past the drain's end: the drain ends by itself (about 0.5 s here).
        status = cli.main([str(after), *FAST, "--drain-timeout", "25"])
        printed = capsys.readouterr().out
        entry = read_journal().entries[-1]
    finally:
        stopfile.touch()
        if client is not None and client.wait(60) is None:
            client.kill()
        stop_all()
        kill_strays([port])
    assert entry.type == "apply" and entry.ok, entry
    assert "drain timed out" not in printed, printed
    assert entry.client_still_sending and entry.arrived_during_drain, entry
    words = (
        f"drain ended while a client was still sending ({entry.arrived_during_drain} arrived "
        "during the drain): requests sent in its last moment may have been lost"
    )
    assert f"  old server: {words}" in printed, printed
    assert "drain on GPU 0 ended while a client was still sending (" in entry.summary
    report = entry.detail["reports"][0]
    assert report["client_still_sending"] and not report["drain_timed_out"], report
    assert report["arrived_during_drain"] == entry.arrived_during_drain
    assert entry.lost_in_flight == 0  # none counted: what the exit dropped has no count
    assert status == 3 and printed.rstrip().endswith("(exit 3)"), printed

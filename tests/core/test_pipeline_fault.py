"""The issue's fault test, against the simulated fleet.

20,000 prompts through three real ``gpufleet sim`` servers while the pipeline is SIGKILLed at
least 20 times and restarted, and simulated servers are SIGKILLed (whole process group) and
relaunched on the same port at least 10 times. Kills follow durable progress in the done
record (it reached a random point past the run's start, then a random short delay), so
they are spread over the whole job rather than bunched at its start. At the end every index
appears exactly once across the uploaded shards, none is missing, the manifest matches the
bucket, and the local and S3 outputs agree.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from pipeline_helpers import (
    BUCKET,
    REPO,
    S3_ENV,
    ProcessServer,
    check_bucket_matches,
    generate_argv,
    s3_args,
    sim_server,
    wait_until,
    write_prompts,
)

from tui.pipeline.done_record import DoneRecord
from tui.pipeline.status import read_status

PROMPTS = 20_000
PIPELINE_KILLS = 20
SERVER_KILLS = 10


@pytest.fixture
def fleet() -> Iterator[list[ProcessServer]]:
    servers = [sim_server(gpu) for gpu in range(3)]
    try:
        for server in servers:
            server.start(wait=False)
        for server in servers:
            server.wait_ready()
        yield servers
    finally:
        for server in servers:
            server.kill()


def _progress(status_path: Path, pid: int) -> int | None:
    """Done count in the status document of run ``pid`` (None before that run wrote one)."""
    status = read_status(status_path)
    return status.done if status is not None and status.pid == pid else None


def _exited(status_path: Path, process: subprocess.Popen[bytes], log: Path) -> str:
    """Why a run ended on its own: exit code, status message and the tail of its stderr."""
    status = read_status(status_path)
    said = status.message if status is not None and status.pid == process.pid else "(no status)"
    tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
    return f"the pipeline exited ({process.returncode}) before being killed: {said}\n{tail}"


def _durable(out: Path) -> int:
    """Indices in the done record now (what a SIGKILL cannot take back)."""
    path = out / "done_record.bin"
    return len(DoneRecord.load(path)) if path.exists() else 0


def _wait_done(
    status_path: Path, process: subprocess.Popen[bytes], target: int, log: Path, out: Path
) -> int:
    """Wait until this run is up (its status document) and ``target`` indices are durable.

    Progress is read from the done record, not the status document: the document is written
    once a second, and on a fast machine a second is ~1,000 prompts, so kills timed by it
    landed ~1,000 past their points, the schedule drifted ahead of the job, and late runs
    found it done. The done record moves with every shard (150 prompts here).
    """
    seen = [0]

    def reached() -> bool:
        assert process.poll() is None, _exited(status_path, process, log)
        if _progress(status_path, process.pid) is None:
            return False  # this run has not started yet
        seen[0] = _durable(out)
        return seen[0] >= target

    wait_until(reached, 60, f"done >= {target} (pid {process.pid})", interval=0.05)
    return seen[0]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_sigkill_storm_loses_and_duplicates_nothing(
    tmp_path: Path, fleet: list[ProcessServer], moto: ProcessServer
) -> None:
    rng = random.Random(int(os.environ.get("GPUFLEET_FAULT_SEED", "20260509")))
    prompts = write_prompts(tmp_path / "p.jsonl", PROMPTS)
    out = tmp_path / "out"
    status_path = tmp_path / "status.json"
    argv = generate_argv(  # writes ``out`` and ``status_path``
        tmp_path,
        "--prompts",
        str(prompts),
        *s3_args(moto.url, "fault"),
        "--shard-size",
        "150",
        "--per-server-inflight",
        # Few in flight: the job must not outrun the kill points (the status document is
        # written once a second; at full speed a run finished between two of them).
        "4",
        "--max-tokens",
        "8",
        "--max-retries",
        "50",
        "--flush-interval",
        "1",
    )
    argv += [arg for server in fleet for arg in ("--server", server.url)]
    env = {**os.environ, **S3_ENV}
    # Which runs also lose a server, and where each run is killed: durable done counts spread
    # evenly (with random jitter) up to ~70% of the job, so the kills cover the job and
    # the final run still has work. Absolute targets absorb each kill's overshoot (a poll,
    # a shard and the random delay), so it does not add up over the runs.
    server_runs = set(rng.sample(range(PIPELINE_KILLS), SERVER_KILLS + 2))
    spacing = PROMPTS * 0.7 / PIPELINE_KILLS
    targets = [int(spacing * (i + 1 + rng.uniform(-0.3, 0.3))) for i in range(PIPELINE_KILLS)]
    kills_at: list[int] = []
    server_kills = 0
    started = time.monotonic()
    for run in range(PIPELINE_KILLS):
        log = tmp_path / f"run-{run}.log"
        with log.open("wb") as stderr:
            process = subprocess.Popen(
                argv, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=stderr
            )
        try:
            base = _wait_done(status_path, process, 0, log, out)
            target = max(targets[run], base + 30)
            if run in server_runs:
                # Kill a server partway through this run, relaunch it on the same port; the
                # pipeline keeps going on the others and takes the relaunched one back.
                _wait_done(status_path, process, rng.randint(base + 1, target), log, out)
                victim = rng.choice(fleet)
                victim.kill()
                server_kills += 1
                # Not waiting for it: the run goes on meanwhile, and a slow start on a busy
                # machine once let it run 5,000 prompts past its kill point (the next run
                # then found 350 left and finished before its own).
                victim.start(wait=False)
            _wait_done(status_path, process, target, log, out)
            # Random fault times are the point here, not a stand-in for synchronisation.
            time.sleep(rng.uniform(0.0, 0.4))
            assert process.poll() is None, _exited(status_path, process, log)
        finally:
            process.kill()  # SIGKILL
            process.wait(timeout=10)
        kills_at.append(len(DoneRecord.load(out / "done_record.bin")))
    for server in fleet:
        server.wait_ready()
    done_before_final = kills_at[-1]
    final = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=200)
    elapsed = time.monotonic() - started
    print(
        f"\nfault test: {len(kills_at)} pipeline SIGKILLs, {server_kills} server kills, "
        f"durable done at each kill {kills_at}, {elapsed:.1f} s in all"
    )
    assert final.returncode == 0, final.stderr[-3000:]
    assert len(kills_at) >= PIPELINE_KILLS and server_kills >= SERVER_KILLS
    # The kills were spread over the job: durable progress grew between them and the last one
    # came well into it, yet before the end.
    assert all(a < b for a, b in itertools.pairwise(kills_at))
    assert PROMPTS // 2 < done_before_final < PROMPTS
    indices = check_bucket_matches(moto, out, "fault", BUCKET)
    counts = Counter(indices)
    assert len(indices) == PROMPTS and sorted(counts) == list(range(PROMPTS))
    assert max(counts.values()) == 1
    assert len(DoneRecord.load(out / "done_record.bin")) == PROMPTS
    urls = {server.url for server in fleet}
    served = Counter(json.loads(line)["server"] for line in _lines(out))
    assert set(served) == urls  # every simulated server did part of the work


def _lines(out: Path) -> Iterator[str]:
    for path in sorted(out.glob("shard-*.jsonl")):
        with open(path) as handle:
            yield from handle

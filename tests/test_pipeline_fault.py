"""The issue's fault test: SIGKILL the pipeline >= 20 times and kill/relaunch servers >= 10 times.

At the end every index appears exactly once across the uploaded shards, the manifest matches the
bucket, and the local and S3 outputs agree. The servers are the loopback OpenAI-compatible test
servers (the simulated SGLang fleet can replace them: any base URL with /health works).
"""

from __future__ import annotations

import os
import random
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from pipeline_helpers import (
    PYTHON,
    REPO,
    S3_ENV,
    ProcessServer,
    check_bucket_matches,
    moto_server,
    openai_server,
    write_prompts,
)

from tui.pipeline.done_record import DoneRecord

PROMPTS = 20_000
PIPELINE_KILLS = 20
SERVER_KILLS = 10
BUCKET = "gpufleet-test"


@pytest.fixture
def fleet() -> Iterator[list[ProcessServer]]:
    servers = [openai_server() for _ in range(3)]
    try:
        for server in servers:
            server.start()
        yield servers
    finally:
        for server in servers:
            server.kill()


@pytest.fixture
def moto(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ProcessServer]:
    for key, value in S3_ENV.items():
        monkeypatch.setenv(key, value)
    srv = moto_server(tmp_path / "moto-recording.jsonl")
    try:
        srv.start()
        boto3.client("s3", endpoint_url=srv.url).create_bucket(Bucket=BUCKET)
        yield srv
    finally:
        srv.kill()


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_sigkill_storm_loses_and_duplicates_nothing(
    tmp_path: Path, fleet: list[ProcessServer], moto: ProcessServer
) -> None:
    rng = random.Random(int(os.environ.get("GPUFLEET_FAULT_SEED", "20260509")))
    prompts = write_prompts(tmp_path / "p.jsonl", PROMPTS)
    out = tmp_path / "out"
    argv = [
        PYTHON,
        "-m",
        "tui",
        "generate",
        "--prompts",
        str(prompts),
        "--out",
        str(out),
        "--status",
        str(tmp_path / "status.json"),
        "--s3-bucket",
        BUCKET,
        "--s3-prefix",
        "fault",
        "--s3-endpoint-url",
        moto.url,
        "--shard-size",
        "150",
        "--per-server-inflight",
        "16",
        "--max-retries",
        "50",
        "--flush-interval",
        "1",
    ]
    argv += [arg for server in fleet for arg in ("--server", server.url)]
    env = {**os.environ, **S3_ENV}
    pipeline_kills = server_kills = 0
    started = time.monotonic()
    while pipeline_kills < PIPELINE_KILLS:
        process = subprocess.Popen(
            argv, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            # Random fault times are the point here, not a stand-in for synchronisation.
            time.sleep(rng.uniform(0.4, 1.6))
            if server_kills < SERVER_KILLS or rng.random() < 0.3:
                victim = rng.choice(fleet)
                victim.kill()
                server_kills += 1
                time.sleep(rng.uniform(0.0, 0.5))
                victim.start()
            time.sleep(rng.uniform(0.0, 0.8))
            assert process.poll() is None, "the pipeline exited before being killed"
        finally:
            process.kill()  # SIGKILL
            process.wait(timeout=10)
        pipeline_kills += 1
    done_before_final = len(DoneRecord.load(out / "done_record.bin"))
    final = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=200)
    elapsed = time.monotonic() - started
    print(
        f"\nfault test: {pipeline_kills} pipeline SIGKILLs, {server_kills} server kills, "
        f"{done_before_final} done before the final run, {elapsed:.1f} s in all"
    )
    assert final.returncode == 0, final.stderr[-3000:]
    assert pipeline_kills >= PIPELINE_KILLS and server_kills >= SERVER_KILLS
    assert 0 < done_before_final < PROMPTS  # the kills really interrupted a run in progress
    indices = check_bucket_matches(moto, out, "fault", BUCKET)
    counts = Counter(indices)
    assert len(indices) == PROMPTS and sorted(counts) == list(range(PROMPTS))
    assert max(counts.values()) == 1
    assert len(DoneRecord.load(out / "done_record.bin")) == PROMPTS

"""One job per S3 prefix, and a resume that trusts content, not sizes (issue 36), against moto's
S3 server on loopback.

The red team started two jobs on one prefix: both ran, the second exited 0 ``all prompts done and
uploaded`` while ``shard-000001.jsonl`` in S3 held the first job's records, and the first retried
its manifest for minutes. Now the prefix's lease (``PREFIX/lease.json``, taken with a conditional
write) lets one job in and refuses the other naming it; a lease left by a run that is gone is
taken over saying so; a lease taken by another job stops the one that lost it; and a resume
re-uploads an object whose content is not the one its manifest lists, whatever its size.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import boto3
import pytest
from pipeline_helpers import (
    BUCKET,
    ProcessServer,
    check_bucket_matches,
    run_generate,
    s3_job_argv,
    set_mode,
    start_generate,
    status_when,
    wait_until,
    write_batch,
)

from tui.pipeline.s3_sink import S3Sink
from tui.pipeline.status import read_status

pytestmark = [pytest.mark.timeout(180)]

OTHER = "e" * 32


def _prompts(tmp_path: Path, count: int) -> Path:
    return write_batch(tmp_path / "prompts.jsonl", [f"q-{i}" for i in range(count)])


def _job(
    root: Path, prompts: Path, server: ProcessServer, moto: ProcessServer, *extra: str
) -> list[str]:
    root.mkdir(exist_ok=True)
    return s3_job_argv(root, prompts, server.url, moto.url, "--shard-size", "100", *extra)


def _plant_lease(moto: ProcessServer, expires_in: float, host: str = "gpu-elsewhere") -> None:
    """Another job's lease, written as a job on another host would (the store's clock is this
    host's: moto on loopback)."""
    now = time.time()
    lease = {
        "schema": 1, "job_id": OTHER, "run_id": "r" * 32, "host": host, "pid": 4242,
        "boot_id": "b", "start_ticks": 1, "started_at": now - 600, "renewed_at": now - 10,
        "expires_at": now + expires_in, "released": False,
    }  # fmt: skip
    s3 = boto3.client("s3", endpoint_url=moto.url)
    s3.put_object(Bucket=BUCKET, Key="job/lease.json", Body=json.dumps(lease).encode())


def _finish(process: subprocess.Popen[str]) -> tuple[int, str]:
    try:
        _, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
    return process.returncode, err


def test_two_jobs_started_together_on_one_prefix_one_is_refused_naming_the_other(
    tmp_path: Path, server: ProcessServer, moto: ProcessServer
) -> None:
    set_mode(server, "slow")  # both run for seconds: they overlap
    prompts = _prompts(tmp_path, 3000)
    jobs = [start_generate(_job(tmp_path / name, prompts, server, moto)) for name in ("a", "b")]
    (rc_a, err_a), (rc_b, err_b) = (_finish(job) for job in jobs)
    assert sorted((rc_a, rc_b)) == [0, 2], (err_a, err_b)
    winner, loser = ("a", "b") if rc_a == 0 else ("b", "a")
    err = err_b if loser == "b" else err_a
    (line,) = [x for x in err.splitlines() if "--s3-prefix" in x]
    won = jobs[0] if winner == "a" else jobs[1]
    job_id = (tmp_path / winner / "out" / "job_id").read_text().strip()
    assert f"held by job {job_id[:12]} (pid {won.pid} on host " in line, line
    assert "one job per prefix" in line and "Traceback" not in err
    assert not list((tmp_path / loser / "out").glob("shard-*"))  # nothing generated
    indices = check_bucket_matches(moto, tmp_path / winner / "out", "job")
    assert sorted(indices) == list(range(3000))


def test_a_live_lease_refuses_and_a_stale_one_is_taken_over_saying_so(
    tmp_path: Path, server: ProcessServer, moto: ProcessServer
) -> None:
    prompts = _prompts(tmp_path, 300)
    _plant_lease(moto, expires_in=100)
    refused = run_generate(_job(tmp_path / "a", prompts, server, moto))
    assert refused.returncode == 2, refused.stderr
    assert f"held by job {OTHER[:12]} (pid 4242 on host gpu-elsewhere" in refused.stderr

    _plant_lease(moto, expires_in=-30)
    done = run_generate(_job(tmp_path / "a", prompts, server, moto))
    assert done.returncode == 0, done.stderr
    took = [x for x in done.stderr.splitlines() if "took over the S3 lease" in x]
    assert len(took) == 1 and f"job {OTHER[:12]} (pid 4242 on host gpu-elsewhere" in took[0]
    assert re.search(r"it expired \d+ s ago", took[0]), took
    check_bucket_matches(moto, tmp_path / "a" / "out", "job")
    lease = json.loads(S3Sink(BUCKET, "job", moto.url).get_bytes("job/lease.json"))
    assert lease["released"] is True and lease["job_id"] != OTHER  # let go at its end


def test_a_sigkilled_run_s_lease_is_taken_over_at_once_by_its_resume(
    tmp_path: Path, server: ProcessServer, moto: ProcessServer
) -> None:
    set_mode(server, "slow")
    prompts = _prompts(tmp_path, 3000)
    argv = _job(tmp_path / "a", prompts, server, moto)
    first = start_generate(argv)
    status_when(tmp_path / "a" / "status.json", first.pid, lambda s: s.uploaded_shards > 0, "up")
    os.kill(first.pid, signal.SIGKILL)
    first.communicate(timeout=30)
    set_mode(server, "ok")
    done = run_generate(argv)
    assert done.returncode == 0, done.stderr
    assert f"its pid {first.pid} on this host is not running" in done.stderr, done.stderr
    assert sorted(check_bucket_matches(moto, tmp_path / "a" / "out", "job")) == list(range(3000))


def test_a_lease_taken_by_another_job_stops_this_one(
    tmp_path: Path, server: ProcessServer, moto: ProcessServer
) -> None:
    set_mode(server, "slow")
    prompts = _prompts(tmp_path, 3000)
    job = start_generate(_job(tmp_path / "a", prompts, server, moto, "--s3-lease-ttl", "5"))
    sink = S3Sink(BUCKET, "job", moto.url)
    wait_until(lambda: sink.read_object("job/lease.json")[0] is not None, 30, "the lease")
    _plant_lease(moto, expires_in=100)  # another job took the prefix (as after an outage)
    rc, err = _finish(job)
    assert rc == 1, err
    failed = [x for x in err.splitlines() if "failed" in x]
    assert len(failed) == 1 and f"taken by job {OTHER[:12]} (pid 4242" in failed[0], err
    status = read_status(tmp_path / "a" / "status.json")
    assert status is not None and status.state == "failed"


def test_a_resume_uploads_again_an_object_of_the_same_size_but_other_content(
    tmp_path: Path, server: ProcessServer, moto: ProcessServer
) -> None:
    """Resume used to compare sizes only: another job's shard of the same name and size passed."""
    prompts = _prompts(tmp_path, 300)
    argv = _job(tmp_path / "a", prompts, server, moto)
    assert run_generate(argv).returncode == 0
    s3 = boto3.client("s3", endpoint_url=moto.url)
    key = "job/shards/shard-000001.jsonl"
    body = s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
    swapped = b"".join(reversed(body.splitlines(keepends=True)))  # same size, other bytes
    assert len(swapped) == len(body) and swapped != body
    s3.put_object(Bucket=BUCKET, Key=key, Body=swapped)
    again = run_generate(argv)
    assert again.returncode == 0, again.stderr
    assert f"{key} is not the object this job uploaded" in again.stderr, again.stderr
    assert sorted(check_bucket_matches(moto, tmp_path / "a" / "out", "job")) == list(range(300))

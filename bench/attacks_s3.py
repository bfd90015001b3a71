"""Issue 36's attacks on one S3 prefix (part of ``bench.attacks --only files``): two jobs started
together on one prefix, an expired lease of another job on it, and a shard rewritten in S3 with
the same size before a resume; against moto's standalone server on loopback."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from bench.attack_jobs import Job, ended, serving, set_mode, start_job
from bench.attack_kit import Row, Workspace
from bench.ports import free_ports

S3_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
}
BUCKET = "gpufleet-attacks"


def _bucket_is(s3: Any, out: Path, prefix: str) -> bool:
    """Every object of the prefix's shards is the local shard of that name, byte for byte."""
    listed = s3.list_objects_v2(Bucket=BUCKET, Prefix=f"{prefix}/shards/")
    keys = sorted(item["Key"] for item in listed.get("Contents", []))
    local = sorted(p.name for p in out.glob("shard-*.jsonl"))
    if [key.rsplit("/", 1)[1] for key in keys] != local or not local:
        return False
    get = s3.get_object
    return all(
        get(Bucket=BUCKET, Key=k)["Body"].read() == (out / k.rsplit("/", 1)[1]).read_bytes()
        for k in keys
    )


def _expired_lease() -> bytes:
    """Another job's lease on another host, run out 80 s ago (moto's clock is this host's)."""
    now = time.time()
    holder = dict(job_id="e" * 32, run_id="r" * 32, host="gpu-x", pid=4242, boot_id="b")
    times = dict(started_at=now - 600, renewed_at=now - 200, expires_at=now - 80)
    return json.dumps({"schema": 1, **holder, "start_ticks": 1, **times}).encode()


def s3_rows(ws: Workspace, url: str) -> list[Row]:
    """Two jobs started together on one prefix; an expired lease of another job; a shard in S3
    rewritten with the same size before a resume."""
    import boto3

    port = free_ports(1)[0]
    moto = f"http://127.0.0.1:{port}"
    argv = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
    env = {**ws.env(), **S3_ENV}
    saved = {key: os.environ.get(key) for key in S3_ENV}
    os.environ.update(S3_ENV)  # the workspace's commands inherit them
    rows: list[Row] = []
    try:
        with serving(argv, f"{moto}/moto-api/", env):
            s3 = boto3.client("s3", endpoint_url=moto)
            s3.create_bucket(Bucket=BUCKET)
            upload = ["--s3-bucket", BUCKET, "--s3-prefix", "two", "--s3-endpoint-url", moto]
            set_mode(url, "slow")
            jobs = [Job(ws, f"s3-{n}", url, *upload) for n in ("a", "b")]
            start = time.monotonic()
            procs = [start_job([sys.executable, "-m", "tui", *j.args], env) for j in jobs]
            runs = [ended(ws, p, j.args, start, 120) for p, j in zip(procs, jobs, strict=True)]
            set_mode(url, "ok")
            codes = sorted(r.rc if r.rc is not None else -1 for r in runs)
            winner = next((j for j, r in zip(jobs, runs, strict=True) if r.rc == 0), None)
            loser = next((r for r in runs if r.rc == 2), runs[1])
            intact = winner is not None and _bucket_is(s3, winner.out, "two")
            ok = codes == [0, 2] and "held by job" in loser.line_with("held") and intact
            said = f"exits {codes}; bucket {'= the winner' if intact else 'MIXED'}"
            rows.append(
                Row(
                    "two jobs started together on one S3 prefix",
                    loser,
                    said,
                    ok,
                    loser.line_with("held"),
                )
            )

            s3.put_object(Bucket=BUCKET, Key="stale/lease.json", Body=_expired_lease())
            stale = ["--s3-bucket", BUCKET, "--s3-prefix", "stale", "--s3-endpoint-url", moto]
            job = Job(ws, "s3-stale", url, *stale)
            run = ws.cli(job.args, timeout=120)
            line = run.line_with("took over the S3 lease")
            ok = run.rc == 0 and "took over the S3 lease of job eeeeeeeeeeee" in line
            rows.append(Row("an expired lease of another job on the prefix", run, "-", ok, line))

            key = "stale/shards/shard-000001.jsonl"
            body = s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
            s3.put_object(Bucket=BUCKET, Key=key, Body=b"".join(reversed(body.splitlines(True))))
            run = ws.cli(job.args, timeout=120)
            intact = _bucket_is(s3, job.out, "stale")
            ok = run.rc == 0 and "is not the object this job uploaded" in run.err and intact
            said = f"bucket {'= local shards' if intact else 'DIFFERS'}"
            label = "a shard in S3 rewritten with the same size, resume"
            rows.append(Row(label, run, said, ok, run.line_with("not the object")))
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return rows

"""S3 robustness: unreachable at start, stale manifest writes, against moto's real server."""

from __future__ import annotations

from pathlib import Path

import pytest
from pipeline_helpers import (
    BUCKET,
    ProcessServer,
    check_bucket_matches,
    read_shards,
    run_generate,
    s3_job_argv,
    start_generate,
    wait_until,
    write_prompts,
)

from bench.ports import free_port
from tui.pipeline.manifest_keeper import ManifestKeeper
from tui.pipeline.s3_sink import ManifestConflict, ManifestEntry, S3Sink, S3Unreachable
from tui.pipeline.status import read_status


def test_s3_down_at_start_generates_then_uploads_when_back(
    tmp_path: Path, server: ProcessServer, moto: ProcessServer
) -> None:
    prompts = write_prompts(tmp_path / "p.jsonl", 1500)
    moto.kill()  # S3's address (the relay in front of moto), closed for now
    process = start_generate(
        s3_job_argv(tmp_path, prompts, server.url, moto.url, "--shard-size", "100")
    )
    try:

        def held_locally() -> bool:
            status = read_status(tmp_path / "status.json")
            return (
                status is not None
                and status.done == 1500
                and status.pending_uploads == 15
                and "S3 unreachable" in status.message
            )

        wait_until(held_locally, 60, "every shard generated and held while S3 is down")
        assert process.poll() is None  # still waiting for S3, not failed
        moto.start()
        _, stderr = process.communicate(timeout=60)
        assert process.returncode == 0, stderr
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert "cannot reach S3" in stderr and "S3 reachable again" in stderr
    assert sorted(check_bucket_matches(moto, tmp_path / "out", "job")) == list(range(1500))


def test_s3_down_past_the_wait_exits_1_keeping_shards(
    tmp_path: Path, server: ProcessServer
) -> None:
    prompts = write_prompts(tmp_path / "p.jsonl", 200)
    closed = f"http://127.0.0.1:{free_port()}"  # nothing listens: connection refused
    result = run_generate(s3_job_argv(tmp_path, prompts, server.url, closed, "--s3-wait", "1"))
    assert result.returncode == 1, result.stderr
    assert "S3 unreachable for 1s" in result.stderr and "run again to upload" in result.stderr
    assert sorted(int(r["index"]) for r in read_shards(tmp_path / "out")) == list(range(200))
    status = read_status(tmp_path / "status.json")
    assert status is not None and status.state == "failed" and status.pending_uploads == 1


def test_bucket_check_tells_unreachable_from_missing(moto: ProcessServer) -> None:
    with pytest.raises(S3Unreachable, match="cannot reach S3"):
        S3Sink(BUCKET, "x", f"http://127.0.0.1:{free_port()}").check_bucket()
    missing = S3Sink("no-such-bucket", "x", moto.url)
    with pytest.raises(Exception, match="the bucket does not exist") as info:
        missing.check_bucket()
    assert not isinstance(info.value, S3Unreachable)


def _entry(name: str) -> ManifestEntry:
    return ManifestEntry(name, f"job/shards/{name}", 1, 0, 0, 10, "0" * 64)


def test_stale_manifest_write_never_replaces_a_newer_one(moto: ProcessServer) -> None:
    sink = S3Sink(BUCKET, "job", moto.url)
    first = sink.write_manifest({"a": _entry("a")}, 1, "run", None)
    second = sink.write_manifest({"a": _entry("a"), "b": _entry("b")}, 2, "run", first)
    with pytest.raises(ManifestConflict):
        sink.write_manifest({"a": _entry("a")}, 2, "run", first)  # a late, stale PUT
    with pytest.raises(ManifestConflict):
        sink.write_manifest({}, 1, "other", None)  # "no manifest yet" is stale too
    now = sink.read_manifest()
    assert now.generation == 2 and now.etag == second and sorted(now.entries) == ["a", "b"]


def test_two_writers_merge_instead_of_losing_entries(moto: ProcessServer) -> None:
    sink = S3Sink(BUCKET, "job", moto.url)
    one, two = ManifestKeeper(), ManifestKeeper()
    one.adopt(sink.read_manifest())
    two.adopt(sink.read_manifest())
    one.add(_entry("shard-000001.jsonl"))
    one.publish(sink)
    two.add(_entry("shard-000002.jsonl"))
    two.publish(sink)  # conflicts with one's write, re-reads, merges, writes generation 2
    now = sink.read_manifest()
    assert now.generation == 2 and now.run_id == two.run_id
    assert sorted(now.entries) == ["shard-000001.jsonl", "shard-000002.jsonl"]
    one.add(_entry("shard-000003.jsonl"))
    one.publish(sink)
    assert sorted(sink.read_manifest().entries) == [f"shard-00000{i}.jsonl" for i in (1, 2, 3)]
    assert sink.read_manifest().generation == 3


def test_a_second_job_on_the_same_prefix_is_refused_before_it_generates(
    tmp_path: Path, server: ProcessServer, moto: ProcessServer
) -> None:
    """Shard names restart at 1 in each output directory: a second --out uploading to the same
    prefix would overwrite the first job's shards. It is refused at start, one line, exit 2;
    the first job resumes on its prefix as before."""
    prompts = write_prompts(tmp_path / "p.jsonl", 300)
    first = tmp_path / "first"
    first.mkdir()
    done = run_generate(s3_job_argv(first, prompts, server.url, moto.url, "--shard-size", "100"))
    assert done.returncode == 0, done.stderr
    before = S3Sink(BUCKET, "job", moto.url).read_manifest()
    assert before.job_id == (first / "out" / "job_id").read_text().strip()

    second = tmp_path / "second"
    second.mkdir()
    refused = run_generate(s3_job_argv(second, prompts, server.url, moto.url))
    assert refused.returncode == 2, refused.stderr
    (line,) = [x for x in refused.stderr.splitlines() if "--s3-prefix" in x]
    assert "--s3-prefix=job:" in line and "another job's outputs" in line
    assert "Traceback" not in refused.stderr
    assert not list((second / "out").glob("shard-*"))  # nothing generated
    after = S3Sink(BUCKET, "job", moto.url).read_manifest()
    assert (after.etag, after.job_id) == (before.etag, before.job_id)  # the first job's, intact

    again = run_generate(s3_job_argv(first, prompts, server.url, moto.url))
    assert again.returncode == 0, again.stderr  # the first job still owns its prefix


def test_a_manifest_from_before_job_ids_is_adopted_and_stamped(moto: ProcessServer) -> None:
    sink = S3Sink(BUCKET, "old", moto.url)
    sink.write_manifest({"a": _entry("a")}, 1, "old-run", None)  # no job id: an older gpufleet
    keeper = ManifestKeeper("f" * 32)
    remote = sink.read_manifest()
    keeper.check_owner(sink, remote)  # not refused
    keeper.adopt(remote)
    keeper.publish(sink)
    assert sink.read_manifest().job_id == "f" * 32

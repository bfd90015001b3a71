"""gpufleet generate end to end: real fake-OpenAI servers, moto's S3 server, real processes."""

from __future__ import annotations

import os
import signal
import subprocess
from collections import Counter
from pathlib import Path

import psutil
from pipeline_helpers import (
    REPO,
    ProcessServer,
    check_bucket_matches,
    generate_argv,
    openai_server,
    read_shards,
    run_generate,
    s3_job_argv,
    set_mode,
    start_generate,
    wait_until,
    write_prompts,
)

from tui.pipeline.detach import start_detached
from tui.pipeline.status import read_status


def test_run_uploads_every_shard_with_manifest(
    tmp_path: Path, server: ProcessServer, moto: ProcessServer
) -> None:
    prompts = write_prompts(tmp_path / "p.jsonl", 1200, {5: "{not json", 9: '{"x": 1}'})
    result = run_generate(
        s3_job_argv(tmp_path, prompts, server.url, moto.url, "--shard-size", "250")
    )
    assert result.returncode == 0, result.stderr
    assert "line 6: not valid JSON" in result.stderr
    assert "line 10: needs 'custom_id', 'url' and 'body'" in result.stderr
    # Serials number the valid prompts: the two bad lines take none.
    indices = check_bucket_matches(moto, tmp_path / "out", "job")
    assert sorted(indices) == list(range(1198))
    status = read_status(tmp_path / "status.json")
    assert status is not None and status.state == "finished"
    assert status.done == status.total == 1198 and status.pending_uploads == 0
    assert status.uploaded_shards == 5
    # A second run resumes with nothing to do and sends no request.
    again = run_generate(s3_job_argv(tmp_path, prompts, server.url, moto.url))
    assert again.returncode == 0 and "0 to generate" in again.stderr


def test_s3_outage_midway_loses_nothing(
    tmp_path: Path, server: ProcessServer, moto: ProcessServer
) -> None:
    prompts = write_prompts(tmp_path / "p.jsonl", 3000)
    status_path = tmp_path / "status.json"
    # 10 ms an answer (~8 s for the job): instant answers finished it before the outage began.
    set_mode(server, "slow")
    process = start_generate(
        s3_job_argv(
            tmp_path,
            prompts,
            server.url,
            moto.url,
            "--shard-size",
            "100",
            "--per-server-inflight",
            "4",
        )
    )
    try:

        def uploaded(n: int) -> bool:
            status = read_status(status_path)
            return status is not None and status.uploaded_shards >= n

        wait_until(lambda: uploaded(2), 60, "two uploads before the outage")
        moto.kill()

        def backlog() -> bool:
            status = read_status(status_path)
            return (
                status is not None and status.pending_uploads >= 3 and "retrying" in status.message
            )

        wait_until(backlog, 60, "uploads failing during the outage")
        moto.start()
        _, stderr = process.communicate(timeout=90)
        assert process.returncode == 0, stderr
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert sorted(check_bucket_matches(moto, tmp_path / "out", "job")) == list(range(3000))


def test_missing_bucket_fails_before_any_request(
    tmp_path: Path, server: ProcessServer, moto: ProcessServer
) -> None:
    prompts = write_prompts(tmp_path / "p.jsonl", 10)
    result = run_generate(
        generate_argv(
            tmp_path,
            "--prompts",
            str(prompts),
            "--server",
            server.url,
            "--s3-bucket",
            "no-such-bucket",
            "--s3-endpoint-url",
            moto.url,
        )
    )
    assert result.returncode == 2
    assert "--s3-bucket=no-such-bucket: the bucket does not exist" in result.stderr
    assert not list((tmp_path / "out").glob("shard-*"))
    status = read_status(tmp_path / "status.json")
    assert status is not None and status.state == "failed"


def test_bad_inputs_get_clear_errors(tmp_path: Path, server: ProcessServer) -> None:
    missing = run_generate(
        generate_argv(tmp_path, "--prompts", str(tmp_path / "nope.jsonl"), "--server", server.url)
    )
    assert missing.returncode == 2 and "nope.jsonl: no such file" in missing.stderr
    prompts = write_prompts(tmp_path / "p.jsonl", 10, {2: "[1, 2]"})
    refused = run_generate(
        generate_argv(
            tmp_path, "--prompts", str(prompts), "--server", server.url, "--on-bad-line", "refuse"
        )
    )
    assert refused.returncode == 2
    assert "line 3: expected a JSON object, got list" in refused.stderr
    bad_option = run_generate(
        generate_argv(
            tmp_path, "--prompts", str(prompts), "--server", server.url, "--shard-size", "0"
        )
    )
    assert bad_option.returncode == 2 and "--shard-size: 0: allowed range 1.." in bad_option.stderr
    dead = openai_server()  # never started
    unreachable = run_generate(
        generate_argv(
            tmp_path, "--prompts", str(prompts), "--server", dead.url, "--fleet-timeout", "1"
        )
    )
    assert unreachable.returncode == 1
    assert "no server answered GET /health with 200 within 1s" in unreachable.stderr
    assert dead.url in unreachable.stderr


def test_sigterm_stops_gracefully_and_resume_completes(
    tmp_path: Path, server: ProcessServer
) -> None:
    prompts = write_prompts(tmp_path / "p.jsonl", 3000)
    status_path = tmp_path / "status.json"
    argv = generate_argv(
        tmp_path,
        "--prompts",
        str(prompts),
        "--server",
        server.url,
        "--shard-size",
        "50",
        "--per-server-inflight",
        "4",
    )
    # 10 ms an answer: at the dispatcher's speed 3,000 instant answers were done before the
    # status file said 300.
    set_mode(server, "slow")
    process = subprocess.Popen(argv, cwd=REPO, stderr=subprocess.PIPE, text=True)
    try:

        def progressed() -> bool:
            status = read_status(status_path)
            return status is not None and status.done >= 300

        wait_until(progressed, 60, "some progress")
        set_mode(server, "hang")  # results in flight now never complete: SIGTERM must cut them
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 143
    status = read_status(status_path)
    assert status is not None and status.state == "stopped" and status.done < 3000
    set_mode(server, "ok")
    result = run_generate(argv)
    assert result.returncode == 0, result.stderr
    counts = Counter(int(r["index"]) for r in read_shards(tmp_path / "out"))
    assert sorted(counts) == list(range(3000)) and max(counts.values()) == 1


def test_detached_pipeline_runs_in_its_own_session(tmp_path: Path, server: ProcessServer) -> None:
    prompts = write_prompts(tmp_path / "p.jsonl", 100)
    set_mode(server, "hang")  # keep it running until we stop it
    pid = start_detached(
        [
            "--prompts",
            str(prompts),
            "--out",
            str(tmp_path / "out"),
            "--server",
            server.url,
            "--status",
            str(tmp_path / "status.json"),
        ],
        tmp_path / "pipeline.log",
        tmp_path / "status.json",
    )
    proc = psutil.Process(pid)
    try:
        assert os.getsid(pid) == pid != os.getsid(0)
        wait_until(
            lambda: (s := read_status(tmp_path / "status.json")) is not None and s.in_flight > 0,
            30,
            "requests in flight",
        )
        os.kill(pid, signal.SIGTERM)
        proc.wait(timeout=30)
    finally:
        if proc.is_running():
            proc.kill()
    status = read_status(tmp_path / "status.json")
    assert status is not None and status.state == "stopped" and status.pid == pid

"""A full disk is an error, not a hang (issue 36).

The red team's run: ``--out`` on a 300 KiB tmpfs; shard 3 hit ENOSPC, the writer task died, the
status said ``running, done 200/2000`` every second for ever and SIGTERM was ignored; ENOSPC on
``failures.jsonl`` gave 1,843 tracebacks, a status of 2,000 failed over a file of 157 lines and a
half, and the next run appended to the half line. Here the same runs, on a real tmpfs in a mount
namespace of the test's own (``bench/in_tmpfs.py``; skipped where mounting is not permitted) and,
needing no root, under ``RLIMIT_FSIZE`` (the file size limit fails a write as a full disk does):
the job stops by itself, ``failed`` with one line naming the file, exit 1; what it counted is
what the files hold, whole lines only; a resume on a disk with room finishes every prompt once.
"""

from __future__ import annotations

import functools
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from pipeline_helpers import (
    REPO,
    S3_ENV,
    ProcessServer,
    read_shards,
    run_generate,
    set_mode,
    write_batch,
)

from bench import in_tmpfs
from tui.pipeline.done_record import DoneRecord
from tui.pipeline.status import read_status

pytestmark = [pytest.mark.timeout(180)]

PROMPTS = 2000
IDS = [f"q-{i}-{'x' * 40}" for i in range(PROMPTS)]
"""Ids long enough that a shard of 200 is ~150 KB: the 300 KiB tmpfs fills at shard 2 or 3."""


needs_tmpfs = pytest.mark.skipif(
    not in_tmpfs.permitted(), reason="mounting a tmpfs in a mount namespace is not permitted here"
)


def _argv(tmp_path: Path, server: ProcessServer, out: Path, *extra: str) -> list[str]:
    prompts = tmp_path / "prompts.jsonl"
    if not prompts.exists():
        write_batch(prompts, IDS)
    argv = [sys.executable, "-m", "tui", "generate", "--prompts", str(prompts), "--out", str(out)]
    argv += ["--status", str(tmp_path / "status.json"), "--server", server.url]
    return [*argv, "--shard-size", "200", *extra]


def _in_tmpfs(
    tmp_path: Path, out: Path, argv: list[str], size: str = "300k"
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` with a tmpfs of ``size`` on ``out``; its files come back in ``out``."""
    out.mkdir(exist_ok=True)
    copy = tmp_path / "copied"
    env = {**os.environ, **S3_ENV}
    done = subprocess.run(
        [*in_tmpfs.wrapper(size, out, copy), *argv],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    shutil.copytree(copy, out, dirs_exist_ok=True)
    return done


def _file_limited(limit: int) -> None:
    """In the child: a file size limit, and EFBIG instead of death by SIGXFSZ past it."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


def _limited(argv: list[str], limit: int) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **S3_ENV}
    return subprocess.run(
        argv,
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=functools.partial(_file_limited, limit),
    )


def _failed_line(done: subprocess.CompletedProcess[str], words: str) -> str:
    """The run's stderr: progress lines, then exactly one line saying it failed."""
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    failed = [line for line in done.stderr.splitlines() if "failed" in line]
    assert len(failed) == 1 and words in failed[0], done.stderr
    return failed[0]


def _resume_finishes_every_prompt_once(tmp_path: Path, server: ProcessServer, out: Path) -> None:
    again = run_generate(_argv(tmp_path, server, out), timeout=120)
    assert again.returncode == 0, again.stderr
    ids = Counter(str(r["custom_id"]) for r in read_shards(out))
    assert set(ids) == set(IDS) and max(ids.values()) == 1


@needs_tmpfs
def test_a_shard_on_a_full_tmpfs_fails_the_job_in_one_line(
    tmp_path: Path, server: ProcessServer
) -> None:
    out = tmp_path / "out"
    done = _in_tmpfs(tmp_path, out, _argv(tmp_path, server, out))
    line = _failed_line(done, f"failed: no space left on {out}/shard-")
    status = read_status(tmp_path / "status.json")
    assert status is not None and status.state == "failed", status
    assert status.message.startswith(f"no space left on {out}/shard-"), status.message
    committed = DoneRecord.load(out / "done_record.bin")
    assert 0 < len(committed) < PROMPTS and status.done == len(committed), (line, status)
    assert sum(1 for _ in read_shards(out)) == len(committed)  # whole shards only
    assert not list(out.glob(".shard-*.tmp"))
    _resume_finishes_every_prompt_once(tmp_path, server, out)


@needs_tmpfs
def test_failures_on_a_full_tmpfs_are_counted_as_the_file_holds_them(
    tmp_path: Path, server: ProcessServer
) -> None:
    set_mode(server, "fail400")
    out = tmp_path / "out"
    done = _in_tmpfs(tmp_path, out, _argv(tmp_path, server, out, "--max-retries", "0"))
    _failed_line(done, f"failed: no space left on {out}/failures.jsonl")
    status = read_status(tmp_path / "status.json")
    data = (out / "failures.jsonl").read_bytes()
    records = [json.loads(line) for line in data.splitlines()]
    assert status is not None and status.state == "failed"
    assert 0 < status.failed == len(records) < PROMPTS and data.endswith(b"\n"), status
    set_mode(server, "ok")
    _resume_finishes_every_prompt_once(tmp_path, server, out)
    assert [json.loads(line) for line in (out / "failures.jsonl").read_bytes().splitlines()]


def test_a_shard_past_the_file_size_limit_fails_the_job_in_one_line(
    tmp_path: Path, server: ProcessServer
) -> None:
    """No root: a shard of 200 records is past a 64 KiB file size limit."""
    out = tmp_path / "out"
    done = _limited(_argv(tmp_path, server, out), 64 << 10)
    _failed_line(done, f"failed: file size limit reached on {out}/shard-000001.jsonl")
    status = read_status(tmp_path / "status.json")
    assert status is not None and status.state == "failed" and status.done == 0, status
    assert not list(out.glob("shard-*")) and not list(out.glob(".shard-*"))
    _resume_finishes_every_prompt_once(tmp_path, server, out)


def test_failures_past_the_file_size_limit_are_whole_and_counted(
    tmp_path: Path, server: ProcessServer
) -> None:
    set_mode(server, "fail400")
    out = tmp_path / "out"
    done = _limited(_argv(tmp_path, server, out, "--max-retries", "0"), 64 << 10)
    _failed_line(done, f"failed: file size limit reached on {out}/failures.jsonl")
    status = read_status(tmp_path / "status.json")
    data = (out / "failures.jsonl").read_bytes()
    assert status is not None and 0 < status.failed == data.count(b"\n"), status
    assert all(json.loads(line)["error"] for line in data.splitlines())


def test_a_torn_last_failure_line_is_cut_off_on_resume(
    tmp_path: Path, server: ProcessServer
) -> None:
    """A run killed mid-append (or an older gpufleet out of space) left half a line: the next
    run says so and appends on a line of its own, so the file stays JSON lines."""
    out = tmp_path / "out"
    out.mkdir()
    whole = b'{"custom_id": "old", "error": {"message": "x"}}\n'
    (out / "failures.jsonl").write_bytes(whole + b'{"custom_id": "torn", "err')
    set_mode(server, "fail400")
    done = run_generate(_argv(tmp_path, server, out, "--max-retries", "0"), timeout=120)
    assert done.returncode == 3, done.stderr
    assert "cut off a torn last line (26 bytes" in done.stderr, done.stderr
    lines = (out / "failures.jsonl").read_bytes().splitlines()
    assert lines[0] == whole.strip() and len(lines) == PROMPTS + 1
    assert all(json.loads(line) for line in lines)

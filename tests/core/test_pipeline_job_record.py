"""The record of a detached job (issue 36): written 0600 in the private state directory, never
through a link; read only when it is this user's own, private, regular file for this very status
document; the job's process is this user's and carries the record's id."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tui import paths
from tui.pipeline.job_record import (
    JOB_ID_ENV,
    JobRecordError,
    job_processes,
    new_record,
    read_record,
    record_file,
    write_record,
)


def test_a_record_is_private_and_read_back(tmp_path: Path) -> None:
    status = tmp_path / "status.json"
    record = new_record(["--prompts", "p.jsonl", "--status", str(status)], status, tmp_path / "l")
    write_record(record)
    path = record_file(status)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(paths.job_records_dir().stat().st_mode) == 0o700
    assert read_record(status) == record
    assert read_record(tmp_path / "other.json") is None


@pytest.mark.parametrize(
    ("spoil", "says"),
    [
        ("link", "is a link: not a job record"),
        ("loose", "is 0644: other users could write it"),
        ("other", "records the job of"),
        ("garbage", "is damaged"),
    ],
)
def test_a_record_that_may_not_be_trusted_is_refused(tmp_path: Path, spoil: str, says: str) -> None:
    status = tmp_path / "status.json"
    record = new_record(["--status", str(status)], status, tmp_path / "log")
    write_record(record)
    path = record_file(status)
    if spoil == "link":
        elsewhere = tmp_path / "planted.json"
        elsewhere.write_text(path.read_text())
        path.unlink()
        path.symlink_to(elsewhere)
    elif spoil == "loose":
        path.chmod(0o644)
    elif spoil == "other":
        write_record(new_record([], tmp_path / "x.json", tmp_path / "log"))
        os.replace(record_file(tmp_path / "x.json"), path)
    else:
        path.write_text("{not json")
    with pytest.raises(JobRecordError, match=says) as refused:
        read_record(status)
    assert "\n" not in str(refused.value)


def test_the_job_is_the_process_that_carries_the_records_id(tmp_path: Path) -> None:
    status = tmp_path / "status.json"
    record = new_record([], status, tmp_path / "log")
    sleeper = [sys.executable, "-c", "import time; time.sleep(60)", "tui", "generate"]
    carrying = subprocess.Popen(sleeper, env={**os.environ, JOB_ID_ENV: record.job_id})
    other = subprocess.Popen(sleeper, env={**os.environ, JOB_ID_ENV: "0" * 32})
    plain = subprocess.Popen(sleeper)
    try:
        assert [p.pid for p in job_processes(record)] == [carrying.pid]
    finally:
        for proc in (carrying, other, plain):
            proc.kill()
            proc.wait(timeout=10)

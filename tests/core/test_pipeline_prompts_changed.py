"""A prompts file rewritten while the job runs stops the job in one line (issue 36).

The red team rewrote the prompts file in place under a running job: 8,271 failure records with
``custom_id ""``, and the run went on. The job now checks every second that its prompts file is
the one it scanned (size, modification time, and the file its name names), and a prompt read back
that is not the one scanned says the same: the job stops (exit 1, ``failed``, one line naming the
file), nothing is recorded as failed for it, and the committed outputs stay.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pipeline_helpers import (
    ProcessServer,
    generate_argv,
    set_mode,
    start_generate,
    status_when,
    write_batch,
)

from tui.pipeline.status import read_status

pytestmark = [pytest.mark.timeout(120)]


@pytest.mark.parametrize("how", ["in place", "replaced"])
def test_a_prompts_file_changed_under_the_job_stops_it(
    tmp_path: Path, server: ProcessServer, how: str
) -> None:
    set_mode(server, "slow")  # 10 ms a request: the job runs for seconds
    prompts = write_batch(tmp_path / "prompts.jsonl", [f"q-{i}" for i in range(3000)])
    argv = generate_argv(tmp_path, "--prompts", str(prompts), "--server", server.url)
    process = start_generate([*argv, "--per-server-inflight", "4", "--shard-size", "50"])
    try:
        status_when(tmp_path / "status.json", process.pid, lambda s: s.done > 0, "a shard")
        other = [json.dumps({"custom_id": f"new-{i}", "prompt": "x" * 50}) for i in range(3000)]
        if how == "in place":  # `cat new > prompts.jsonl`: same file, new bytes
            prompts.write_text("\n".join(other) + "\n")
        else:  # an editor's save: a new file renamed over the name
            (tmp_path / "new.jsonl").write_text("\n".join(other) + "\n")
            (tmp_path / "new.jsonl").rename(prompts)
        _, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
    assert process.returncode == 1, err
    failed = [line for line in err.splitlines() if "failed" in line]
    assert len(failed) == 1 and f"--prompts={prompts}" in failed[0], err
    status = read_status(tmp_path / "status.json")
    assert status is not None and status.state == "failed" and status.failed == 0, status
    assert status.message.startswith(f"--prompts={prompts}"), status.message
    failures = tmp_path / "out" / "failures.jsonl"
    assert not failures.exists() or failures.read_bytes() == b""

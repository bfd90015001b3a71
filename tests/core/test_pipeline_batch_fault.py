"""Exactly once in S3 by ``custom_id``: 10 SIGKILLs of the pipeline, an S3 outage, and a prompts
file edited mid-job (ids inserted and removed) resumed by id.

OpenAI Batch input whose ids are in no particular order; the relay in front of moto's S3 server
on loopback is killed for the outage (moto keeps its buckets, as S3 does), so runs started
during it cannot reach S3 at all. Kills follow durable progress in the done record, as in
``test_pipeline_fault``. At the end the manifest matches the bucket and the local shards, every id
of the final file is in S3 exactly once, and an id removed mid-job at most once.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
from pipeline_helpers import (
    REPO,
    S3_ENV,
    ProcessServer,
    check_bucket_matches,
    generate_argv,
    s3_args,
    set_mode,
    wait_until,
    write_batch,
)

from tui.pipeline.done_record import DoneRecord

PROMPTS = 3000
KILLS = 10
OUTAGE = range(3, 7)
"""Runs started while S3 is down (it goes down during run 3 and comes back before run 7)."""
EDIT_BEFORE = 5
"""The run that starts with the edited prompts file."""


def _durable(out: Path) -> int:
    path = out / "done_record.bin"
    return len(DoneRecord.load(path)) if path.exists() else 0


def _wait_durable(process: subprocess.Popen[bytes], out: Path, target: int, log: Path) -> int:
    seen = [0]

    def reached() -> bool:
        assert process.poll() is None, log.read_text(errors="replace")[-3000:]
        seen[0] = _durable(out)
        return seen[0] >= target

    wait_until(reached, 60, f"{target} durable (pid {process.pid})", interval=0.05)
    return seen[0]


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_sigkills_an_outage_and_an_edit_keep_every_id_exactly_once(
    tmp_path: Path, server: ProcessServer, moto: ProcessServer
) -> None:
    rng = random.Random(int(os.environ.get("GPUFLEET_FAULT_SEED", "20261203")))
    ids = [f"req-{rng.getrandbits(48):012x}" for _ in range(PROMPTS)]
    prompts = write_batch(tmp_path / "p.jsonl", ids)
    out = tmp_path / "out"
    argv = generate_argv(tmp_path, "--prompts", str(prompts), "--server", server.url)
    argv += [*s3_args(moto.url, "batch"), "--resume-by-id", "--shard-size", "40"]
    argv += ["--per-server-inflight", "2", "--flush-interval", "1", "--s3-wait", "120"]
    env = {**os.environ, **S3_ENV}
    # 10 ms an answer: at the dispatcher's speed instant answers finished the job before a kill.
    set_mode(server, "slow")
    spacing = PROMPTS * 0.8 / KILLS
    removed: list[str] = []
    kills_at: list[int] = []
    for run in range(KILLS):
        if run == EDIT_BEFORE:
            # 100 ids not generated yet leave, 200 new ones arrive at random places.
            generated = _generated(out)
            removed = rng.sample([i for i in ids if i not in generated], 100)
            ids = [i for i in ids if i not in set(removed)]
            for n in range(200):
                ids.insert(rng.randrange(len(ids) + 1), f"new-{n:03d}")
            write_batch(prompts, ids)
        log = tmp_path / f"run-{run}.log"
        with log.open("wb") as stderr:
            process = subprocess.Popen(argv, cwd=REPO, env=env, stderr=stderr)
        try:
            base = _wait_durable(process, out, 0, log)
            target = max(int(spacing * (run + 1)), base + 40)
            if run == OUTAGE.start:
                _wait_durable(process, out, (base + target) // 2, log)
                moto.kill()  # S3 goes away in the middle of a run
            if run == OUTAGE.stop:
                moto.start()
            _wait_durable(process, out, target, log)
            time.sleep(rng.uniform(0.0, 0.3))  # a random kill time is the point here
            assert process.poll() is None, log.read_text(errors="replace")[-3000:]
        finally:
            process.kill()  # SIGKILL
            process.wait(timeout=10)
        kills_at.append(_durable(out))
    final = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    print(f"\nbatch fault test: durable at each of {KILLS} SIGKILLs {kills_at}")
    assert final.returncode == 0, final.stderr[-3000:]
    assert kills_at[-1] < len(ids)  # the last kill came before the end
    in_s3 = Counter(check_bucket_matches(moto, out, "batch", field="custom_id"))
    assert max(in_s3.values()) == 1
    assert set(ids) <= set(in_s3) and set(in_s3) <= set(ids) | set(removed)
    # The faults happened: runs started in the outage could not reach S3, the edit was taken.
    logs = [(tmp_path / f"run-{run}.log").read_text() for run in range(KILLS)]
    assert all("cannot reach S3" in logs[run] for run in OUTAGE if run != OUTAGE.start)
    assert "resume by id: 200 new id(s), 100 removed (0 of them done)" in logs[EDIT_BEFORE]


def _generated(out: Path) -> set[str]:
    """The ids in the local shards (a superset of the done ones)."""
    found: set[str] = set()
    for path in out.glob("shard-*.jsonl"):
        with open(path) as handle:
            found.update(json.loads(line)["custom_id"] for line in handle)
    return found

"""Issue 36's attacks on what gpufleet writes: links planted where it writes, directories others
can write, a full disk (a real tmpfs in a mount namespace of its own: ``bench.in_tmpfs``), two
jobs on one S3 prefix (moto's server), a prompts file rewritten under a running job, a 300 MiB
journal, a GPU that left the fleet, a job started with a relative ``--status``. Part of
``bench.attacks`` (``--only files``); ``files_rows`` returns the table's rows.

The job's servers are the pipeline tests' fake OpenAI endpoint
(``tests/helpers/pipeline_endpoint.py``: answers at once, or slowly, or 400 to every prompt), S3 is
moto's standalone server, both on loopback; the fleet rows use the workspace's simulated fleet.
Every process started here is stopped at the end, also on error.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from bench import in_tmpfs
from bench.attack_jobs import (
    ENDPOINT,
    PROMPTS,
    Job,
    answers,
    ended,
    serving,
    set_mode,
    start_job,
    write_prompts,
)
from bench.attack_kit import ROOT, Row, Run, Workspace, alive, poll, started
from bench.attacks_s3 import s3_rows
from bench.ports import free_ports

SECRET = b"root's secret\n"


def _victim(ws: Workspace) -> Path:
    victim = ws.root / "victim"
    victim.write_bytes(SECRET)
    victim.chmod(0o600)
    return victim


def link_rows(ws: Workspace, url: str) -> list[Row]:
    """A link planted where generate writes; an --out under a directory anyone can write."""
    rows: list[Row] = []
    for label, name, link in (
        ("OUT/.gpufleet-generate.lock -> root's 0600 file", ".gpufleet-generate.lock", "sym"),
        ("OUT/failures.jsonl hard-linked to root's 0600 file", "failures.jsonl", "hard"),
    ):
        job = Job(ws, f"link-{link}", url)
        job.out.mkdir(exist_ok=True)
        victim = _victim(ws)
        if link == "sym":
            (job.out / name).symlink_to(victim)
        else:
            os.link(victim, job.out / name)
        run = ws.cli(job.args)
        intact = victim.read_bytes() == SECRET
        ok = run.rc == 2 and len(run.lines) == 1 and intact and not run.traceback
        said = "victim intact" if intact else "VICTIM WRITTEN"
        rows.append(Row(f"link: {label}", run, said, ok))
    shared = ws.root / "shared"
    shared.mkdir(exist_ok=True)
    shared.chmod(0o777)
    job = Job(ws, "shared-job", url)
    job.args[job.args.index("--out") + 1] = str(shared / "out")
    run = ws.cli(job.args)
    made = (shared / "out").exists()
    ok = run.rc == 2 and len(run.lines) == 1 and "writable by" in run.line_with() and not made
    rows.append(Row("--out inside a 0777 directory", run, "made" if made else "nothing made", ok))
    return rows


def _skipped(label: str) -> Row:
    return Row(label, None, "-", True, note="skipped: no tmpfs can be mounted here")


def disk_rows(ws: Workspace, url: str) -> list[Row]:
    """--out on a 300 KiB tmpfs (a shard, then failures.jsonl, hit ENOSPC); a torn failures
    line; the state directory full."""
    labels = (
        "--out on a 300 KiB tmpfs: a shard hits ENOSPC",
        "--out on a 300 KiB tmpfs: failures.jsonl hits ENOSPC",
        "state dir on a full tmpfs: sim-fleet start",
    )
    rows: list[Row] = []
    if not in_tmpfs.permitted():
        rows += [_skipped(label) for label in labels]
    else:
        for label, mode in zip(labels[:2], ("ok", "fail400"), strict=True):
            set_mode(url, mode)
            job = Job(ws, f"disk-{mode}", url, "--max-retries", "0")
            job.out.mkdir(exist_ok=True)
            wrap = in_tmpfs.wrapper("300k", job.out, job.dir / "copied")
            run = ws.cli(job.args, timeout=120, prefix=wrap)
            status = job.status()
            lines = job.failed_lines(run)
            ok = run.rc == 1 and len(lines) == 1 and "no space left on" in lines[0]
            ok = ok and status is not None and status.state == "failed" and not run.traceback
            held = job.dir / "copied" / "failures.jsonl"
            if mode == "fail400" and status is not None:
                data = held.read_bytes() if held.exists() else b""
                ok = ok and status.failed == data.count(b"\n") > 0 and data.endswith(b"\n")
            said = (
                "status -" if status is None else f"status {status.state}, failed {status.failed}"
            )
            rows.append(Row(label, run, said, ok, lines[0] if lines else ""))
        set_mode(url, "ok")
        ws.state.mkdir(mode=0o700, exist_ok=True)
        wrap = in_tmpfs.wrapper("256k", ws.state, ws.root / "state-copy", full=True)
        run = ws.cli(["sim-fleet", "start", "--profile", "atk-base", "--wait", "0"], prefix=wrap)
        launched = ws.servers_on_ports()
        ok = run.rc == 2 and len(run.lines) == 1 and not launched and not run.traceback
        rows.append(Row(labels[2], run, "nothing launched" if not launched else "LAUNCHED", ok))
    set_mode(url, "fail400")
    job = Job(ws, "torn", url, "--max-retries", "0")
    job.out.mkdir(exist_ok=True)
    (job.out / "failures.jsonl").write_bytes(b'{"custom_id": "old"}\n{"custom_id": "to')
    run = ws.cli(job.args, timeout=120)
    set_mode(url, "ok")
    records = (job.out / "failures.jsonl").read_bytes().splitlines()
    whole = all(_json(line) for line in records) and len(records) == PROMPTS + 1
    ok = run.rc == 3 and "cut off a torn last line" in run.err and whole and not run.traceback
    label = "failures.jsonl ends in half a line, next run"
    rows.append(
        Row(label, run, f"{len(records)} lines, all JSON: {whole}", ok, run.line_with("torn"))
    )
    return rows


def _json(line: bytes) -> bool:
    try:
        json.loads(line)
    except ValueError:
        return False
    return True


def prompts_row(ws: Workspace, url: str) -> Row:
    """The prompts file rewritten in place (``cat new > prompts.jsonl``) while the job runs."""
    set_mode(url, "slow")
    prompts = write_prompts(ws.root / "rewritten.jsonl", 3000)
    job = Job(ws, "rewrite", url, "--per-server-inflight", "4", "--shard-size", "50")
    job.args[job.args.index("--prompts") + 1] = str(prompts)
    start = time.monotonic()
    proc = start_job([sys.executable, "-m", "tui", *job.args], ws.env())
    try:
        poll(lambda: (s := job.status()) is not None and s.pid == proc.pid and s.done > 0, 30)
        prompts.write_text("".join(f'{{"prompt": "other {i}"}}\n' for i in range(3000)))
        run = ended(ws, proc, job.args, start, 60)
    finally:
        set_mode(url, "ok")
    failures = job.out / "failures.jsonl"
    recorded = failures.read_bytes().count(b"\n") if failures.exists() else 0
    lines = job.failed_lines(run)
    ok = run.rc == 1 and len(lines) == 1 and "while the job ran" in lines[0]
    ok = ok and recorded == 0 and not run.traceback
    said = f"{recorded} failure records"
    return Row(
        "prompts rewritten in place under a running job", run, said, ok, lines[0] if lines else ""
    )


def journal_row(ws: Workspace) -> Row:
    """A journal of 300 MiB (sparse, its entries at the end): gpufleet journal."""
    ws.state.mkdir(mode=0o700, exist_ok=True)
    journal = ws.state / "journal.jsonl"
    with journal.open("wb") as handle:
        handle.truncate(300 << 20)
        handle.seek(300 << 20)
        for n in range(5):
            entry = {"schema": 2, "type": "kill", "started_at": 1.0 + n, "finished_at": 2.0 + n,
                     "ok": True, "gpus": [0], "by": "attack", "summary": f"entry {n}"}  # fmt: skip
            handle.write(b"\n" + json.dumps(entry).encode())
        handle.write(b"\n")
    journal.chmod(0o600)
    run = ws.cli(["journal", "--last", "3"], timeout=60)
    journal.unlink()
    ok = run.rc == 0 and "entry 4" in run.out and "newest 256 MiB were read" in run.err
    return Row("journal.jsonl of 300 MiB", run, "-", ok and not run.traceback, run.line_with("MiB"))


def forget_rows(ws: Workspace) -> list[Row]:
    """A GPU whose server runs cannot be forgotten; one stopped for good can, and status then
    judges the rest."""
    up = ws.up()
    if up.rc != 0:
        return [Row("fleet forget: fleet up", up, "-", False, note="the fleet did not start")]
    pid = int((ws.server(1) or {}).get("pid", 0))
    run = ws.cli(["fleet", "forget", "1"])
    ok = run.rc == 2 and len(run.lines) == 1 and alive(pid) and "stop it first" in run.line_with()
    rows = [
        Row(
            "fleet forget a GPU whose server runs",
            run,
            f"server {'alive' if alive(pid) else 'GONE'}",
            ok,
        )
    ]
    ws.cli(["sim-fleet", "stop", "--gpus", "1", "--mode", "kill"])
    before = ws.cli(["status"]).rc
    run = ws.cli(["fleet", "forget", "1"])
    after = ws.cli(["status"]).rc
    ok = before == 1 and run.rc == 0 and after == 0 and not run.traceback
    rows.append(Row("a GPU stopped for good: fleet forget", run, f"status {before} -> {after}", ok))
    return rows


def relative_status_row(ws: Workspace, url: str) -> Row:
    """A job started with a relative --status, stopped through the agent's API."""
    set_mode(url, "hang")
    where = ws.root / "relative"
    where.mkdir(exist_ok=True)
    write_prompts(where / "prompts.jsonl", 20)
    token = ws.root / "agent.token"
    token.write_text("operate-token-0123456789\n")
    token.chmod(0o600)
    port = free_ports(1)[0]
    agent = [sys.executable, "-m", "tui", "agent", "--profile", "atk-base", "--port", str(port)]
    agent += ["--token-file", str(token), "--status", str(where / "status.json")]
    job_args = ["generate", "--prompts", "prompts.jsonl", "--out", "out", "--status", "status.json"]
    base = f"http://127.0.0.1:{port}/api/v1"
    headers = {"authorization": "Bearer operate-token-0123456789"}
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    try:
        with started(agent, env=ws.env(), cwd=ROOT, **quiet):
            job = start_job(
                [sys.executable, "-m", "tui", *job_args, "--server", url], ws.env(), where
            )
            try:
                poll(lambda: (where / "status.json").exists() and answers(base), 60, 0.2)
                start = time.monotonic()
                # Asked from a thread while this one reaps the job (it is our child: a zombie
                # would keep the agent's wait for its exit going to the SIGKILL deadline).
                with ThreadPoolExecutor(1) as pool:
                    asked = pool.submit(
                        httpx.post, f"{base}/pipeline", json={"action": "stop"}, headers=headers,
                        timeout=60,
                    )  # fmt: skip
                    stopped = poll(lambda: job.poll() is not None, 30)
                    got = asked.result(timeout=60)
                seconds = time.monotonic() - start
            finally:
                if job.poll() is None:
                    job.kill()
                job.communicate(timeout=10)
    finally:
        set_mode(url, "ok")
    run = Run(["POST", "/pipeline stop (job: --status status.json)"], got.status_code, "",
              got.text, seconds)  # fmt: skip
    ok = got.status_code == 200 and stopped and seconds < 15
    said = f"job {'stopped' if stopped else 'RUNS'}"
    return Row("job with a relative --status, stopped by the agent", run, said, ok, got.text[:150])


def files_rows(work: Path) -> list[Row]:
    """Every row of this part, against one workspace and one fake endpoint."""
    ws = Workspace(work / "files", 2)
    port = free_ports(1)[0]
    url = f"http://127.0.0.1:{port}"
    argv = [sys.executable, str(ENDPOINT), "--port", str(port)]
    try:
        with serving(argv, f"{url}/health"):
            rows = [*link_rows(ws, url), *disk_rows(ws, url), prompts_row(ws, url)]
            rows += [*s3_rows(ws, url), journal_row(ws), *forget_rows(ws)]
            rows.append(relative_status_row(ws, url))
    finally:
        with contextlib.suppress(Exception):
            ws.cli(["sim-fleet", "stop", "--mode", "kill"], timeout=60)
        ws.cleanup()
    return rows

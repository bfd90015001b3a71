"""The kit of the pipeline's attack rows (``bench.attacks_files``, ``bench.attacks_s3``): the fake
OpenAI endpoint of the pipeline tests on loopback, one ``generate`` job of a workspace, and a job
started and ended under a deadline."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx

from bench.attack_kit import ROOT, Run, Workspace, poll, started
from tui.pipeline.status import PipelineStatus, read_status

ENDPOINT = ROOT / "tests" / "helpers" / "pipeline_endpoint.py"
PROMPTS = 2000


def answers(url: str) -> bool:
    """``GET url`` answers below 500."""
    with contextlib.suppress(httpx.HTTPError):
        return httpx.get(url, timeout=1).status_code < 500
    return False


@contextlib.contextmanager
def serving(argv: list[str], ready: str, env: dict[str, str] | None = None) -> Iterator[None]:
    """A server process (the fake endpoint, moto) while the block runs, once ``ready`` answers."""
    with started(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL):
        if not poll(lambda: answers(ready), 30, 0.1):
            raise RuntimeError(f"{argv[1]} did not answer {ready}")
        yield


def set_mode(url: str, mode: str) -> None:
    """Tell the fake endpoint how to answer (``ok``, ``slow``, ``hang``, ``fail400``)."""
    httpx.post(f"{url}/_control", json={"mode": mode}, timeout=5).raise_for_status()


def write_prompts(path: Path, count: int = PROMPTS) -> Path:
    """``count`` OpenAI Batch chat requests, ids of ~45 characters (a shard of 200 is ~150 KB)."""
    with path.open("w") as handle:
        for i in range(count):
            body = {"messages": [{"role": "user", "content": f"prompt {i}"}]}
            line = {"custom_id": f"q-{i}-{'x' * 40}", "method": "POST"}
            handle.write(json.dumps({**line, "url": "/v1/chat/completions", "body": body}) + "\n")
    return path


class Job:
    """One ``generate`` job of the workspace: its directory, output, status document."""

    def __init__(self, ws: Workspace, name: str, url: str, *extra: str) -> None:
        self.dir = ws.root / name
        self.dir.mkdir(mode=0o700, exist_ok=True)
        self.out = self.dir / "out"
        self.status_path = self.dir / "status.json"
        prompts = ws.root / "prompts.jsonl"
        if not prompts.exists():
            write_prompts(prompts)
        self.args = ["generate", "--prompts", str(prompts), "--out", str(self.out)]
        self.args += ["--status", str(self.status_path), "--server", url, "--shard-size", "200"]
        self.args += list(extra)

    def status(self) -> PipelineStatus | None:
        """Its status document, if readable."""
        return read_status(self.status_path)

    def failed_lines(self, run: Run) -> list[str]:
        """The lines of ``run`` that say it failed."""
        return [line for line in run.lines if "failed" in line]


def start_job(argv: list[str], env: dict[str, str], cwd: Path = ROOT) -> subprocess.Popen[str]:
    """A command in its own session, its output piped (end it with ``ended``)."""
    return subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def ended(
    ws: Workspace, proc: subprocess.Popen[str], args: list[str], start: float, timeout: float
) -> Run:
    """What a started command did, killed with its session past ``timeout`` (a HUNG row); the
    workspace's paths shown as ``$WS``, as ``Workspace.cli`` shows them."""
    try:
        out, err = proc.communicate(timeout=timeout)
        rc: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # its own session, ours: we started it
        out, err = proc.communicate(timeout=10)
        rc = None
    return ws.run_of(args, rc, out, err, start)

"""Real loopback servers for the pipeline tests (the fake OpenAI endpoint of
``pipeline_endpoint.py``, simulated SGLang servers, moto's S3), prompt files and output checks."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from bench.ports import free_port
from tui.pipeline.status import PipelineStatus, read_status

if TYPE_CHECKING:
    import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
PYTHON = sys.executable
S3_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
}
FAST_SIM_ARGS = [
    "--sim-model",
    "llama-8b",
    "--sim-speed",
    "1000",
    "--sim-startup-seconds",
    "0.3",
    "--max-running-requests",
    "256",
    "--log-level",
    "warning",
]
"""``gpufleet sim`` flags for a simulated server that starts and serves short requests fast."""
BUCKET = "gpufleet-test"
"""The bucket ``moto_with_bucket`` creates."""


def wait_until(
    predicate: Callable[[], object], timeout: float, what: str, interval: float = 0.02
) -> None:
    """Poll ``predicate()`` until true; fail with ``what`` after ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def status_when(
    status_path: Path, pid: int, check: Callable[[PipelineStatus], bool], what: str
) -> PipelineStatus:
    """Wait (60 s at most) until run ``pid``'s status document passes ``check``; return it."""
    seen: list[PipelineStatus] = []

    def ok() -> bool:
        status = read_status(status_path)
        if status is not None and status.pid == pid and check(status):
            seen.append(status)
            return True
        return False

    wait_until(ok, 60, what)
    return seen[0]


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=0.5).status_code < 500
    except httpx.HTTPError:
        return False


@dataclass
class ProcessServer:
    """A server subprocess on a fixed loopback port that can be killed and started again."""

    argv: list[str]
    port: int
    ready_path: str
    env: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """Base URL."""
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 20.0, wait: bool = True) -> None:
        """Start it in its own session and (unless ``wait`` is False) wait until it answers."""
        self.process = subprocess.Popen(
            self.argv,
            env={**os.environ, **self.env},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        if wait:
            self.wait_ready(timeout)

    def wait_ready(self, timeout: float = 20.0) -> None:
        """Wait until it answers its readiness path."""
        wait_until(lambda: _answers(self.url + self.ready_path), timeout, f"{self.url} up")

    def kill(self) -> None:
        """SIGKILL its whole process group (a sim's scheduler child too) and reap it."""
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)
        self.process = None


def openai_server(port: int | None = None) -> ProcessServer:
    """The fake OpenAI-compatible endpoint of ``pipeline_endpoint.py`` (not started)."""
    port = port or free_port()
    argv = [PYTHON, str(HERE / "pipeline_endpoint.py"), "--port", str(port)]
    return ProcessServer(argv, port, "/health")


def sim_server(gpu_index: int, port: int | None = None) -> ProcessServer:
    """A real ``gpufleet sim`` server (FAST_SIM_ARGS) on simulated GPU ``gpu_index`` (not started).

    Its simulated GPU lives under the caller's GPUFLEET_STATE_DIR (the test's state directory).
    """
    port = port or free_port()
    argv = [PYTHON, "-m", "tui", "sim", "--host", "127.0.0.1", "--port", str(port)]
    argv += [*FAST_SIM_ARGS, "--sim-gpu-index", str(gpu_index)]
    # /ready, not /health: SGLang 0.5.23's /health takes a second (a generation), past 0.5 s.
    return ProcessServer(argv, port, "/ready", {"PYTHONPATH": str(REPO)})


def moto_server(port: int | None = None) -> ProcessServer:
    """moto's standalone S3 server (its state is in memory: killing it loses every bucket)."""
    port = port or free_port()
    argv = [PYTHON, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
    return ProcessServer(argv, port, "/moto-api/", dict(S3_ENV))


def tcp_gate(target: ProcessServer, port: int | None = None) -> ProcessServer:
    """A relay in front of ``target`` (``tests/helpers/tcp_gate.py``): kill it for an outage,
    start it again to end one, while ``target`` keeps its state as a real service does."""
    port = port or free_port()
    argv = [PYTHON, str(HERE / "tcp_gate.py"), str(port), str(target.port)]
    return ProcessServer(argv, port, target.ready_path)


def started(server: ProcessServer) -> Iterator[ProcessServer]:
    """Start ``server``, yield it, always kill it: a fixture's body (``yield from`` it)."""
    try:
        server.start()
        yield server
    finally:
        server.kill()


def moto_with_bucket(monkeypatch: pytest.MonkeyPatch) -> Iterator[ProcessServer]:
    """moto's S3 server holding an empty BUCKET behind a ``tcp_gate``, S3_ENV's fake credentials
    set: a fixture's body. Kill and start the yielded gate for an S3 outage.

    The credentials go into the test's environment because boto3 clients made in the test
    process (checks, sinks) need them as much as the pipeline subprocesses do.
    """
    for key, value in S3_ENV.items():
        monkeypatch.setenv(key, value)
    moto = moto_server()
    gate = tcp_gate(moto)
    try:
        moto.start()
        gate.start()
        import boto3  # here, not at the top: the GPU machine's tests import this module without it

        boto3.client("s3", endpoint_url=gate.url).create_bucket(Bucket=BUCKET)
        yield gate
    finally:
        gate.kill()
        moto.kill()


def generate_argv(tmp_path: Path, *extra: str) -> list[str]:
    """``gpufleet generate`` writing out/ and status.json under ``tmp_path``, then ``extra``."""
    out, status = str(tmp_path / "out"), str(tmp_path / "status.json")
    return [PYTHON, "-m", "tui", "generate", "--out", out, "--status", status, *extra]


def s3_args(endpoint: str, prefix: str = "job") -> list[str]:
    """The ``generate`` flags that upload to BUCKET/``prefix`` at ``endpoint``."""
    return ["--s3-bucket", BUCKET, "--s3-prefix", prefix, "--s3-endpoint-url", endpoint]


def s3_job_argv(
    tmp_path: Path, prompts: Path, server: str, endpoint: str, *extra: str
) -> list[str]:
    """``generate_argv`` of ``prompts`` on one ``server``, to BUCKET/job at ``endpoint``."""
    return generate_argv(
        tmp_path, "--prompts", str(prompts), "--server", server, *s3_args(endpoint), *extra
    )


def run_generate(argv: list[str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run a ``generate`` command line to its end from the repository, S3_ENV set."""
    env = {**os.environ, **S3_ENV}
    return subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)


def start_generate(argv: list[str]) -> subprocess.Popen[str]:
    """Start a ``generate`` command line from the repository, S3_ENV set, stderr piped as text."""
    return subprocess.Popen(
        argv, cwd=REPO, env={**os.environ, **S3_ENV}, stderr=subprocess.PIPE, text=True
    )


def set_mode(server: ProcessServer, mode: str) -> None:
    """Tell the fake endpoint how to behave."""
    httpx.post(server.url + "/_control", json={"mode": mode}, timeout=5).raise_for_status()


def write_prompts(path: Path, count: int, bad_lines: dict[int, str] | None = None) -> Path:
    """Write ``count`` prompt lines (alternating chat and completion), some replaced by bad ones."""
    bad_lines = bad_lines or {}
    with open(path, "w") as handle:
        for index in range(count):
            if index in bad_lines:
                handle.write(bad_lines[index] + "\n")
            elif index % 2:
                handle.write(json.dumps({"prompt": f"p{index}"}) + "\n")
            else:
                handle.write(json.dumps({"messages": [{"role": "user", "content": f"m{index}"}]}))
                handle.write("\n")
    return path


def write_batch(path: Path, ids: list[str]) -> Path:
    """Write one OpenAI Batch chat request per id (its content names the id)."""
    with open(path, "w") as handle:
        for custom_id in ids:
            body = {"messages": [{"role": "user", "content": f"about {custom_id}"}]}
            line = {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions"}
            handle.write(json.dumps({**line, "body": body}) + "\n")
    return path


def requests_served(server: ProcessServer) -> int:
    """Completion requests the fake endpoint has received since it started."""
    return int(httpx.get(server.url + "/_stats", timeout=5).json()["requests"])


def read_shards(out_dir: Path) -> Iterator[dict[str, Any]]:
    """Every record of every final shard in ``out_dir``."""
    for path in sorted(out_dir.glob("shard-*.jsonl")):
        with open(path) as handle:
            for line in handle:
                yield json.loads(line)


def check_bucket_matches(
    moto: ProcessServer,
    out_dir: Path,
    prefix: str,
    bucket: str = "gpufleet-test",
    field: str = "index",
) -> list[Any]:
    """Manifest == bucket objects == local shards (bytes and sha256); returns every record's
    ``field`` (``index`` by default; ``custom_id`` for the prompt ids)."""
    import boto3

    s3 = boto3.client("s3", endpoint_url=moto.url)
    manifest = json.loads(
        s3.get_object(Bucket=bucket, Key=f"{prefix}/manifest.json")["Body"].read()
    )
    listed = s3.list_objects_v2(Bucket=bucket, Prefix=f"{prefix}/shards/").get("Contents", [])
    assert sorted(o["Key"] for o in listed) == sorted(e["key"] for e in manifest["shards"])
    local = sorted(p.name for p in out_dir.glob("shard-*.jsonl"))
    assert local == sorted(e["name"] for e in manifest["shards"])
    values: list[Any] = []
    for entry in manifest["shards"]:
        body = s3.get_object(Bucket=bucket, Key=entry["key"])["Body"].read()
        assert hashlib.sha256(body).hexdigest() == entry["sha256"]
        assert body == (out_dir / entry["name"]).read_bytes()
        records = [json.loads(line) for line in body.splitlines()]
        shard = [record["index"] for record in records]
        assert len(shard) == entry["count"] and min(shard) == entry["first_index"]
        values += [record[field] for record in records]
    return values

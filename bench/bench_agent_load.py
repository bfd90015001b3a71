"""The agent under many clients: latency, connection errors and its memory (issue 31).

A simulated node (2 GPUs, their servers started with ``gpufleet apply``) and its ``gpufleet
agent``; then ``--clients`` concurrent loopback clients, each on its own keep-alive connection
(a minimal HTTP/1.1 client on asyncio streams, so the load generator costs little of the two
cores the agent shares), ask one read endpoint as fast as it answers for ``--seconds``. Reported:
requests, p50/p99 latency, connection errors (a refused, reset or timed-out connection: the
client reconnects and counts it), and the agent's RSS before, at peak and after. ``--body-mib``
also sends one authenticated body of that size to ``POST /api/v1/operations`` (streamed, never
held by the client) and reports the status and the agent's RSS after it.

``--repo DIR`` runs the agent from another checkout (the same tests' profiles), so the code
before a change and after it are measured on the same machine in one sitting::

    python -m bench.bench_agent_load --endpoint /api/v1/counters?gpus=0,1 --repo /work/main
    python -m bench.bench_agent_load --endpoint /api/v1/counters?gpus=0,1
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psutil

from bench.ports import free_ports
from bench.simfleet import BASELINE, FAST_APPLY, ROOT, kill_strays, sim_profile_text


async def _request(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, head: bytes) -> int:
    """Send one GET, read its answer (Content-Length bodies only); returns the status."""
    writer.write(head)
    await writer.drain()
    status_line = await reader.readline()
    if not status_line:
        raise ConnectionResetError("closed")
    status = int(status_line.split()[1])
    length = 0
    while True:
        line = await reader.readline()
        if line in (b"\r\n", b""):
            break
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    await reader.readexactly(length)
    return status


async def _client(
    port: int, head: bytes, until: float, latencies: list[float], errors: list[str]
) -> None:
    reader = writer = None
    while time.monotonic() < until:
        try:
            if writer is None:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection("127.0.0.1", port), 10
                )
            assert reader is not None and writer is not None
            started = time.monotonic()
            status = await asyncio.wait_for(_request(reader, writer, head), 30)
            latencies.append(time.monotonic() - started)
            if status != 200:
                errors.append(f"HTTP {status}")
        except (OSError, TimeoutError, asyncio.IncompleteReadError, ValueError) as error:
            errors.append(type(error).__name__)
            if writer is not None:
                writer.close()
            reader = writer = None
    if writer is not None:
        writer.close()


def _rss_mib(proc: psutil.Process) -> float:
    return proc.memory_info().rss / 2**20


async def _load(
    port: int, path: str, token: str, clients: int, seconds: float, proc: psutil.Process
) -> dict[str, float]:
    head = (
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n\r\n"
    ).encode()
    latencies: list[float] = []
    errors: list[str] = []
    peak = _rss_mib(proc)
    until = time.monotonic() + seconds
    tasks = [
        asyncio.create_task(_client(port, head, until, latencies, errors)) for _ in range(clients)
    ]
    while not all(t.done() for t in tasks):
        await asyncio.sleep(0.25)
        with contextlib.suppress(psutil.Error):
            peak = max(peak, _rss_mib(proc))
    await asyncio.gather(*tasks)
    ordered = sorted(latencies) or [float("nan")]
    return {
        "requests": len(latencies),
        "p50_s": statistics.median(ordered),
        "p99_s": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))],
        "errors": len(errors),
        "error_kinds": len(set(errors)),
        "peak_rss_mib": peak,
    }


def _big_body(port: int, token: str, mib: int) -> int:
    """POST ``mib`` MiB (Content-Length declared, streamed in 1 MiB pieces); the status, or -1
    when the agent closed the connection before answering."""
    import socket

    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall(
            (
                f"POST /api/v1/operations HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {mib << 20}\r\n\r\n"
            ).encode()
        )
        chunk = b" " * (1 << 20)
        with contextlib.suppress(OSError):
            for _ in range(mib):
                sock.sendall(chunk)
        with contextlib.suppress(OSError):
            answer = sock.recv(4096)
            return int(answer.split()[1]) if answer.startswith(b"HTTP/") else -1
    return -1


@contextlib.contextmanager
def node(repo: Path, gpus: int) -> Iterator[tuple[int, str, psutil.Process, list[int]]]:
    """A simulated node served from ``repo``: (agent port, token, agent process, server ports)."""
    with tempfile.TemporaryDirectory(prefix="gpufleet-agent-load-") as tmp:
        root = Path(tmp)
        ports = free_ports(gpus + 1)
        env = dict(os.environ)
        env.update(
            GPUFLEET_STATE_DIR=str(root / "state"),
            GPUFLEET_SIM_GPU_DIR=str(root / "state" / "simgpu"),
            GPUFLEET_PROFILES_DIR=str(root / "profiles"),
            GPUFLEET_CONFIG_DIR=str(root / "config"),
        )
        (root / "profiles").mkdir()
        text = sim_profile_text(
            "load-base", list(range(gpus)), ports[:gpus], str(root / "logs"), BASELINE, 50.0
        )
        (root / "profiles" / "load-base.toml").write_text(text)
        token = "load-token-" + os.urandom(8).hex()
        (root / "agent.token").write_text(token + "\n")
        (root / "agent.token").chmod(0o600)
        python = [sys.executable, "-m", "tui"]

        def cli(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [*python, *args], env=env, cwd=repo, capture_output=True, text=True, timeout=120
            )

        done = cli("apply", "load-base", *FAST_APPLY)
        if done.returncode != 0:
            raise SystemExit(f"the node did not come up: {done.stderr}")
        argv = [*python, "agent", "--profile", "load-base", "--port", str(ports[gpus])]
        argv += ["--token-file", str(root / "agent.token")]
        agent = subprocess.Popen(argv, env=env, cwd=repo, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 60
            import httpx

            while time.monotonic() < deadline:
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(f"http://127.0.0.1:{ports[gpus]}/metrics", timeout=1).status_code:
                        break
                time.sleep(0.2)
            yield ports[gpus], token, psutil.Process(agent.pid), ports[:gpus]
        finally:
            agent.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                agent.wait(20)
            if agent.poll() is None:
                agent.kill()
            cli("sim-fleet", "stop", "--mode", "terminate")
            kill_strays(ports[:gpus])


def main(argv: list[str] | None = None) -> int:
    """Run the load and print one line of numbers per phase."""
    parser = argparse.ArgumentParser(prog="python -m bench.bench_agent_load")
    parser.add_argument("--repo", type=Path, default=ROOT, help="checkout the agent runs from")
    parser.add_argument("--endpoint", default="/api/v1/counters?gpus=0,1")
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--gpus", type=int, default=2)
    parser.add_argument("--body-mib", type=int, default=0, help="also POST a body this large")
    args = parser.parse_args(argv)
    with node(args.repo.resolve(), args.gpus) as (port, token, agent, _):
        time.sleep(2.0)  # the agent's first views
        before = _rss_mib(agent)
        result = asyncio.run(_load(port, args.endpoint, token, args.clients, args.seconds, agent))
        after = _rss_mib(agent)
        print(
            f"{args.repo} {args.endpoint} x{args.clients} {args.seconds:g} s: "
            f"{result['requests']:.0f} requests, p50 {result['p50_s']:.3f} s, "
            f"p99 {result['p99_s']:.3f} s, errors {result['errors']:.0f}; agent RSS "
            f"{before:.0f} -> peak {result['peak_rss_mib']:.0f} -> {after:.0f} MiB",
            flush=True,
        )
        if args.body_mib:
            before = _rss_mib(agent)
            status = _big_body(port, token, args.body_mib)
            print(
                f"POST {args.body_mib} MiB body: HTTP {status}; agent RSS {before:.0f} -> "
                f"{_rss_mib(agent):.0f} MiB",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

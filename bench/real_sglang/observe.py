"""What gpufleet reads of a real SGLang server's latency and energy, beside what the server's own
``/metrics`` and ``nvidia-smi`` say.

Run on the GPU machine (``bench/real_sglang/device_observe.sh``), or here against the simulator
(``--sim``: ``gpufleet sim --sim-build 0.5.17``, the simulated GPUs instead of NVML and of
``nvidia-smi``). It:

1. launches the server (``python -m sglang.launch_server`` with the tiny model, in its own
   session; killed by its process group at the end: the harness started it) and waits for
   ``/health``;
2. polls it with gpufleet's monitor (``FleetMonitor``: its latency windows, its energy meters)
   once a second, and samples ``nvidia-smi``'s power every 0.2 s in the background;
3. sends load (``--clients`` requests always in flight) for ``--seconds``; scrapes ``/metrics``
   itself at the start and the end of that window (t1, t2) and reads NVML's energy counter then;
4. sets side by side, for the window t1..t2:

   * each latency's p50/p90/p99 and count: gpufleet's (``tui.fleet.latency`` fed the two
     scrapes) and the reference (prometheus_client's parser, ``bench.prom_reference``'s
     histogram_quantile) on the same two scrapes; and the monitor's own live window at t2;
   * the GPU's joules: gpufleet's meter (the monitor's, between its readings nearest t1 and t2),
     NVML's counter read directly, and ``nvidia-smi``'s power samples integrated; tokens per
     joule with the server's own ``generation_tokens_total``.

Writes ``OUTDIR/observe.json`` and ``OUTDIR/observe.md`` (rows for
``bench/results-real-sglang.md``).

usage: python -m bench.real_sglang.observe OUTDIR MODEL_DIR [--sim] [--seconds S] [--clients N]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from bench.ports import free_port
from bench.prom_reference import client_buckets, minus, reference_quantile
from bench.real_sglang.explore import BASE_FLAGS
from tui.fleet.latency import LatencyWindow
from tui.fleet.monitor import FleetMonitor
from tui.fleet.snapshot import FleetSnapshot
from tui.fleet.spec import FleetSpec, ServerSpec
from tui.gpu.snapshot import GpuSource
from tui.servers.histogram import LATENCY_FAMILIES, parse_histograms

PARTS = {"ttft": LATENCY_FAMILIES[0], "itl": LATENCY_FAMILIES[1], "e2e": LATENCY_FAMILIES[2],
         "queue": LATENCY_FAMILIES[3]}  # fmt: skip
FLAGS = ["--disable-cuda-graph", "--mem-fraction-static", "0.2", "--max-running-requests", "16",
         "--max-mamba-cache-size", "64"]  # fmt: skip
"""The recorded ``base`` scenario's knobs."""
TINY = str(Path(__file__).resolve().parents[2] / "tests/fixtures/real_sglang/0.5.17/model")
"""The recorded tiny model's folder (``--sim``)."""


def get(url: str, timeout: float = 10.0) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as answer:
            return answer.status, answer.read().decode(errors="replace")
    except urllib.error.HTTPError as error:
        return error.code, ""
    except OSError:
        return -1, ""


def post(url: str, body: dict[str, Any], timeout: float = 120.0) -> int:
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            answer.read()
            return answer.status
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return -1


class Load:
    """``clients`` /generate requests always in flight until stopped."""

    def __init__(self, base: str, clients: int) -> None:
        self.stop = threading.Event()
        self.done = 0
        self.threads = [threading.Thread(target=self._run, args=(base,)) for _ in range(clients)]
        for thread in self.threads:
            thread.start()

    def _run(self, base: str) -> None:
        body = {"text": "Hello", "sampling_params": {"max_new_tokens": 256, "ignore_eos": True}}
        while not self.stop.is_set():
            if post(base + "/generate", body) == 200:
                self.done += 1

    def close(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(180)


class PowerLog:
    """``nvidia-smi``'s power.draw every 0.2 s (or, with ``--sim``, the simulated GPUs')."""

    def __init__(self, gpu: int, source: GpuSource | None) -> None:
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._gpu, self._source = gpu, source
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        if self._source is not None:
            while not self._stop.wait(0.2):
                for reading in self._source.sample():
                    if reading.index == self._gpu and reading.power_w is not None:
                        self.samples.append((time.time(), reading.power_w))
            return
        argv = ["nvidia-smi", f"--id={self._gpu}", "--query-gpu=power.draw",
                "--format=csv,noheader,nounits", "-lms", "200"]  # fmt: skip
        with subprocess.Popen(argv, stdout=subprocess.PIPE, text=True) as smi:
            assert smi.stdout is not None
            for line in smi.stdout:
                with contextlib.suppress(ValueError):
                    self.samples.append((time.time(), float(line.strip())))
                if self._stop.is_set():
                    smi.terminate()
                    break

    def joules(self, t1: float, t2: float) -> float:
        """The samples between t1 and t2 integrated (trapezoids)."""
        inside = [(t, w) for t, w in self.samples if t1 <= t <= t2]
        return sum((b - a) * (wa + wb) / 2 for (a, wa), (b, wb) in itertools.pairwise(inside))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)


def nvml_energy_mj(gpu: int) -> int | None:
    """NVML's total energy counter of ``gpu`` read directly (None: not supported)."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            handle = pynvml.nvmlDeviceGetHandleByIndex(gpu)
            return int(pynvml.nvmlDeviceGetTotalEnergyConsumption(handle))
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # NotSupported, no driver: the row says none
        return None


def counter(text: str, name: str) -> float:
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(name + "{") or line.startswith(name + " ")
    )


def latency_rows(first: str, last: str, live: FleetSnapshot) -> list[dict[str, Any]]:
    """Per latency: gpufleet's percentiles on the two scrapes, the reference's, the monitor's."""
    window = LatencyWindow()
    window.add(0.0, parse_histograms(first.encode()), epoch=1)
    window.add(1.0, parse_histograms(last.encode()), epoch=1)
    ours = window.summary
    server = live.panels[0].server if live.panels else None
    rows = []
    for part, family in PARTS.items():
        increase = minus(client_buckets(last, family), client_buckets(first, family))
        mine = getattr(ours, part) if ours is not None else None
        monitor = getattr(server.latency, part) if server and server.latency else None
        rows.append(
            {
                "latency": part,
                "gpufleet": None if mine is None else [mine.p50, mine.p90, mine.p99, mine.count],
                "reference": [reference_quantile(q, increase) for q in (0.5, 0.9, 0.99)]
                + [increase[-1][1] if increase else 0],
                "monitor_live": None
                if monitor is None
                else [monitor.p50, monitor.p90, monitor.p99, monitor.count],
            }
        )
    return rows


async def observe(args: argparse.Namespace) -> dict[str, Any]:
    port = free_port() if args.sim else 30000
    base = f"http://127.0.0.1:{port}"
    env = dict(os.environ)
    if args.sim:
        state = Path(tempfile.mkdtemp(prefix="observe-"))
        env["GPUFLEET_STATE_DIR"] = str(state)
        # The recorded tiny model on a simulated H100, with the real run's knobs.
        argv = [sys.executable, "-m", "tui", "sim", "--sim-build", "0.5.17", "--sim-speed", "5",
                "--sim-startup-seconds", "2", "--sim-gpu", "h100", "--sim-model", TINY,
                "--host", "127.0.0.1", "--port", str(port), "--enable-metrics",
                *FLAGS]  # fmt: skip
    else:
        env["PYTHONPATH"] = os.environ.get("SERVER_PYTHONPATH", env.get("PYTHONPATH", ""))
        flags = [f if f != "30000" else str(port) for f in BASE_FLAGS]
        argv = [sys.executable, "-m", "sglang.launch_server", "--model-path", args.model,
                "--served-model-name", "tiny-observe", *flags, *FLAGS]  # fmt: skip
    log = (args.out / "server.log").open("wb")
    server = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env,
                              start_new_session=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 420
        while get(base + "/health", 5)[0] != 200:
            if server.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the server did not come up (see {args.out / 'server.log'})")
            time.sleep(0.5)
        from tui.gpu.simulated import SimulatedSource
        from tui.gpu.source import open_gpu_source

        sim = SimulatedSource(Path(env["GPUFLEET_STATE_DIR"]) / "simgpu") if args.sim else None
        source: GpuSource = sim if sim is not None else open_gpu_source("nvml")
        monitor = FleetMonitor(FleetSpec((ServerSpec(gpu_index=0, port=port),)), source,
                               probe_timeout=5.0)  # fmt: skip
        monitor.insight.slow_every_s = 5.0
        power = PowerLog(0, SimulatedSource(sim.root) if sim is not None else None)
        load = Load(base, args.clients)
        snaps: list[FleetSnapshot] = []
        try:
            for _ in range(10):  # warm: the batch fills, the meters begin
                snaps.append(await monitor.poll())
                await asyncio.sleep(1.0)
            t1, first, mj1 = time.time(), get(base + "/metrics")[1], nvml_energy_mj(0)
            end = time.monotonic() + args.seconds
            while time.monotonic() < end:
                snaps.append(await monitor.poll())
                await asyncio.sleep(1.0)
            t2, last, mj2 = time.time(), get(base + "/metrics")[1], nvml_energy_mj(0)
            live = await monitor.poll()
        finally:
            load.close()
            power.close()
            await monitor.aclose()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGKILL)  # the process group this harness started
        server.wait(60)
        log.close()
    near = [s for s in snaps if s.panels and s.panels[0].energy is not None]
    at1 = min(near, key=lambda s: abs(s.taken_at - t1))
    at2 = min(near, key=lambda s: abs(s.taken_at - t2))
    energy1, energy2 = at1.panels[0].energy, at2.panels[0].energy
    assert energy1 is not None and energy2 is not None  # ``near`` holds metered readings only
    ours = energy2.joules - energy1.joules
    tokens = counter(last, "sglang:generation_tokens_total") - counter(
        first, "sglang:generation_tokens_total"
    )
    first_at, last_at = at1.taken_at, at2.taken_at
    nvml = None if mj1 is None or mj2 is None else (mj2 - mj1) / 1000
    return {
        "server": "gpufleet sim --sim-build 0.5.17" if args.sim else "SGLang (real)",
        "window_s": round(t2 - t1, 1),
        "requests_done": load.done,
        "latency": latency_rows(first, last, live),
        "energy": [
            # (what, interval s, joules): each over its own interval, compared by mean power
            ["gpufleet's meter (" + ("driver counter" if energy2.counter
                                     else "power integrated") + ")",
             last_at - first_at, ours],
            ["power samples integrated, same interval (" + ("simulated GPU" if args.sim
                                                             else "nvidia-smi") + ")",
             last_at - first_at, power.joules(first_at, last_at)],
            ["NVML total energy counter, read directly at t1 and t2", t2 - t1, nvml],
        ],
        "tokens": tokens,
        # gpufleet's mean power over t1..t2 (its readings are a poll's length off the scrapes)
        "tokens_per_joule": tokens / (ours / (last_at - first_at) * (t2 - t1))
        if ours > 0
        else None,
    }  # fmt: skip


def markdown(found: dict[str, Any]) -> str:
    """The rows for bench/results-real-sglang.md."""

    def ms(values: list[float] | None) -> str:
        if values is None:
            return "-"
        *qs, count = values
        return " / ".join("-" if q is None else f"{q * 1000:.1f}" for q in qs) + f" (n={count:.0f})"

    lines = [f"{found['server']}, a {found['window_s']} s window under load "
             f"({found['requests_done']} requests done):", "",
             "| latency | gpufleet p50/p90/p99 ms (n) | reference on the same scrapes | "
             "the monitor's live window |", "|---|---|---|---|"]  # fmt: skip
    for row in found["latency"]:
        lines.append(f"| {row['latency']} | {ms(row['gpufleet'])} | {ms(row['reference'])} | "
                     f"{ms(row['monitor_live'])} |")  # fmt: skip
    lines += ["", "| energy | interval s | J | mean W |", "|---|---|---|---|"]
    for what, seconds, joules in found["energy"]:
        if joules is None:
            lines.append(f"| {what} | - | not supported | - |")
        else:
            lines.append(f"| {what} | {seconds:.1f} | {joules:,.0f} | {joules / seconds:,.1f} |")
    per_joule = found["tokens_per_joule"]
    said = f"{per_joule:.3g} tokens per joule" if per_joule else "no energy metered"
    lines.append(
        f"\n{found['tokens']:,.0f} output tokens over t1..t2 (the server's counter): {said}"
    )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("model")
    parser.add_argument("--sim", action="store_true", help="the simulator instead of SGLang")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--clients", type=int, default=12)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if not args.sim and shutil.which("nvidia-smi") is None:
        raise SystemExit("no nvidia-smi: run it on the GPU machine, or with --sim")
    found = asyncio.run(observe(args))
    (args.out / "observe.json").write_text(json.dumps(found, indent=1))
    (args.out / "observe.md").write_text(markdown(found))
    print(markdown(found))


if __name__ == "__main__":
    main()

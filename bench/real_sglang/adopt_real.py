"""Issue 35 on the real server: a fleet started by the operator's own script, adopted, retuned.

Run on the GPU machine from the repository root (``bench/real_sglang/device_adopt.sh`` sets the
environment), or here with ``--simulate`` (simulated SGLang 0.5.17 servers, ``gpufleet sim
--sim-build 0.5.17``, in place of the real ones) to prove the harness end to end:

1. the operator's script (``bench.operator_fleet``: one new session, ``CUDA_VISIBLE_DEVICES``,
   a log file each; no gpufleet) starts two servers at (0.30, 80, 0.4, auto);
2. a client of the seed's kind (``load_client``: it never reads ``/health``) keeps
   ``--inflight`` (16) ``/generate`` requests in flight on each;
3. ``gpufleet status --ports`` (watching), ``gpufleet adopt``, ``gpufleet status`` (N/N ready);
4. the retune to (0.45, 200, 0.6, 64): ``gpufleet apply``, which walks adopted servers one GPU
   at a time; ``gpufleet status --json`` after;
5. what each client counted (ok, lost, 503, refused), what gpufleet said (every command's exit
   status and output, the journal), and what the servers' own ``/server_info`` says.

Writes ``OUTDIR/results.json`` and ``OUTDIR/results.md``; every log stays under ``OUTDIR``.
gpufleet runs one server per GPU (a relaunch checks that its GPU is free): the real run needs
two GPUs (``--gpus 0,1``, the lent ``nvidia-h100-x2``).

usage: python -m bench.real_sglang.adopt_real OUTDIR MODEL_DIR [--python PY]
           [--server-pythonpath P] [--gpus 0,1] [--ports 30000,30001] [--inflight 16]
           [--simulate] [--budget S]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.operator_fleet import OperatorServer, answers, kill_group, start, wait_ready
from bench.real_sglang.commands import gpufleet_command

BEFORE = {"mem_fraction_static": 0.30, "max_mamba_cache_size": 80, "mamba_full_memory_ratio": 0.4}
"""The script's knobs (max running requests left to SGLang: auto)."""
AFTER = {
    "mem_fraction_static": 0.45,
    "max_mamba_cache_size": 200,
    "mamba_full_memory_ratio": 0.6,
    "max_running_requests": 64,
}
"""The retune's knobs (the seed's aggressive step, on the tiny model)."""
REAL_FLAGS = [
    "--load-format", "dummy", "--attention-backend", "triton", "--sampling-backend", "pytorch",
    "--grammar-backend", "none", "--disable-cuda-graph", "--enable-metrics",
    "--context-length", "4096", "--random-seed", "0",
]  # fmt: skip
"""The bundle's constraints (no FlashAttention-3, no xgrammar) and a small context."""
SERVER_ENV = ("CUDA_HOME", "TVM_FFI_CACHE_DIR", "TRITON_CACHE_DIR")
"""Variables the real servers get from the harness's own environment."""
MAX_NEW = 256
"""Output tokens of each client request."""


def knob_flags(knobs: dict[str, Any]) -> list[str]:
    """``{"mem_fraction_static": 0.3}`` -> ``["--mem-fraction-static", "0.3"]``."""
    return [t for k, v in knobs.items() for t in ("--" + k.replace("_", "-"), str(v))]


@dataclass
class Run:
    """One run: its options, its state directory, its records."""

    out: Path
    model: str
    python: str
    gpus: list[int]
    ports: list[int]
    simulate: bool
    server_pythonpath: str
    inflight: int
    budget: float
    records: dict[str, Any] = field(default_factory=lambda: {"commands": []})

    def __post_init__(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        self.state = self.out / "state"
        self.logs = self.out / "logs"
        self.env = dict(
            os.environ,
            GPUFLEET_STATE_DIR=str(self.state),
            GPUFLEET_CONFIG_DIR=str(self.out / "config"),
            PYTHONUNBUFFERED="1",
        )
        self.env.pop("GPUFLEET_LAUNCH_ID", None)
        self.t0 = time.monotonic()

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def gpufleet(self, *args: str, timeout: float = 600.0) -> dict[str, Any]:
        """Run one gpufleet command as the operator types it; its record."""
        rec, out = gpufleet_command(self.env, args, timeout)
        rec.update(stdout=out[-12000:], stderr=rec["stderr"][-4000:])
        self.records["commands"].append(rec)
        print(
            f"[{self.elapsed():6.1f}] gpufleet {' '.join(args)} -> {rec['rc']} ({rec['seconds']} s)"
        )
        return rec

    def servers(self) -> list[OperatorServer]:
        """The operator's script: each server at the first knobs, its own log."""
        out = []
        for gpu, port in zip(self.gpus, self.ports, strict=True):
            knobs = knob_flags(BEFORE)
            if self.simulate:
                argv = [sys.executable, "-m", "tui", "sim", "--sim-build", "0.5.17"]
                argv += ["--sim-gpu", "h100", "--sim-model", self.model, "--sim-speed", "4"]
                argv += ["--enable-metrics"]
                env: dict[str, str] = {}
            else:
                argv = [self.python, "-m", "sglang.launch_server", "--model-path", self.model]
                argv += REAL_FLAGS
                env = {"PYTHONPATH": self.server_pythonpath, "HF_HUB_OFFLINE": "1"}
                env["TRANSFORMERS_OFFLINE"] = "1"
                env |= {k: os.environ[k] for k in SERVER_ENV if k in os.environ}
            argv += ["--host", "127.0.0.1", "--port", str(port), *knobs]
            log = self.logs / f"sglang_gpu{gpu}.log"
            out.append(OperatorServer(gpu, port, tuple(argv), log, env))
        return out

    def clients(self) -> list[tuple[subprocess.Popen[bytes], Path]]:
        """One seed-like client per server, ``inflight`` requests in flight each."""
        started = []
        for port in self.ports:
            result = self.out / f"client-{port}.json"
            argv = [sys.executable, "-m", "bench.real_sglang.load_client", str(port), str(result)]
            argv += [str(self.out / "STOP"), str(self.inflight), str(MAX_NEW)]
            log = (self.out / f"client-{port}.log").open("wb")
            started.append((subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT), result))
        return started

    def server_info(self) -> dict[int, Any]:
        """Each port's own ``/server_info`` numbers (what the server runs with)."""
        import urllib.request

        found: dict[int, Any] = {}
        for port in self.ports:
            try:
                with urllib.request.urlopen(
                    f"http://127.0.0.1:{port}/server_info", timeout=10
                ) as r:
                    top = json.loads(r.read())
            except (OSError, ValueError) as exc:
                found[port] = {"error": str(exc)}
                continue
            inner = (top.get("internal_states") or [{}])[0]
            found[port] = {
                "version": top.get("version"),
                "mem_fraction_static": top.get("mem_fraction_static"),
                "max_running_requests": top.get("max_running_requests"),
                "effective_max_running": inner.get("effective_max_running_requests_per_dp"),
                "mamba_slots": inner.get("max_mamba_cache_size"),
                "kv_tokens": top.get("max_total_num_tokens"),
            }
        return found

    def wait_busy(self, limit_s: float) -> dict[int, int | None]:
        """Poll each server's ``/metrics`` until it runs requests (or the deadline): what it
        runs, by port."""
        import urllib.request

        from tui.servers.probe import parse_metrics

        deadline = time.monotonic() + limit_s
        running: dict[int, int | None] = {}
        while True:
            for port in self.ports:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                        running[port] = parse_metrics(r.read().decode()).running
                except (OSError, ValueError):
                    running[port] = None
            if all(n for n in running.values()) or time.monotonic() > deadline:
                return running
            time.sleep(0.5)

    def retuned_profile(self) -> None:
        """The adopted profile with the retune's knobs, saved as 'retuned'."""
        import tomllib

        import tomli_w

        folder = self.out / "config" / "profiles"
        doc = tomllib.loads((folder / "adopted.toml").read_text())
        doc["name"] = "retuned"
        doc["server"].update(AFTER)
        for table in doc.get("gpu", {}).values():
            for knob in AFTER:
                table.pop(knob, None)
        (folder / "retuned.toml").write_text(tomli_w.dumps(doc))

    def run(self) -> int:
        fleet = start(self.servers(), self.env)
        self.records["script"] = {"pids": list(fleet.pids), "group": fleet.group}
        clients: list[tuple[subprocess.Popen[bytes], Path]] = []
        adopted: dict[str, Any] = {"rc": None}
        try:
            wait_ready(fleet, min(self.budget / 2, 480.0))
            self.records["ready_s"] = round(self.elapsed(), 1)
            self.records["before"] = self.server_info()
            clients = self.clients()
            self.records["busy"] = self.wait_busy(60.0)  # requests in flight before gpufleet looks
            ports, gpus = ",".join(map(str, self.ports)), ",".join(map(str, self.gpus))
            self.gpufleet("status", "--ports", ports, "--gpus", gpus, timeout=120)
            adopted = self.gpufleet("adopt", "--ports", ports, "--gpus", gpus, "--name", "adopted")
            self.gpufleet("status", timeout=120)
            if adopted["rc"] == 0:
                self.retuned_profile()
                self.gpufleet(
                    "apply", "retuned", "--no-measure", "--timeout", "480", "--term-timeout",
                    "60", "--release-timeout", "120", timeout=max(self.budget - self.elapsed(), 60),
                )  # fmt: skip
                self.gpufleet("status", "--json", timeout=120)
                self.records["after"] = self.server_info()
            self.gpufleet("journal", "--json", timeout=60)
        finally:
            (self.out / "STOP").touch()
            for proc, result in clients:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=180)
                if proc.poll() is None:
                    proc.kill()
                with contextlib.suppress(OSError, ValueError):
                    self.records.setdefault("clients", {})[result.stem] = json.loads(
                        result.read_text()
                    )
            self.gpufleet("sim-fleet", "stop", "--mode", "terminate", timeout=300)
            kill_group(fleet.group)
            self.records["still_answering"] = [
                p for p in self.ports if answers(f"http://127.0.0.1:{p}")
            ]
            (self.out / "results.json").write_text(json.dumps(self.records, indent=1, default=str))
            (self.out / "results.md").write_text(table(self.records))
        return 0 if adopted["rc"] == 0 else 1


def table(records: dict[str, Any]) -> str:
    """The run in a few lines for ``bench/results-real-sglang.md``."""
    lines = ["| step | exit | what gpufleet said (last lines) |", "|---|---|---|"]
    for rec in records["commands"]:
        said = (rec["stdout"] or rec["stderr"]).strip().splitlines()[-3:]
        shown = " / ".join(line.strip() for line in said).replace("|", "\\|")[:400]
        lines.append(f"| `{' '.join(rec['argv'][:3])}` | {rec['rc']} | {shown} |")
    lines += ["", "| client | ok | lost | 503 | refused | tok/s |", "|---|---|---|---|---|---|"]
    for name, counts in sorted(records.get("clients", {}).items()):
        lines.append(
            f"| {name} | {counts.get('ok')} | {counts.get('lost')} | {counts.get('s503')} | "
            f"{counts.get('refused')} | {counts.get('tok_s')} |"
        )
    lines += ["", f"before: {records.get('before')}", f"after: {records.get('after')}"]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="adopt_real", description=__doc__.split("\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("model")
    parser.add_argument("--python", default=sys.executable, help="the servers' interpreter")
    parser.add_argument(
        "--server-pythonpath",
        default=os.environ.get("SERVER_PYTHONPATH", ""),
        help="PYTHONPATH of the servers (SGLang's bundle)",
    )
    parser.add_argument("--gpus", default="0,1")
    parser.add_argument("--ports", default="30000,30001")
    parser.add_argument("--inflight", type=int, default=16)
    parser.add_argument("--simulate", action="store_true", help="simulated 0.5.17 servers")
    parser.add_argument("--budget", type=float, default=540.0, help="seconds for the whole run")
    args = parser.parse_args(argv)
    run = Run(
        out=args.out,
        model=args.model,
        python=args.python,
        gpus=[int(g) for g in args.gpus.split(",")],
        ports=[int(p) for p in args.ports.split(",")],
        simulate=args.simulate,
        server_pythonpath=args.server_pythonpath,
        inflight=args.inflight,
        budget=args.budget,
    )
    return run.run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

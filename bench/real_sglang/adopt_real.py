"""Issue 35 on the real server, on ONE GPU: two servers an operator's script started on one
card, adopted, retuned one slot at a time under a client that never stops, then a crash.

Run on the GPU machine from the repository root (``bench/real_sglang/device_adopt.sh`` sets
the environment), or here with ``--simulate`` (simulated SGLang 0.5.17 servers, ``gpufleet sim
--sim-build 0.5.17``, sharing one simulated H100) to prove the harness end to end:

1. the operator's script (``bench.operator_fleet``: one new session, ``CUDA_VISIBLE_DEVICES``
   the one card for both, a log each; no gpufleet) starts the first server at (0.30, 80, 0.4,
   auto) and, once it answers, the second at fraction 0.60: SGLang sizes its pools from the free
   memory it finds, so each fraction is of what the card has left (the same fractions fit an
   H100 80 GB and an H200 141 GB; ``card`` records the sizes on the card found);
2. a client of the seed's kind (``load_client``: it never reads ``/health``) keeps
   ``--inflight`` (16) ``/generate`` requests in flight on each;
3. ``gpufleet status --ports`` (watching), ``gpufleet adopt`` (GPU 1 numbered automatically, on
   device 0), ``gpufleet status`` (2/2 ready);
4. ``gpufleet apply --preflight-only`` of the adopted profile with ``sglang_version = "auto"``
   (real servers: resolved with the profile's python and ``[env]``): the prediction for what
   runs (26, capped) beside what the servers say;
5. ``gpufleet apply`` to (0.45, 200, 0.6, 64), ``auto`` again: the preflight (64, not capped;
   each slot planned beside its neighbour), the walk one slot at a time, each drain under the
   client (``--drain-s``: its deadline), what gpufleet said (drain timed out, lost, exit code);
   ``gpufleet status --json`` and each server's ``/server_info`` after;
6. (``--job``, when the budget allows) the retune back while ``gpufleet generate`` sends: each
   slot cordoned first, nothing lost;
7. the console in a real pty watching the fleet, slot 1's main pid SIGKILLed behind its back:
   how long until its panel says ``crashed``, and what ``gpufleet status --json`` says.

Writes ``OUTDIR/results.json`` and ``OUTDIR/results.md``; every log stays under ``OUTDIR``.

usage: python -m bench.real_sglang.adopt_real OUTDIR MODEL_DIR [--python PY]
           [--server-pythonpath P] [--ports 30000,30001] [--device 0] [--inflight 16]
           [--drain-s 30] [--job] [--simulate] [--budget S]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.operator_fleet import OperatorServer, answers, kill_group, start, wait_ready
from bench.real_sglang.commands import gpufleet_command
from bench.real_sglang.shared_steps import crash, under_the_job

BEFORE = {"mem_fraction_static": 0.30, "max_mamba_cache_size": 80, "mamba_full_memory_ratio": 0.4}
"""The script's knobs (max running requests left to SGLang: auto)."""
SECOND_FRACTION = 0.60
"""The second server's fraction: of what the first left free (both served on an H100)."""
AFTER = {
    "mem_fraction_static": 0.45,
    "max_mamba_cache_size": 200,
    "mamba_full_memory_ratio": 0.6,
    "max_running_requests": 64,
}
"""The retune's knobs (the seed's aggressive step, on the tiny model)."""
EXPECTED = {"before": (26, True), "after": (64, False)}
"""0.5.17 on the tiny model: 80 slots // 3 a request = 26, capped; 200 // 3 = 66 >= 64."""
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
PREDICTED = re.compile(r"^preflight GPU (\d+): .*max_running (\S+) -> (\d+)( \(capped\))?")


def knob_flags(knobs: dict[str, Any]) -> list[str]:
    """``{"mem_fraction_static": 0.3}`` -> ``["--mem-fraction-static", "0.3"]``."""
    return [t for k, v in knobs.items() for t in ("--" + k.replace("_", "-"), str(v))]


def predictions(stdout: str) -> dict[int, tuple[int, bool]]:
    """Each GPU's predicted (max running, capped) from an apply's preflight lines."""
    found = (PREDICTED.match(line) for line in stdout.splitlines())
    return {int(m.group(1)): (int(m.group(3)), bool(m.group(4))) for m in found if m}


def said(stdout: str) -> list[str]:
    """The lines of an apply that speak of sharing, the drain, the loss and the outcome."""
    keys: tuple[str, ...] = ("preflight", "beside", "cordoned", "drain timed out", "lost")
    keys += ("GPUs ready", "walked", "refused")
    return [line for line in stdout.splitlines() if any(k in line for k in keys)]


@dataclass
class Run:
    """One run: its options, its state directory, its records."""

    out: Path
    model: str
    python: str
    ports: list[int]
    device: int
    simulate: bool
    server_pythonpath: str
    inflight: int
    drain_s: float
    budget: float
    records: dict[str, Any] = field(default_factory=lambda: {"commands": []})

    def __post_init__(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        self.state = self.out / "state"
        self.logs = self.out / "logs"
        self.profiles = self.out / "config" / "profiles"
        self.env = dict(
            os.environ,
            GPUFLEET_STATE_DIR=str(self.state),
            GPUFLEET_CONFIG_DIR=str(self.out / "config"),
            PYTHONUNBUFFERED="1",
        )
        self.env.pop("GPUFLEET_LAUNCH_ID", None)
        self.t0 = time.monotonic()
        self.records.update(ports=self.ports, device=self.device, drain_s=self.drain_s)

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def left(self) -> float:
        return self.budget - self.elapsed()

    def gpufleet(self, *args: str, timeout: float = 600.0) -> dict[str, Any]:
        """Run one gpufleet command as the operator types it; its record."""
        rec, out = gpufleet_command(self.env, args, max(timeout, 30.0))
        rec.update(stdout=out[-12000:], stderr=rec["stderr"][-4000:])
        self.records["commands"].append(rec)
        print(
            f"[{self.elapsed():6.1f}] gpufleet {' '.join(args)} -> {rec['rc']} ({rec['seconds']} s)"
        )
        return rec

    def save(self) -> None:
        (self.out / "results.json").write_text(json.dumps(self.records, indent=1, default=str))

    def card(self) -> dict[str, Any]:
        """The card both servers run on, and what each fraction takes of it."""
        if self.simulate:
            from tui.gpu.sim_records import SIM_GPU_KINDS

            name, total, _ = SIM_GPU_KINDS["h100"]
        else:
            query = ["nvidia-smi", f"--id={self.device}", "--query-gpu=name,memory.total"]
            done = subprocess.run(
                [*query, "--format=csv,noheader,nounits"], capture_output=True, text=True
            )
            name, mib = (part.strip() for part in done.stdout.strip().split(","))
            total = int(float(mib)) * 1024**2
        first = BEFORE["mem_fraction_static"] * total
        second = SECOND_FRACTION * (total - first)
        return {
            "name": name,
            "total_gib": round(total / 1024**3, 1),
            "fractions": [BEFORE["mem_fraction_static"], SECOND_FRACTION],
            "static_gib_about": [round(first / 1024**3, 1), round(second / 1024**3, 1)],
        }

    def servers(self) -> list[OperatorServer]:
        """The operator's script: both servers on the one card, the second once the first
        answers, each its own log."""
        out = []
        for i, port in enumerate(self.ports):
            knobs = dict(BEFORE, mem_fraction_static=[0.30, SECOND_FRACTION][min(i, 1)])
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
            argv += ["--host", "127.0.0.1", "--port", str(port), *knob_flags(knobs)]
            log = self.logs / f"sglang_{port}.log"
            out.append(OperatorServer(self.device, port, tuple(argv), log, env, wait=i == 0))
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
                url = f"http://127.0.0.1:{port}/server_info"
                with urllib.request.urlopen(url, timeout=10) as r:
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
        """Poll each server's ``/metrics`` until it runs requests (or the deadline)."""
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

    def write_profiles(self) -> None:
        """From the adopted profile: ``adopted-auto`` (the same, ``sglang_version = "auto"``
        for real servers) and ``retuned`` (the retune's knobs for every slot, each slot kept on
        its card)."""
        import tomllib

        import tomli_w

        doc = tomllib.loads((self.profiles / "adopted.toml").read_text())
        if doc["engine"]["kind"] == "sglang":
            doc["engine"]["sglang_version"] = "auto"
        doc["name"] = "adopted-auto"
        (self.profiles / "adopted-auto.toml").write_text(tomli_w.dumps(doc))
        doc["name"] = "retuned"
        doc["server"].update(AFTER)
        cards = {g: {"device": t["device"]} for g, t in doc.get("gpu", {}).items() if "device" in t}
        doc["gpu"] = cards
        (self.profiles / "retuned.toml").write_text(tomli_w.dumps(doc))


def steps(run: Run) -> None:
    """Everything after the servers answer (``Run.run`` starts and ends them)."""
    ports = ",".join(map(str, run.ports))
    run.gpufleet("status", "--ports", ports, timeout=120)
    adopted = run.gpufleet("adopt", "--ports", ports, "--name", "adopted")
    run.records["adopt_rc"] = adopted["rc"]
    run.gpufleet("status", timeout=120)
    if adopted["rc"] != 0:
        return
    run.write_profiles()
    card = ["--card", "h100"] if run.simulate else []
    now = run.gpufleet("apply", "adopted-auto", "--preflight-only", *card, timeout=120)
    run.records["predicted_before"] = predictions(now["stdout"])
    apply = run.gpufleet(
        "apply", "retuned", "--no-measure", "--timeout", "300", "--release-timeout", "120",
        "--drain-timeout", f"{run.drain_s:g}", timeout=max(run.left(), 120),
    )  # fmt: skip
    run.records["retune"] = {
        "rc": apply["rc"],
        "seconds": apply["seconds"],
        "predicted": predictions(apply["stdout"]),
        "said": said(apply["stdout"]),
    }
    run.gpufleet("status", "--json", timeout=120)
    run.records["after"] = run.server_info()
    run.save()
    if run.records.get("job_asked") and run.left() > 200:
        run.records["job"] = under_the_job(run)
    run.records["crash"] = crash(run)
    run.gpufleet("journal", "--json", timeout=60)


def execute(run: Run) -> int:
    """Start the script's servers, run every step, end whatever is left; write the results."""
    run.records["card"] = run.card()
    fleet = start(run.servers(), run.env, timeout=min(run.budget / 3, 240.0))
    run.records["script"] = {"pids": list(fleet.pids), "group": fleet.group}
    clients: list[tuple[subprocess.Popen[bytes], Path]] = []
    try:
        wait_ready(fleet, min(run.budget / 3, 240.0))
        run.records["ready_s"] = round(run.elapsed(), 1)
        run.records["before"] = run.server_info()
        clients = run.clients()
        run.records["busy"] = run.wait_busy(60.0)
        steps(run)
    except KeyboardInterrupt:  # the caller's deadline (timeout -s INT): keep what was recorded
        run.records["interrupted"] = round(run.elapsed(), 1)
    finally:
        (run.out / "STOP").touch()
        for proc, result in clients:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=60)
            if proc.poll() is None:
                proc.kill()
            with contextlib.suppress(OSError, ValueError):
                run.records.setdefault("clients", {})[result.stem] = json.loads(result.read_text())
        run.gpufleet("sim-fleet", "stop", "--mode", "terminate", timeout=120)
        kill_group(fleet.group)
        run.records["still_answering"] = [p for p in run.ports if answers(f"http://127.0.0.1:{p}")]
        run.save()
        (run.out / "results.md").write_text(table(run.records))
    return 0 if run.records.get("adopt_rc") == 0 else 1


def table(records: dict[str, Any]) -> str:
    """The run in a few lines for ``bench/results-real-sglang.md``."""
    card = records.get("card", {})
    lines = [
        f"card: {card.get('name')} ({card.get('total_gib')} GiB), fractions "
        f"{card.get('fractions')} (static about {card.get('static_gib_about')} GiB), device "
        f"{records.get('device')}, drain deadline {records.get('drain_s')} s",
        "",
        "| step | exit | what gpufleet said (last lines) |",
        "|---|---|---|",
    ]
    for rec in records["commands"]:
        last = (rec["stdout"] or rec["stderr"]).strip().splitlines()[-3:]
        shown = " / ".join(line.strip() for line in last).replace("|", "\\|")[:400]
        lines.append(f"| `{' '.join(rec['argv'][:3])}` | {rec['rc']} | {shown} |")
    lines += ["", "| client | ok | lost | 503 | refused | tok/s |", "|---|---|---|---|---|---|"]
    for name, counts in sorted(records.get("clients", {}).items()):
        lines.append(
            f"| {name} | {counts.get('ok')} | {counts.get('lost')} | {counts.get('s503')} | "
            f"{counts.get('refused')} | {counts.get('tok_s')} |"
        )
    retune = records.get("retune", {})
    lines += ["", "| knobs | preflight (max running, capped) | expected | servers ran |"]
    lines.append("|---|---|---|---|")
    for when, predicted in (("before", records.get("predicted_before")), ("after", None)):
        ran = {p: (s.get("effective_max_running"), s.get("max_running_requests"))
               for p, s in records.get(when, {}).items()}  # fmt: skip
        predicted = retune.get("predicted") if when == "after" else predicted
        lines.append(f"| {when} | {predicted} | {EXPECTED[when]} | {ran} |")
    lines += ["", "retune said:", *(f"    {line}" for line in retune.get("said", []))]
    lines += ["", f"job: {records.get('job')}", f"crash: {records.get('crash')}"]
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
    parser.add_argument("--ports", default="30000,30001")
    parser.add_argument("--device", type=int, default=0, help="the one card both servers share")
    parser.add_argument("--inflight", type=int, default=16)
    parser.add_argument("--drain-s", type=float, default=30.0, help="the drain's deadline")
    parser.add_argument("--job", action="store_true", help="also retune back under generate")
    parser.add_argument("--simulate", action="store_true", help="simulated 0.5.17 servers")
    parser.add_argument("--budget", type=float, default=420.0, help="seconds for the whole run")
    args = parser.parse_args(argv)
    run = Run(
        out=args.out,
        model=str(Path(args.model).resolve()),
        python=args.python,
        ports=[int(p) for p in args.ports.split(",")],
        device=args.device,
        simulate=args.simulate,
        server_pythonpath=args.server_pythonpath,
        inflight=args.inflight,
        drain_s=args.drain_s,
        budget=args.budget,
    )
    run.records["job_asked"] = args.job
    return execute(run)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

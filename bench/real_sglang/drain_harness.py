"""A drain that cannot finish, a job that stops sending first, a crash: gpufleet against a server.

Issue 35 (points 3 and 5), measured the way the seed's operator meets them. Every step goes
through gpufleet's own commands on an isolated state directory, against one server on ``PORT``
(the real SGLang 0.5.17 on the GPU machine, or ``--engine sim``: the simulator's 0.5.17 build
serving the recorded tiny model at 5x, which behaves the same and proves the harness anywhere):

1. ``gpufleet apply`` of the seed's first knobs scaled to the tiny model, (0.30, 80, 0.4, auto),
   with ``[stop] drain_timeout_s`` = ``--drain-s``;
2. **a client that never stops** (``load_client.py``: 16 ``/generate`` in flight, never reads
   ``/health``) while ``gpufleet apply`` retunes to (0.45, 200, 0.6, 64): what the client lost
   beside what gpufleet said (its exit status, the drain lines, the journal's
   ``lost_in_flight``);
3. **the same retune back under ``gpufleet generate``**: the GPU cordoned, the job's
   acknowledgement before the SIGTERM, nothing lost (exit 0, ``lost_in_flight`` 0, the job's
   prompts each done once);
4. **a crash**: the console in a real pty watching the fleet, the server's main pid SIGKILLed
   behind its back: when its panel says ``crashed`` (and its rate is blank), and what ``gpufleet
   status --json`` says after the fact.

Writes ``OUTDIR/drain.json`` and ``OUTDIR/drain.md`` (rows for ``bench/results-real-sglang.md``).

usage: python -m bench.real_sglang.drain_harness OUTDIR MODEL_DIR [--engine sglang|sim]
       [--drain-s S]   (else $HARNESS_DRAIN_S, else 60; $HARNESS_PORT: the port, else 30000)

On the GPU machine: ``HARNESS=bench.real_sglang.drain_harness bash
bench/real_sglang/device_harness.sh all 400 0`` (see docs/real-sglang.md).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.real_sglang.commands import end_job
from bench.real_sglang.harness import (
    COMMON_FLAGS,
    PORT,
    Harness,
    http,
    job_status,
    output_ids,
)
from bench.real_sglang.harness import pipeline_job as start_job

ROOT = Path(__file__).resolve().parents[2]
CLIENT = Path(__file__).with_name("load_client.py")
FIXTURE_MODEL = ROOT / "tests" / "fixtures" / "real_sglang" / "0.5.17" / "model"
BEFORE = {"mem_fraction_static": 0.30, "max_mamba_cache_size": 80, "mamba_full_memory_ratio": 0.4}
"""The seed's first knobs on the tiny model (max running auto: 0.5.17 caps it at 26)."""
AFTER = {
    "mem_fraction_static": 0.45,
    "max_mamba_cache_size": 200,
    "mamba_full_memory_ratio": 0.6,
    "max_running_requests": 64,
}
"""The seed's aggressive knobs on the tiny model."""
CRASHED = re.compile(rf"crashed\s+:{PORT}\b")
"""GPU 0's panel, first row, once it says crashed."""


class Run(Harness):
    """One run: ``Harness``'s state directory and commands, this harness's records."""

    def __init__(self, out: Path, model: str, engine: str, drain_s: float) -> None:
        super().__init__(out, model, "0.5.17")
        self.engine, self.drain_s = engine, drain_s
        self.records.update(engine=engine, drain_s=drain_s)

    def drain_profile(self, name: str, knobs: dict[str, Any]) -> Path:
        """The profile of one knob setting, on this run's engine."""
        if self.engine == "sim":
            engine = ["[engine]", 'kind = "sim"', 'sim_gpu = "h100"']
            engine += [f"sim_model = {json.dumps(str(FIXTURE_MODEL))}", "sim_speed = 5"]
            extra: dict[str, Any] = {"enable_metrics": True, "load_format": "dummy"}
            extra["sim_build"] = "0.5.17"
            env: list[str] = []
        else:
            engine = ["[engine]", 'kind = "sglang"', 'sglang_version = "0.5.17"']
            engine.append(f"python = {json.dumps(sys.executable)}")
            extra = {**COMMON_FLAGS, "disable_cuda_graph": True}
            env = ["[env]", 'HF_HUB_OFFLINE = "1"', 'TRANSFORMERS_OFFLINE = "1"']
            for key in ("PYTHONPATH", "CUDA_HOME", "TVM_FFI_CACHE_DIR", "TRITON_CACHE_DIR"):
                value = os.environ.get(f"SERVER_{key}") or os.environ.get(key)
                if value:
                    env.append(f"{key} = {json.dumps(value)}")
        lines = [f'name = "{name}"', *engine, "[fleet]", "gpus = [0]", f"ports = [{PORT}]"]
        lines += ['host = "127.0.0.1"', 'log_dir = "{state}/logs"', *env, "[server]"]
        lines.append(f"model_path = {json.dumps(self.model)}")
        lines += [f"{key} = {json.dumps(value)}" for key, value in knobs.items()]
        lines.append("[server.extra_flags]")
        lines += [f"{key} = {json.dumps(value)}" for key, value in extra.items()]
        lines += ["[stop]", f"drain_timeout_s = {self.drain_s}"]
        path = self.profiles / f"{name}.toml"
        path.write_text("\n".join(lines) + "\n")
        return path

    def journal_last(self) -> dict[str, Any]:
        rec = self.gpufleet("journal", "--json", "--last", "1", timeout=60, full=True)
        with contextlib.suppress(ValueError, IndexError):
            return dict(json.loads(rec["stdout"].splitlines()[-1]))
        return {}

    def save(self) -> None:
        """Write what is recorded so far (a deadline may end the run before its end)."""
        (self.out / "drain.json").write_text(json.dumps(self.records, indent=1, default=str))

    def retuned(self, apply: dict[str, Any]) -> dict[str, Any]:
        """What an apply said of its drain, and what the journal kept of it."""
        entry = self.journal_last()
        return {
            "apply_rc": apply["rc"],
            "apply_s": apply["seconds"],
            "said": said(apply["stdout"]),
            "journal_lost_in_flight": entry.get("lost_in_flight"),
            # A drain that ended while the client still sent (SGLang's check found none running).
            "journal_client_still_sending": entry.get("client_still_sending"),
            "journal_arrived_during_drain": entry.get("arrived_during_drain"),
            "journal_summary": entry.get("summary"),
        }


def active_generate() -> int:
    """The server's generation requests in flight (its HTTP counter), -1 when it says none."""
    status, text = http("/metrics", timeout=5)
    if status != 200:
        return -1
    found = re.findall(r'^sglang:http_requests_active\{[^}]*endpoint="/generate"[^}]*\} (\S+)',
                       text, re.M)  # fmt: skip
    return int(sum(float(v) for v in found)) if found else -1


def wait(check: Any, limit_s: float) -> bool:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.2)
    return False


def said(stdout: str) -> list[str]:
    """The lines of an apply that speak of the drain, the cordon and the loss."""
    keys = ("cordoned", "arrived", "drain timed out", "lost", "old server", "GPUs ready")
    return [line for line in stdout.splitlines() if any(k in line for k in keys)]


def never_stopping_client(run: Run, after: Path) -> None:
    """Step 2: 16 in flight, never reading /health, through the retune."""
    out, stop = run.out / "client.json", run.out / "client.stop"
    argv = [sys.executable, str(CLIENT), str(PORT), str(out), str(stop), "16", "400", "600"]
    client = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
    try:
        busy = wait(lambda: active_generate() >= 16, 60)
        apply = run.gpufleet("apply", str(after), "--no-measure", full=True)
        client.wait(120)
    finally:
        stop.touch()
        if client.poll() is None:
            client.kill()
            client.wait(10)
    seen: dict[str, Any] = {}
    with contextlib.suppress(OSError, ValueError):
        seen = json.loads(out.read_text())
    run.records["client"] = {
        "sixteen_in_flight_before": busy,
        **run.retuned(apply),
        "client": {k: seen.get(k) for k in ("ok", "lost", "s503", "refused", "seconds", "tok_s")},
    }
    run.save()


def under_the_job(run: Run, before: Path) -> None:
    """Step 3: the retune back while ``gpufleet generate`` sends."""
    proc, job = start_job(run, prompts=2000, max_tokens=400)
    try:
        sending = wait(lambda: job_status(job).get("done", 0) >= 20, 120)
        apply = run.gpufleet("apply", str(before), "--no-measure", full=True)
        done_after = job_status(job).get("done")
    finally:
        end_job(proc)
    ids = output_ids(job)
    final = job_status(job)
    run.records["job"] = {
        "sending_before": sending,
        **run.retuned(apply),
        "done_after_apply": done_after,
        "job": {k: final.get(k) for k in ("state", "done", "failed", "total")},
        "outputs": len(ids),
        "unique": len(set(ids)),
    }
    run.save()


def crash(run: Run, profile: Path) -> None:
    """Step 4: SIGKILL behind the console's back; the panel, then ``status --json``."""
    from bench.real_sglang.screen import PtyScreen

    console = PtyScreen(
        [sys.executable, "-m", "tui", "console", "--profile", str(profile)], env=run.env
    )
    console.start()
    row: dict[str, Any] = {}
    try:
        row["console_ready"] = console.wait_for(lambda s: f":{PORT}" in s and "ready" in s, 90)
        pid = int(
            json.loads((run.state / "fleet_state.json").read_text())["gpus"]["0"]["server"]["pid"]
        )
        console.mark()
        killed = time.monotonic()
        os.kill(pid, signal.SIGKILL)
        shown = console.wait_for(lambda s: CRASHED.search(s) is not None, 30)
        row["panel_crashed_after_s"] = None if shown is None else round(shown - killed, 3)
        time.sleep(2.0)  # the whole screen a moment later (the header's counts, the rates)
        rows = [line.strip("┃│ ") for line in console.text().splitlines()]
        row["panel"] = [line for line in rows if "crashed" in line][:4]
        row["panel_gen"] = [line for line in rows if "gen " in line][:2]
    finally:
        row["console"] = {"screens": console.stop()["screens"]}
    status = run.gpufleet("status", "--json", timeout=120, full=True)
    with contextlib.suppress(ValueError, KeyError, IndexError):
        gpu = json.loads(status["stdout"])["gpus"][0]
        row["status"] = {k: gpu.get(k) for k in ("state", "pid", "exit_status", "error")}
        row["status"]["gen_tokens_per_s"] = gpu.get("gen_tokens_per_s")
    row["status_rc"] = status["rc"]
    run.records["crash"] = row
    run.save()


def table(run: Run) -> str:
    client, job, crashed = (run.records.get(k, {}) for k in ("client", "job", "crash"))
    seen = client.get("client", {})
    lines = [
        "| step | gpufleet said | exit | journal lost_in_flight | what happened |",
        "|---|---|---|---|---|",
        f"| retune under a client that never stops (16 in flight, drain {run.drain_s:g} s) | "
        f"{'; '.join(client.get('said', [])[-2:])} | {client.get('apply_rc')} | "
        f"{client.get('journal_lost_in_flight')} | client: {seen.get('ok')} ok, "
        f"{seen.get('lost')} lost, {seen.get('refused')} refused |",
        f"| retune back under `gpufleet generate` | {'; '.join(job.get('said', [])[:2])} | "
        f"{job.get('apply_rc')} | {job.get('journal_lost_in_flight')} | job "
        f"{job.get('job', {}).get('done')} done, {job.get('job', {}).get('failed')} failed, "
        f"{job.get('outputs')} outputs ({job.get('unique')} unique) |",
        f"| SIGKILL of the main pid | panel: {'; '.join(crashed.get('panel', []))} "
        f"({crashed.get('panel_crashed_after_s')} s after the kill); status: "
        f"{crashed.get('status')} | {crashed.get('status_rc')} | - | - |",
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    args = sys.argv[1:]
    if len(args) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    out, model = Path(args[0]), args[1]
    engine = args[args.index("--engine") + 1] if "--engine" in args else "sglang"
    # device_harness.sh passes its --settings and --budget too: they do not apply here.
    drain_s = float(os.environ.get("HARNESS_DRAIN_S", "60"))
    if "--drain-s" in args:
        drain_s = float(args[args.index("--drain-s") + 1])
    out.mkdir(parents=True, exist_ok=True)
    run = Run(out, model, engine, drain_s)
    before = run.drain_profile("drain-before", BEFORE)
    after = run.drain_profile("drain-after", AFTER)
    try:
        start = run.gpufleet("apply", str(before), "--no-measure")
        run.records["start"] = {"rc": start["rc"], "seconds": start["seconds"]}
        if start["rc"] != 0 or not wait(lambda: http("/health", timeout=5)[0] == 200, 120):
            run.records["aborted"] = "the first start never answered /health"
            return 1
        never_stopping_client(run, after)
        under_the_job(run, before)
        crash(run, before)
    except KeyboardInterrupt:  # the caller's deadline (timeout -s INT): keep what was recorded
        run.records["interrupted"] = round(time.monotonic() - run.t0, 1)
    finally:
        with contextlib.suppress(Exception):
            run.gpufleet("sim-fleet", "stop", "--mode", "kill", timeout=120)
        run.save()
        (out / "drain.md").write_text(table(run))
    print((out / "drain.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())

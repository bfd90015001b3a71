"""The one-GPU harness's steps after the retune (``adopt_real.py``): the retune back under
``gpufleet generate``, and the crash of one server under the console in a pty."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any

from bench.real_sglang.commands import end_job
from bench.real_sglang.harness import job_status

if TYPE_CHECKING:
    from bench.real_sglang.adopt_real import Run


def crash(run: Run) -> dict[str, Any]:
    """The console in a pty; slot 1's main pid SIGKILLed; when its panel says ``crashed``."""
    try:
        from bench.real_sglang.screen import PtyScreen
    except ImportError as exc:  # pyte: bench-only, carried to the GPU machine as a wheel
        return {"skipped": f"no terminal emulator here ({exc})"}

    port = run.ports[-1]
    crashed = re.compile(rf"crashed\s+:{port}\b")
    console = PtyScreen([sys.executable, "-m", "tui", "console"], env=run.env)
    console.start()
    row: dict[str, Any] = {"port": port}
    try:
        both = [rf"ready\s+:{p}\b" for p in run.ports]
        shown = console.wait_for(lambda s: all(re.search(b, s) for b in both), 90)
        row["console_ready"] = shown is not None
        row["titles"] = re.findall(r"GPU \d+ · on device \d+ · [\w ]+?(?= ?[━─┓╮])", console.text())
        gpus = json.loads((run.state / "fleet_state.json").read_text())["gpus"]
        pid = int(gpus[str(len(run.ports) - 1)]["server"]["pid"])
        killed = time.monotonic()
        os.kill(pid, signal.SIGKILL)
        seen = console.wait_for(lambda s: crashed.search(s) is not None, 30)
        row["panel_crashed_after_s"] = None if seen is None else round(seen - killed, 3)
        rows = [line.strip("┃│ ") for line in console.text().splitlines()]
        row["panel"] = [line for line in rows if "crashed" in line][:3]
    finally:
        row["screens"] = console.stop()["screens"]
    status = run.gpufleet("status", "--json", timeout=120)
    with contextlib.suppress(ValueError, KeyError, IndexError):
        gpu = json.loads(status["stdout"])["gpus"][-1]
        row["status"] = {k: gpu.get(k) for k in ("gpu", "device", "state", "pid", "exit_status")}
    return row


def under_the_job(run: Run) -> dict[str, Any]:
    """The retune back while ``gpufleet generate`` sends to both: cordoned, nothing lost."""
    from bench.real_sglang.adopt_real import said
    from bench.simfleet import write_prompts

    work = run.out / "job"
    work.mkdir(exist_ok=True)
    prompts = write_prompts(work / "prompts.jsonl", 4000)
    argv = [sys.executable, "-m", "tui", "generate", "--prompts", str(prompts), "--out"]
    argv += [str(work / "out"), "--status", str(work / "status.json"), "--max-tokens", "200"]
    for port in run.ports:
        argv += ["--server", f"http://127.0.0.1:{port}"]
    with (work / "generate.log").open("wb") as log:
        job = subprocess.Popen(argv, env=run.env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while job_status(work).get("done", 0) < 20 and time.monotonic() < deadline:
            time.sleep(0.5)  # the job sends to both before the retune begins
        sending = job_status(work).get("done", 0) >= 20
        apply = run.gpufleet("apply", "adopted-auto", "--no-measure", timeout=max(run.left(), 60))
    finally:
        end_job(job)
    status = job_status(work)
    return {"sending_before": sending, "rc": apply["rc"], "said": said(apply["stdout"]),
            "done": status.get("done"), "failed": status.get("failed")}  # fmt: skip

"""``sglang_version = "auto"`` against a real SGLang 0.5.17: what the preflight predicts beside
what the server then runs (issue 35, point 4).

The profiles are the harness's (``bench.real_sglang.harness.Harness.profile``: the GPU machine's
python, SGLang on the profile's ``[env] PYTHONPATH`` from ``SERVER_PYTHONPATH``), with
``sglang_version = "auto"``, at the issue's two settings:

- ``auto-80``: fraction 0.45, 80 Mamba slots, ratio 0.4, max running auto. 0.5.17 takes 3
  slots a request for the tiny ``Qwen3_5ForCausalLM``: 80 // 3 = 26, capped (0.5.23's
  arithmetic said 16);
- ``auto-200``: fraction 0.45, 200 slots, ratio 0.6, max running 64: 200 // 3 = 66 >= 64, not
  capped (0.5.23's said 40).

For each, ``gpufleet apply PROFILE --preflight-only`` (the planned-for line and the prediction);
with ``--launch`` then ``gpufleet apply PROFILE --no-measure`` (the first starts the server, the
second retunes it, its preflight calibrated on the first launch's log), ``gpufleet status
--json`` and the server's own ``/server_info`` and log, and at the end ``gpufleet sim-fleet
stop``. Writes ``OUTDIR/results.json`` and ``OUTDIR/results.md``; exits 0 when every prediction
matched (and, with ``--launch``, the server ran what was predicted), else 1.

``--simulate`` runs the same commands here, without a GPU: ``SERVER_PYTHONPATH`` becomes a
stand-in ``sglang`` package written under OUTDIR (``_version.py`` says 0.5.17; its
``launch_server`` execs ``gpufleet sim --sim-build 0.5.17 --sim-gpu h100``, the simulator as the
real 0.5.17), and the preflight is given ``--card h100`` (no driver here).

usage: python -m bench.real_sglang.auto_check OUTDIR MODEL_DIR [--launch] [--simulate]
       (the port: ``HARNESS_PORT``, default 30000)
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

from bench.real_sglang.harness import Harness, Setting

ROOT = Path(__file__).resolve().parents[2]

SETTINGS = (
    Setting("auto-80", {"mem_fraction_static": 0.45, "max_mamba_cache_size": 80,
                        "mamba_full_memory_ratio": 0.4},
            note="80 slots, max running auto: 0.5.17 caps at 80 // 3 = 26"),
    Setting("auto-200", {"mem_fraction_static": 0.45, "max_mamba_cache_size": 200,
                         "mamba_full_memory_ratio": 0.6, "max_running_requests": 64},
            note="200 slots hold 66 requests: 64 asked run uncapped"),
)  # fmt: skip
EXPECTED = {"auto-80": (26, True), "auto-200": (64, False)}
"""What the real 0.5.17 ran at each setting on the H100 (issue 35): max running, capped."""

PREDICTED = re.compile(r"max_running (\S+) -> (\d+)( \(capped\))?")

SHIM_LAUNCH = '''\
"""sglang.launch_server stand-in: gpufleet's simulator as SGLang 0.5.17 (auto_check --simulate)."""
import os
import sys

argv = sys.argv[1:]
model = argv[argv.index("--model-path") + 1]
os.execv(sys.executable, [sys.executable, "-m", "tui", "sim", *argv, "--sim-build", "0.5.17",
                          "--sim-gpu", "h100", "--sim-model", model, "--sim-speed", "20"])
'''


def write_shim(out: Path) -> Path:
    """A stand-in ``sglang`` package (0.5.17) whose ``launch_server`` runs the simulator."""
    package = out / "shim" / "sglang"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text("")
    (package / "_version.py").write_text('__version__ = version = "0.5.17"\n')
    (package / "launch_server.py").write_text(SHIM_LAUNCH)
    return package.parent


def preflight(h: Harness, profile: Path, card: list[str]) -> dict[str, Any]:
    """``gpufleet apply PROFILE --preflight-only``: its exit, lines and prediction for GPU 0."""
    rec = h.gpufleet("apply", str(profile), "--preflight-only", *card, timeout=120)
    lines = rec["stdout"].strip().splitlines()
    row: dict[str, Any] = {"rc": rec["rc"], "lines": lines, "stderr": rec["stderr"].strip()}
    row["planned_for"] = next((x for x in lines if x.startswith("preflight planned for")), None)
    found = next((PREDICTED.search(x) for x in lines if PREDICTED.search(x)), None)
    if found is not None:
        row["max_running"], row["capped"] = int(found.group(2)), bool(found.group(3))
    row["calibrated"] = any(x.endswith("(calibrated)") for x in lines)
    return row


def launched(h: Harness, profile: Path, log: Path) -> dict[str, Any]:
    """``gpufleet apply PROFILE --no-measure``, then what gpufleet and the server say."""
    rec = h.gpufleet("apply", str(profile), "--no-measure", timeout=600)
    row: dict[str, Any] = {"apply_rc": rec["rc"], "apply_tail": rec["stdout"].splitlines()[-4:]}
    status = h.gpufleet("status", "--json", timeout=60)
    with contextlib.suppress(ValueError, KeyError, IndexError):
        gpu = json.loads(status["stdout"])["gpus"][0]
        row["gpufleet"] = {"state": gpu.get("state"), **gpu.get("effective", {})}
    row["server"] = h.server_numbers(log)
    return row


def run(h: Harness, launch: bool, card: list[str]) -> list[dict[str, Any]]:
    log = h.state / "logs" / "sglang_gpu0.log"
    rows = []
    for setting in SETTINGS:
        path = h.profile(setting)
        row: dict[str, Any] = {"setting": setting.name, "knobs": setting.knobs}
        row["preflight"] = preflight(h, path, card)
        if launch:
            row.update(launched(h, path, log))
        rows.append(row)
        h.records["settings"] = rows
        h.save()
    return rows


def verdict(row: dict[str, Any], launch: bool) -> bool:
    """The prediction is 0.5.17's, and the server (when launched) ran it."""
    pre = row["preflight"]
    want = EXPECTED[row["setting"]]
    ok = pre["rc"] == 0 and (pre.get("max_running"), pre.get("capped")) == want
    ok = ok and "SGLang 0.5.17 (auto: " in (pre.get("planned_for") or "")
    if launch:
        ran = row.get("server", {}).get("log", {})
        ok = ok and (ran.get("max_running"), bool(ran.get("capped"))) == want
    return ok


def write_table(h: Harness, rows: list[dict[str, Any]], launch: bool) -> str:
    lines = [
        "| setting | knobs | planned for | preflight: max running (capped), sizes | server ran: "
        "max running (cap line) | as expected |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        pre = row["preflight"]
        knobs = ", ".join(f"{k}={v}" for k, v in row["knobs"].items())
        planned = (pre.get("planned_for") or "-").removeprefix("preflight planned for ")
        source = "calibrated" if pre.get("calibrated") else "model constants"
        ran = row.get("server", {}).get("log", {}) if launch else {}
        server = f"{ran.get('max_running')} ({ran.get('capped')})" if launch else "(not launched)"
        lines.append(
            f"| {row['setting']} | {knobs} | {planned} | {pre.get('max_running')} "
            f"({pre.get('capped')}), {source} | {server} | "
            f"{'yes' if verdict(row, launch) else 'NO'} |"
        )
    table = "\n".join(lines) + "\n"
    (h.out / "results.md").write_text(table)
    return table


def main(argv: list[str]) -> int:
    out, model = Path(argv[0]), str(Path(argv[1]).resolve())
    launch, simulate = "--launch" in argv, "--simulate" in argv
    card: list[str] = []
    if simulate:
        shim = write_shim(out)
        os.environ["SERVER_PYTHONPATH"] = f"{shim}:{ROOT}"
        card = ["--card", "h100"]
    h = Harness(out, model, "auto")
    rows: list[dict[str, Any]] = []
    try:
        rows = run(h, launch, card)
    except KeyboardInterrupt:  # the caller's deadline (timeout -s INT): keep what was recorded
        h.records["interrupted"] = round(h.elapsed(), 1)
    finally:
        if launch:
            with contextlib.suppress(Exception):
                h.gpufleet("sim-fleet", "stop", "--mode", "terminate", timeout=120)
        h.save()
    print(write_table(h, rows, launch))
    return 0 if rows and all(verdict(row, launch) for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""gpufleet against a real SGLang server: what gpufleet says beside what the server says.

Run on the GPU machine from the repository root (``bench/real_sglang/device_harness.sh`` sets the
environment: SGLang on ``SGLANG_SITE``, gpufleet's own dependencies on ``PYTHONPATH``). Every step
goes through gpufleet's own commands, as an operator would type them, on an isolated state
directory:

1. ``gpufleet apply`` of the first knob setting starts the real server from nothing;
2. the console runs in a real pty the whole time; at each relaunch the harness notes when the log
   file gets ``The server is fired up and ready to roll!`` and when the console's GPU 0 panel says
   ``ready`` (the target: within 0.5 s);
3. at each knob setting (``SETTINGS``) ``gpufleet status --json`` (its exit code and its numbers)
   is set beside the server's own ``/server_info`` and its log lines (``gpufleet logs parse``):
   KV tokens, Mamba slots, effective max running requests, the cap;
4. one relaunch is made with >= 8 requests in flight (the drain must lose none), one while the
   pipeline (``gpufleet generate``) sends (its job must end with every prompt done exactly once);
5. the last stop goes through ``gpufleet sim-fleet stop`` (the fleet state's own stop).

Writes ``OUTDIR/results.json`` and ``OUTDIR/results.md`` (the table for
``bench/results-real-sglang.md``), and leaves every log under ``OUTDIR/state``.

usage: python -m bench.real_sglang.harness OUTDIR MODEL_DIR [--settings a,b,...] [--budget S]
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.real_sglang.commands import gpufleet_command
from bench.real_sglang.slots import COMMON_FLAGS

if TYPE_CHECKING:  # imported where the console runs: the rest needs no pyte (auto_check.py)
    from bench.real_sglang.screen import PtyScreen

PORT = int(os.environ.get("HARNESS_PORT", "30000"))
BASE = f"http://127.0.0.1:{PORT}"
FIRED_UP = "The server is fired up and ready to roll!"
PANEL_READY = re.compile(rf"ready\s+:{PORT}\b")
"""GPU 0's panel, first row: its state, then its port (``ready  :30000 pid 4242``)."""


def panel_ready(screen: str) -> bool:
    return PANEL_READY.search(screen) is not None


SPEC = {
    "speculative_algorithm": "NEXTN",
    "speculative_num_steps": 3,
    "speculative_eagle_topk": 1,
    "speculative_num_draft_tokens": 4,
}


@dataclass(frozen=True)
class Setting:
    """One knob setting: the profile's first-class knobs and extra flags."""

    name: str
    knobs: dict[str, Any]
    extra: dict[str, Any] = field(default_factory=dict)
    note: str = ""


SETTINGS: dict[str, Setting] = {
    s.name: s
    for s in (
        Setting("s1-explicit", {"mem_fraction_static": 0.2, "max_mamba_cache_size": 64,
                                "max_running_requests": 16}, note="pool 64, 16 asked: no cap"),
        Setting("s2-cap", {"mem_fraction_static": 0.3, "max_mamba_cache_size": 32,
                           "max_running_requests": 64}, note="pool 32 caps 64 asked"),
        Setting("s3-ratio", {"mem_fraction_static": 0.25, "mamba_full_memory_ratio": 2.0,
                             "max_running_requests": 8}, note="auto pool at ratio 2.0"),
        Setting("s4-auto", {"mem_fraction_static": 0.2}, note="everything else auto"),
        Setting("s5-spec-cap", {"mem_fraction_static": 0.25, "max_mamba_cache_size": 80,
                                "mamba_full_memory_ratio": 0.4, "max_running_requests": 64,
                                "mamba_radix_cache_strategy": "extra_buffer", **SPEC},
                note="the seed's knobs scaled down: MTP draft, pool 80 caps 64 asked"),
        Setting("s6-spec-auto", {"mem_fraction_static": 0.25, **SPEC},
                note="MTP draft, max running reset to 48"),
    )
}  # fmt: skip


def http(path: str, body: dict[str, Any] | None = None, timeout: float = 30.0) -> tuple[int, str]:
    """(status, text); -1 and the error's text when the connection fails."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(
        BASE + path, data=data, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read().decode(errors="replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")
    except (OSError, ValueError) as exc:
        return -1, f"{type(exc).__name__}: {exc}"


class Harness:
    """One run: the state directory, the profiles, the console, the records."""

    def __init__(self, out: Path, model: str, version: str) -> None:
        self.out = out
        self.model = model
        self.version = version
        self.state = out / "state"
        self.profiles = out / "profiles"
        self.state.mkdir(parents=True, exist_ok=True)
        self.profiles.mkdir(parents=True, exist_ok=True)
        self.env = dict(os.environ, GPUFLEET_STATE_DIR=str(self.state), PYTHONUNBUFFERED="1")
        self.records: dict[str, Any] = {"settings": [], "events": []}
        self.console: PtyScreen | None = None
        self.t0 = time.monotonic()

    # -- gpufleet's own commands ---------------------------------------------------------
    def gpufleet(self, *args: str, timeout: float = 300.0, full: bool = False) -> dict[str, Any]:
        rec, out = gpufleet_command(self.env, args, timeout)
        rec["stdout"], rec["stderr"] = out[-6000:], rec["stderr"][-3000:]
        self.records["events"].append(rec)
        if full:
            rec = {**rec, "stdout": out}
        print(
            f"[{self.elapsed():6.1f}] gpufleet {' '.join(args)} -> {rec['rc']} ({rec['seconds']} s)"
        )
        return rec

    def save(self) -> None:
        """Write what is recorded so far (a deadline may end the run before its end)."""
        (self.out / "results.json").write_text(json.dumps(self.records, indent=1, default=str))

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def profile(self, setting: Setting) -> Path:
        lines = [
            f'name = "{setting.name}"',
            f'note = "{setting.note}"',
            "[engine]",
            'kind = "sglang"',
            f'sglang_version = "{self.version}"',
            f"python = {json.dumps(sys.executable)}",
            "[fleet]",
            "gpus = [0]",
            f"ports = [{PORT}]",
            'host = "127.0.0.1"',
            'log_dir = "{state}/logs"',
            "[env]",
        ]
        for key in ("PYTHONPATH", "CUDA_HOME", "TVM_FFI_CACHE_DIR", "TRITON_CACHE_DIR"):
            if os.environ.get(f"SERVER_{key}") or os.environ.get(key):
                value = os.environ.get(f"SERVER_{key}") or os.environ[key]
                lines.append(f"{key} = {json.dumps(value)}")
        lines += ['HF_HUB_OFFLINE = "1"', 'TRANSFORMERS_OFFLINE = "1"', "[server]"]
        lines.append(f"model_path = {json.dumps(self.model)}")
        for key, value in setting.knobs.items():
            lines.append(f"{key} = {json.dumps(value)}")
        lines.append("[server.extra_flags]")
        for key, value in {**COMMON_FLAGS, **setting.extra}.items():
            lines.append(f"{key} = {json.dumps(value)}")
        path = self.profiles / f"{setting.name}.toml"
        path.write_text("\n".join(lines) + "\n")
        return path

    # -- what the server says itself -------------------------------------------------------
    def server_numbers(self, log: Path) -> dict[str, Any]:
        status, text = http("/server_info")
        info: dict[str, Any] = {"status": status}
        if status == 200:
            top = json.loads(text)
            inner = (top.get("internal_states") or [{}])[0]
            info.update(
                version=top.get("version"),
                kv_tokens=top.get("max_total_num_tokens"),
                mamba_slots=inner.get("max_mamba_cache_size"),
                effective_max_running=inner.get("effective_max_running_requests_per_dp"),
                arg_max_running=top.get("max_running_requests"),
            )
        parsed = self.gpufleet("logs", "parse", str(log), timeout=60, full=True)
        events = []
        for line in parsed["stdout"].splitlines():
            with contextlib.suppress(ValueError):
                events.append(json.loads(line))
        self.records["events"][-1]["stdout"] = f"({len(events)} events)"
        last_start = max(
            (i for i, e in enumerate(events) if e.get("kind") == "server_args"), default=0
        )
        mine = events[last_start:]
        kinds = [e.get("kind") for e in mine]
        pool: dict[str, Any] = next((e for e in reversed(mine) if e.get("kind") == "pool"), {})
        mamba: dict[str, Any] = next(
            (e for e in reversed(mine) if e.get("kind") == "mamba_cache"), {}
        )
        info["log"] = {
            "kv_tokens": pool.get("max_total_num_tokens"),
            "max_running": pool.get("max_running_requests"),
            "mamba_slots": mamba.get("max_mamba_cache_size"),
            "capped": "cap" in kinds,
            "kinds": sorted(set(k for k in kinds if k)),
        }
        return info

    def plan_against_log(self, profile: Path, log: Path) -> dict[str, Any]:
        """``gpufleet plan MODEL --build B --log LOG FLAGS``: the planner's prediction from the
        model's config beside the allocation lines this launch printed (exit 0: agrees)."""
        argv = self.gpufleet("profile", "argv", str(profile), "--gpu", "0", timeout=60)
        try:
            launch = json.loads(argv["stdout"])
        except ValueError:
            return {"rc": None, "error": "no argv"}
        flags = launch[launch.index("sglang.launch_server") + 1 :]
        for name in ("--model-path", "--host", "--port"):
            if name in flags:
                i = flags.index(name)
                del flags[i : i + 2]
        build = self.version if self.version in ("0.5.17", "0.5.23") else "0.5.23"
        rec = self.gpufleet(
            "plan", self.model, "--build", build, "--log", str(log), *flags, timeout=60
        )
        return {"rc": rec["rc"], "tail": rec["stdout"].strip().splitlines()[-12:]}

    def wait_ready(self, limit_s: float) -> bool:
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            if http("/health", timeout=5)[0] == 200:
                return True
            time.sleep(0.5)
        return False

    # -- load -------------------------------------------------------------------------------
    def inflight(self, n: int, tokens: int) -> tuple[list[dict[str, Any]], list[threading.Thread]]:
        results: list[dict[str, Any]] = []

        def one(i: int) -> None:
            body = {
                "text": f"Request {i}: a long story about the sea.",
                "sampling_params": {"max_new_tokens": tokens, "ignore_eos": True},
            }
            status, text = http("/generate", body, timeout=600)
            got = None
            if status == 200:
                with contextlib.suppress(ValueError, KeyError, TypeError):
                    got = json.loads(text)["meta_info"]["completion_tokens"]
            results.append({"i": i, "status": status, "tokens": got, "error": text[:200]})

        threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(n)]
        for t in threads:
            t.start()
        return results, threads

    def running(self) -> float:
        status, text = http("/metrics", timeout=5)
        if status != 200:
            return -1.0
        for line in text.splitlines():
            if line.startswith("sglang:num_running_reqs"):
                return float(line.rsplit(" ", 1)[1])
        return -1.0

    # -- one relaunch, watched --------------------------------------------------------------
    def apply(self, setting: Setting, log: Path, **extra: Any) -> dict[str, Any]:
        """``gpufleet apply`` the setting; the log's ready line and the console's word timed."""
        path = self.profile(setting)
        pre = self.gpufleet("apply", str(path), "--preflight-only", timeout=120)
        first = log.stat() if log.exists() else None
        fired: dict[str, float] = {}
        stop_watch = threading.Event()

        def watch_log() -> None:
            # The moment the ready line reaches the file, to the poll's 10 ms. A relaunch
            # rotates the log (a new file, a new inode): read the new one from its start.
            while not stop_watch.is_set() and "at" not in fired:
                with contextlib.suppress(OSError):
                    now = log.stat()
                    same = first is not None and now.st_ino == first.st_ino
                    with log.open("rb") as fh:
                        fh.seek(first.st_size if same and first is not None else 0)
                        if FIRED_UP.encode() in fh.read():
                            fired["at"] = time.monotonic()
                time.sleep(0.01)

        watcher = threading.Thread(target=watch_log, daemon=True)
        watcher.start()
        console_left = console_ready = None
        if self.console is not None:
            self.console.mark()
        measure = list(extra.pop("measure", ["--no-measure"]))
        rec = self.gpufleet("apply", str(path), "--stop-mode", "drain", *measure, timeout=420)
        if self.console is not None:
            # the console may show the word a beat after the command returned: give it 15 s
            self.console.wait_for(panel_ready, 15)
            console_left = self.console.first_since_mark(lambda s: not panel_ready(s))
            console_ready = self.console.first_after(console_left, panel_ready)
        stop_watch.set()
        watcher.join(2)
        row: dict[str, Any] = {
            "setting": setting.name,
            "note": setting.note,
            "knobs": setting.knobs,
            "preflight": pre["stdout"].strip().splitlines()[:6],
            "apply_rc": rec["rc"],
            "apply_s": rec["seconds"],
            "apply_tail": rec["stdout"].strip().splitlines()[-6:],
            **extra,
        }
        if "at" in fired and console_ready is not None:
            row["console_ready_after_log_s"] = round(console_ready - fired["at"], 3)
        row["console_seen"] = {
            "left_ready": console_left is not None,
            "ready_again": console_ready is not None,
            "fired_up_seen": "at" in fired,
        }
        status = self.gpufleet("status", "--json", timeout=60)
        row["status_rc"] = status["rc"]
        try:
            doc = json.loads(status["stdout"])
            gpu = doc["gpus"][0]
            row["gpufleet"] = {
                "state": gpu.get("state"),
                **gpu.get("effective", {}),
                "requested": gpu.get("requested"),
            }
        except (ValueError, KeyError, IndexError) as exc:
            row["gpufleet"] = {"error": f"{type(exc).__name__}: {exc}"}
        row["server"] = self.server_numbers(log)
        row["agree"] = agreement(row)
        row["plan"] = self.plan_against_log(path, log)
        self.records["settings"].append(row)
        self.save()
        print(f"[{self.elapsed():6.1f}] {setting.name}: {json.dumps(row['agree'])}")
        return row


def agreement(row: dict[str, Any]) -> dict[str, Any]:
    """Each number gpufleet shows against the server's /server_info and log: equal or not."""
    g, s = row.get("gpufleet", {}), row.get("server", {})
    log = s.get("log", {})
    return {
        "kv_tokens": g.get("kv_tokens") == s.get("kv_tokens") == log.get("kv_tokens"),
        "mamba_slots": g.get("mamba_slots") == s.get("mamba_slots") == log.get("mamba_slots"),
        "max_running": g.get("max_running_requests")
        == s.get("effective_max_running")
        == log.get("max_running"),
        "capped": bool(g.get("capped")) == bool(log.get("capped")),
    }


def pipeline_job(h: Harness, prompts: int, max_tokens: int) -> tuple[subprocess.Popen[str], Path]:
    """Start ``gpufleet generate`` against the fleet's server, writing its status document."""
    job = h.out / "job"
    job.mkdir(exist_ok=True)
    path = job / "prompts.jsonl"
    with path.open("w") as fh:
        for i in range(prompts):
            body = {"model": "tiny", "messages": [{"role": "user", "content": f"story {i}"}]}
            line = {"custom_id": f"p{i}", "method": "POST", "url": "/v1/chat/completions"}
            fh.write(json.dumps({**line, "body": {**body, "max_tokens": max_tokens}}) + "\n")
    argv = [sys.executable, "-m", "tui", "generate", "--prompts", str(path)]
    argv += ["--out", str(job / "out"), "--server", BASE, "--status", str(job / "status.json")]
    log = (job / "generate.log").open("w")
    proc = subprocess.Popen(argv, env=h.env, stdout=log, stderr=subprocess.STDOUT, text=True)
    return proc, job


def job_status(job: Path) -> dict[str, Any]:
    with contextlib.suppress(OSError, ValueError):
        return dict(json.loads((job / "status.json").read_text()))
    return {}


def output_ids(job: Path) -> list[str]:
    ids: list[str] = []
    for shard in sorted((job / "out").rglob("*.jsonl")):
        for line in shard.read_text().splitlines():
            with contextlib.suppress(ValueError, KeyError):
                ids.append(json.loads(line)["custom_id"])
    return ids


def run(h: Harness, names: list[str], budget: float) -> None:
    log = h.state / "logs" / "sglang_gpu0.log"
    first = SETTINGS[names[0]]
    h.records["first_setting"] = first.name
    start = h.gpufleet("apply", str(h.profile(first)), timeout=420)
    h.records["first_start"] = {"rc": start["rc"], "seconds": start["seconds"]}
    if not h.wait_ready(30):
        h.records["aborted"] = "the first start never answered /health"
        return
    from bench.real_sglang.screen import PtyScreen

    h.console = PtyScreen(
        [
            sys.executable,
            "-m",
            "tui",
            "console",
            "--profile",
            str(h.profiles / f"{first.name}.toml"),
        ],
        env=h.env,
        size=(160, 45),
    )
    h.console.start()
    h.console.wait_for(panel_ready, 60)
    h.records["settings"].append({"setting": first.name, "first": True, **numbers_now(h, log)})
    for i, name in enumerate(names[1:], start=1):
        if h.elapsed() > budget:
            h.records["events"].append({"skipped": name, "why": "budget"})
            continue
        setting = SETTINGS[name]
        if i == 1:
            # The drain: twelve long requests in flight when the relaunch stops the server.
            results, threads = h.inflight(12, 1500)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and h.running() < 8:
                time.sleep(0.2)
            at_stop = h.running()
            row = h.apply(setting, log, running_at_stop=at_stop)
            for t in threads:
                t.join(120)
            lost = [r for r in results if r["status"] != 200 or r["tokens"] != 1500]
            row["drain"] = {"in_flight": len(results), "running_at_stop": at_stop,
                            "lost": len(lost), "lost_detail": lost[:3]}  # fmt: skip
        elif i == 3:
            # A retune while the job sends: the pipeline must finish every prompt exactly once.
            proc, job = pipeline_job(h, prompts=300, max_tokens=200)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and job_status(job).get("done", 0) < 30:
                time.sleep(0.5)
            before = job_status(job)
            # the one apply that measures: the job's throughput before and after the retune
            window = ["--window", "15", "--warmup", "5", "--interval", "1"]
            row = h.apply(setting, log, job_done_before=before.get("done"), measure=window)
            try:
                proc.wait(240)
            except subprocess.TimeoutExpired:
                proc.terminate()
                proc.wait(30)
            final = job_status(job)
            ids = output_ids(job)
            row["job"] = {
                "exit": proc.returncode,
                "state": final.get("state"),
                "done": final.get("done"),
                "failed": final.get("failed"),
                "total": final.get("total"),
                "outputs": len(ids),
                "unique": len(set(ids)),
            }
        else:
            h.apply(setting, log)
    live_tests(h, log)
    # The last stop through the fleet state's own door, after the clock "stepped" +24 s (every
    # wall-clock time in the record shifted) and with a foreign process group recorded as the
    # server's: the server must still be ours (start ticks, boot id, launch id), the stop must
    # reach it, and the foreign group must keep every process.
    foreign = subprocess.Popen(
        ["bash", "-c", "sleep 2001 & sleep 2002 & wait"], start_new_session=True
    )
    time.sleep(0.3)  # let bash start its two children (counted below, before and after)
    group_before = group_size(foreign.pid)
    shifted = shift_state(h.state / "fleet_state.json", seconds=24.0, pgid=foreign.pid)
    status = h.gpufleet("status", "--json", timeout=60)
    stop = h.gpufleet("sim-fleet", "stop", timeout=180)
    group_after = group_size(foreign.pid)
    with contextlib.suppress(OSError):
        os.killpg(foreign.pid, 9)
    foreign.wait(10)
    h.records["final_stop"] = {
        "state_shifted": shifted,
        "status_rc_after_shift": status["rc"],
        "rc": stop["rc"],
        "tail": stop["stdout"].strip().splitlines()[-4:],
        "foreign_group_before": group_before,
        "foreign_group_after": group_after,
    }
    h.records["health_after_stop"] = http("/health", timeout=3)[0]


def live_tests(h: Harness, log: Path) -> None:
    """The gpu-marked tests that read a live server (tests/core/test_sglang_live.py), on this
    one."""
    tests = Path("tests/core/test_sglang_live.py")
    if not tests.exists():
        return
    env = dict(
        h.env,
        GPUFLEET_LIVE_SGLANG=f"127.0.0.1:{PORT}",
        GPUFLEET_LIVE_SGLANG_LOG=str(log),
        GPUFLEET_LIVE_SGLANG_PYTHON=sys.executable,
        GPUFLEET_LIVE_SGLANG_PYTHONPATH=os.environ.get("SERVER_PYTHONPATH", ""),
    )
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "gpu"]
    try:
        done = subprocess.run(
            [*argv, str(tests)], env=env, capture_output=True, text=True, timeout=180, check=False
        )
        h.records["live_tests"] = {"rc": done.returncode, "tail": done.stdout[-3000:]}
    except subprocess.TimeoutExpired:
        h.records["live_tests"] = {"rc": None, "tail": "timed out after 180 s"}
    print(f"[{h.elapsed():6.1f}] live tests -> {h.records['live_tests']['rc']}")


def group_size(pgid: int) -> int:
    done = subprocess.run(["pgrep", "-g", str(pgid)], capture_output=True, text=True, check=False)
    return len(done.stdout.split())


def shift_state(path: Path, seconds: float, pgid: int) -> list[str]:
    """Shift every server's wall-clock ``create_time`` by ``seconds`` and record ``pgid`` as its
    group: what a clock step and a damaged record look like to the next command."""
    doc = json.loads(path.read_text())
    changed = []
    for gpu, entry in (doc.get("gpus") or {}).items():
        server = entry.get("server") if isinstance(entry, dict) else None
        if isinstance(server, dict) and "create_time" in server:
            server["create_time"] = float(server["create_time"]) + seconds
            server["pgid"] = pgid
            changed.append(gpu)
    path.write_text(json.dumps(doc))
    return changed


def numbers_now(h: Harness, log: Path) -> dict[str, Any]:
    status = h.gpufleet("status", "--json", timeout=60)
    row: dict[str, Any] = {"status_rc": status["rc"]}
    with contextlib.suppress(ValueError, KeyError, IndexError):
        gpu = json.loads(status["stdout"])["gpus"][0]
        row["gpufleet"] = {"state": gpu.get("state"), **gpu.get("effective", {})}
    row["server"] = h.server_numbers(log)
    row["agree"] = agreement(row)
    row["plan"] = h.plan_against_log(h.profiles / f"{first_name(h)}.toml", log)
    return row


def first_name(h: Harness) -> str:
    return str(h.records.get("first_setting", ""))


def write_table(h: Harness) -> None:
    lines = [
        "| setting | knobs | gpufleet KV / Mamba / max running (capped) | server /server_info "
        "| server log | agree | planner vs log (exit) | console ready after log line |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in h.records["settings"]:
        g, s = row.get("gpufleet", {}), row.get("server", {})
        log = s.get("log", {})
        knobs = ", ".join(f"{k}={v}" for k, v in (row.get("knobs") or {}).items())
        agree = row.get("agree", {})
        ok = "yes" if agree and all(agree.values()) else f"NO {agree}"
        console = row.get("console_ready_after_log_s")
        lines.append(
            f"| {row['setting']} | {knobs or '(first start)'} | {g.get('kv_tokens')} / "
            f"{g.get('mamba_slots')} / {g.get('max_running_requests')} ({g.get('capped')}) | "
            f"{s.get('kv_tokens')} / {s.get('mamba_slots')} / {s.get('effective_max_running')} | "
            f"{log.get('kv_tokens')} / {log.get('mamba_slots')} / {log.get('max_running')} "
            f"(cap line: {log.get('capped')}) | {ok} | {row.get('plan', {}).get('rc')} | "
            f"{'-' if console is None else f'{console:.3f} s'} |"
        )
    (h.out / "results.md").write_text("\n".join(lines) + "\n")


def main() -> int:
    args = sys.argv[1:]
    out, model = Path(args[0]), args[1]
    names = list(SETTINGS)
    budget = 1e9
    version = os.environ.get("HARNESS_SGLANG_VERSION", "0.5.17")
    for i, arg in enumerate(args):
        if arg == "--settings":
            names = args[i + 1].split(",")
        if arg == "--budget":
            budget = float(args[i + 1])
    h = Harness(out, model, version)
    try:
        run(h, names, budget)
    except KeyboardInterrupt:  # the caller's deadline (timeout -s INT): keep what was recorded
        h.records["interrupted"] = round(h.elapsed(), 1)
    finally:
        if h.console is not None:
            h.records["console"] = h.console.stop()
        with contextlib.suppress(Exception):
            h.gpufleet("sim-fleet", "stop", "--mode", "kill", timeout=120)
        h.save()
        write_table(h)
    print((out / "results.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())

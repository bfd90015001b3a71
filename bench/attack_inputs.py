"""Issue 31's attacks on gpufleet's inputs: the agent's API (paths, loader variables, scopes, a
400 MiB body), a FIFO or ``/dev/zero`` for every file a command reads, and the agent started on a
damaged fleet state. Part of ``bench.attacks``; each function returns table rows."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import psutil

from bench.attack_kit import ROOT, Row, Run, Workspace, alive, poll, started
from bench.ports import free_ports

SHIPPED = ROOT / "profiles"
TOKENS = {"read": "read-token-0123456789", "operate": "operate-token-0123456789"}
ADMIN = "admin-token-0123456789"
MIB = 1 << 20


def _bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def _http_row(attack: str, method: str, url: str, answer: httpx.Response, want: int) -> Row:
    """A row for one HTTP request: its status stands for the exit code."""
    first = answer.text.strip().splitlines()[0] if answer.text.strip() else ""
    run = Run([method, url.split("/api/v1", 1)[-1]], answer.status_code, "", answer.text, 0.0)
    ok = answer.status_code == want and "Traceback" not in answer.text
    return Row(attack, run, "-", ok, first, f"want {want}")


def agent_rows(ws: Workspace) -> list[Row]:
    """An agent with read, operate and admin tokens on a 1-GPU fleet, attacked over loopback."""
    rows: list[Row] = []
    up = ws.up()
    if up.rc != 0:
        return [Row("agent: fleet up", up, "-", False, note="the fleet did not start")]
    token_file = ws.root / "agent.token"
    token_file.write_text(f"read {TOKENS['read']}\noperate {TOKENS['operate']}\n{ADMIN}\n")
    token_file.chmod(0o600)
    evil = (ws.profiles / "atk-base.toml").read_text().replace('"atk-base"', '"atk-evil"')
    (ws.profiles / "atk-evil.toml").write_text(evil + '\n[env]\nLD_PRELOAD = "/tmp/evil.so"\n')
    port = free_ports(1)[0]
    argv = [sys.executable, "-m", "tui", "agent", "--profile", "atk-base", "--port", str(port)]
    argv += ["--token-file", str(token_file)]
    base = f"http://127.0.0.1:{port}/api/v1"
    log = (ws.root / "agent.log").open("wb")
    with log, started(argv, env=ws.env(), cwd=ROOT, stdout=log, stderr=subprocess.STDOUT) as agent:

        def answers() -> bool:
            with contextlib.suppress(httpx.HTTPError):
                got = httpx.get(f"{base}/snapshot", headers=_bearer(TOKENS["read"]), timeout=2)
                return got.status_code == 200
            return False

        if not poll(answers, 60, 0.25):
            return [Row("agent: start", None, "-", False, note="the agent did not answer")]
        server = ws.server(0) or {}
        pid = int(server.get("pid", 0))
        op = TOKENS["operate"]
        for profile in ("/any/path.toml", "../../../../etc/passwd", "atk-evil"):
            body = {"kind": "apply", "profile": profile}
            got = httpx.post(f"{base}/operations", json=body, headers=_bearer(op), timeout=30)
            rows.append(
                _http_row(
                    f"agent: apply {profile!r} (operate token)",
                    "POST",
                    f"{base}/operations",
                    got,
                    400,
                )
            )
        doc = httpx.get(f"{base}/profiles/atk-base", headers=_bearer(ADMIN), timeout=10).json()
        for name, value in (("LD_PRELOAD", "/tmp/evil.so"), ("PYTHONPATH", "/tmp/evil")):
            bad = {**doc["profile"], "name": "atk-x", "env": {name: value}}
            got = httpx.put(
                f"{base}/profiles/atk-x", json={"profile": bad}, headers=_bearer(ADMIN), timeout=10
            )
            rows.append(
                _http_row(
                    f"agent: save a profile with env {name} (admin token)",
                    "PUT",
                    f"{base}/profiles/atk-x",
                    got,
                    400,
                )
            )
        got = httpx.post(
            f"{base}/operations",
            json={"kind": "apply", "profile": "atk-base"},
            headers=_bearer(TOKENS["read"]),
            timeout=10,
        )
        rows.append(
            _http_row("agent: read token on operations", "POST", f"{base}/operations", got, 403)
        )
        for chunked in (True, False):
            rows.append(_big_body(agent.pid, f"{base}/operations", chunked))
        untouched = alive(pid) and (ws.server(0) or {}).get("pid") == pid
        environ = psutil.Process(pid).environ() if alive(pid) else {}
        clean = "LD_PRELOAD" not in environ and not (ws.profiles / "atk-x.toml").exists()
        rows.append(
            Row(
                "agent: after every attack",
                None,
                f"server pid {pid} {'untouched' if untouched else 'CHANGED'}",
                untouched and clean,
                "no LD_PRELOAD in its environ, atk-x not saved" if clean else "",
            )
        )
    return rows


def _big_body(agent_pid: int, url: str, chunked: bool) -> Row:
    """POST a 400 MiB body (streamed; chunked, or with its Content-Length declared)."""
    sent = 0

    def body() -> Iterator[bytes]:
        nonlocal sent
        chunk = b" " * MIB
        for _ in range(400):
            sent += len(chunk)
            yield chunk

    headers = _bearer(ADMIN)
    if not chunked:
        headers["content-length"] = str(400 * MIB)
    before = psutil.Process(agent_pid).memory_info().rss
    status: int | str
    text = ""
    start = time.monotonic()
    try:
        answer = httpx.post(url, content=body(), headers=headers, timeout=60)
        status, text = answer.status_code, answer.text.strip()
    except httpx.HTTPError as exc:
        status = type(exc).__name__
    grown = (psutil.Process(agent_pid).memory_info().rss - before) / MIB
    kind = "chunked" if chunked else "Content-Length"
    run = Run(
        ["POST", f"/operations 400 MiB ({kind})"],
        status if isinstance(status, int) else -1,
        "",
        text or str(status),
        time.monotonic() - start,
    )
    ok = (status == 413 or sent < 400 * MIB) and grown < 20 and sent < 200 * MIB
    note = f"sent {sent // MIB} MiB before the answer, agent RSS {grown:+.1f} MiB"
    return Row(f"agent: 400 MiB body, {kind}", run, "-", ok, text or str(status), note)


# --- FIFO and /dev/zero --------------------------------------------------------------------------

INPUTS: dict[str, tuple[list[str], int]] = {
    "status --status": (["status", "--status", "{p}", "--ports", "9"], 3),
    "agent --status": (
        ["agent", "--status", "{p}", "--profile", "sim-baseline", "--port", "{port}"],
        2,
    ),
    "agent --token-file": (
        ["agent", "--token-file", "{p}", "--profile", "sim-baseline", "--port", "{port}"],
        2,
    ),
    "logs parse": (["logs", "parse", "{p}"], 2),
    "serve --token-file": (["serve", "--token-file", "{p}", "--port", "{port}"], 2),
    "serve --fleet": (["serve", "--port", "{port}", "--fleet", "{p}"], 2),
    "console --fleet": (["console", "--fleet", "{p}"], 2),
    "autotune start --config": (["autotune", "start", "--config", "{p}"], 2),
    "plan --log": (["plan", "qwen3.6-27b", "--log", "{p}"], 2),
}
"""Every file input the issue names (and plan's log), the path as ``{p}``, with its exit code."""

STATE_COMMANDS: dict[str, tuple[list[str], int]] = {
    "status": (["status"], 3),
    "sim-fleet status": (["sim-fleet", "status"], 2),
    "sim-fleet start": (["sim-fleet", "start", "--gpus", "0", "--wait", "0"], 2),
    "sim-fleet stop": (["sim-fleet", "stop"], 2),
    "apply": (["apply", "sim-baseline", "--no-measure"], 2),
    "canary": (["canary", "sim-aggressive", "--gpu", "0"], 2),
    "rollout": (["rollout", "sim-aggressive", "--no-measure"], 2),
    "agent": (["agent", "--profile", "sim-baseline", "--port", "{port}"], 2),
    "agent --detach": (["agent", "--detach", "--profile", "sim-baseline", "--port", "{port}"], 2),
}
"""Commands that read the fleet state, with their bad-input exit code."""


def _one_input(work: Path, name: str, kind: str, as_state: bool) -> Row:
    ws = Workspace(work / f"{'state-' if as_state else ''}{name.replace(' ', '_')}-{kind}", 1)
    argv, code = (STATE_COMMANDS if as_state else INPUTS)[name]
    target = "/dev/zero"
    if as_state:
        target = str(ws.state_file)
        if kind == "fifo":
            os.mkfifo(ws.state_file)
        else:
            ws.state_file.symlink_to("/dev/zero")
    elif kind == "fifo":
        target = str(ws.root / "input.fifo")
        os.mkfifo(target)
    port = str(free_ports(1)[0])
    args = [a.replace("{p}", target).replace("{port}", port) for a in argv]
    try:
        run = ws.cli(args, timeout=40, profiles=SHIPPED)
    finally:
        ws.cleanup()  # a detached agent that should not exist
    named = "fleet_state.json" if as_state else Path(target).name
    first = run.lines[0] if run.lines else ""
    ok = run.rc == code and len(run.lines) == 1 and named in first and not run.traceback
    launched = [p for p in (ws.state / "logs").glob("*")] if (ws.state / "logs").exists() else []
    ok = ok and not launched
    shown = "/dev/zero" if kind == "dev_zero" else "a FIFO"
    label = f"{'fleet_state.json' if as_state else name} as {shown}: {name if as_state else ''}"
    return Row(
        label.rstrip(": "),
        run,
        "nothing launched" if not launched else "LAUNCHED",
        ok,
        note=f"want exit {code}",
    )


def input_rows(work: Path) -> list[Row]:
    """A FIFO and /dev/zero for every file input and as the fleet state, three at a time."""
    jobs = [(n, k, False) for n in INPUTS for k in ("fifo", "/dev/zero")]
    jobs += [(n, k, True) for n in STATE_COMMANDS for k in ("fifo", "/dev/zero")]
    with ThreadPoolExecutor(3) as pool:
        return list(
            pool.map(
                lambda j: _one_input(work, j[0], j[1].strip("/").replace("/", "_"), j[2]), jobs
            )
        )


# --- the agent on a damaged fleet state ----------------------------------------------------------

_SERVER = {"gpu": 0, "port": 1, "pgid": 9, "create_time": 1.0, "cmdline": [], "log_path": ""}
DAMAGED: dict[str, bytes] = {
    "empty": b"",
    "truncated": b'{"version": 2, "gpus": {"0": {"po',
    "binary": bytes(range(256)),
    "a list": b"[]",
    "pid as a string": json.dumps(
        {"version": 2, "gpus": {"0": {"server": {**_SERVER, "pid": "12"}}}}
    ).encode(),
    "port NaN": b'{"version": 2, "gpus": {"0": {"port": NaN}}}',
    "port 1e999": b'{"version": 2, "gpus": {"0": {"port": 1e999}}}',
    "nested 100k deep": b'{"gpus": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    "version 99": b'{"version": 99, "gpus": {}}',
}


def _damaged(work: Path, case: str, detach: bool) -> Row:
    ws = Workspace(work / f"damaged-{case.replace(' ', '_')}-{int(detach)}", 1)
    ws.state_file.write_bytes(DAMAGED[case])
    ws.state_file.chmod(0o600)
    args = ["agent", *(["--detach"] if detach else []), "--profile", "sim-baseline"]
    args += ["--port", str(free_ports(1)[0])]
    try:
        run = ws.cli(args, timeout=40, profiles=SHIPPED)
    finally:
        ws.cleanup()
    first = run.lines[0] if run.lines else ""
    ok = run.rc == 2 and len(run.lines) == 1 and "fleet_state.json" in first and not run.traceback
    return Row(f"agent{' --detach' if detach else ''}: state {case}", run, "-", ok)


def damaged_rows(work: Path) -> list[Row]:
    """``gpufleet agent`` (foreground and --detach) on each damaged state, three at a time."""
    jobs = [(c, d) for c in DAMAGED for d in (False, True)]
    with ThreadPoolExecutor(3) as pool:
        return list(pool.map(lambda j: _damaged(work, j[0], j[1]), jobs))


if __name__ == "__main__":  # one part alone, for a quick look
    with tempfile.TemporaryDirectory(prefix="gpufleet-attacks-") as tmp:
        from bench.attack_kit import table

        print(table(input_rows(Path(tmp))))

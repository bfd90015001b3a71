"""Issues 31's and 36's attacks, run again against today's code on real simulated fleets on
loopback, one table row each (``.venv/bin/python -m bench.attacks [--only NAME ...] [--json
FILE]``).

Parts: ``pgid`` (a live server's record naming a foreign process group, and pgid 1; the drain
mode's server frozen, so the drain escalates to the group), ``clock`` (a clock step of what
identity reads: every recorded wall-clock time +24 s and each command run in a time namespace
whose boot is 24 s earlier, so every start tick it reads moves: stop, apply and rollout act on
the fleet's own servers; a truly foreign process recorded: refused, non-zero, journalled; the
console's Stop fleet by its tmux test), ``locks`` (another process, and another uid, holding a
state file's lock), ``state`` (version 99, an invalid current profile, the journal a directory),
``agent`` (paths, loader variables, scopes, a 400 MiB body), ``inputs`` (a FIFO and /dev/zero
for every file input and as the fleet state), ``damaged`` (the agent on a damaged fleet state)
and ``network`` (issue 36's: the agent and ``serve`` without a token, the job, the environment,
the pid file, the token file, a long log line: ``bench.attacks_network``) and ``files``
(issue 36's, ``bench.attacks_files``: links where gpufleet writes, a directory anyone can write,
a full disk, two jobs on one S3 prefix, a prompts file rewritten under a job, a 300 MiB journal,
a GPU that left the fleet, a job started with a relative ``--status``).

Each row can fail: ``tests/core/test_bench_attack_rows.py`` runs it once against a deliberately
broken build (``bench.broken_builds``) and sees FAIL.

Every command runs under a deadline (a hang is a row saying HUNG), every fleet and helper process
is stopped at the end, also on error, and nothing but 127.0.0.1 is ever addressed. pgid 1 is
never handed to a stop unless the state parser refused it first.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from bench.attack_inputs import agent_rows, damaged_rows, input_rows
from bench.attack_kit import (
    HEADER,
    ROOT,
    Row,
    Run,
    Workspace,
    alive,
    group_size,
    poll,
    started,
    table,
    time_namespace,
)
from bench.attacks_files import files_rows
from bench.attacks_network import network_rows
from bench.simfleet import FAST_APPLY

ROLLOUT = ["--no-measure", "--timeout", "60", "--term-timeout", "5", "--release-timeout", "20"]


def _pid(ws: Workspace, gpu: int) -> int:
    return int((ws.server(gpu) or {}).get("pid", 0))


def pgid_rows(ws: Workspace) -> list[Row]:
    """A live server's record names a foreign group of three (bash and two sleeps): every stop
    mode leaves the group whole; then pgid 1, which the parser must refuse. In drain mode the
    server is frozen (SIGSTOP) so the drain cannot end it and the stop escalates to the group,
    where the foreign pgid is decided (a drain that ended first never reached it)."""
    rows: list[Row] = []
    for mode in ("kill", "terminate", "drain"):
        if not alive(_pid(ws, 0)):
            ws.cli(["apply", "atk-base", "--gpus", "0", *FAST_APPLY], timeout=150)
        pid = _pid(ws, 0)
        with started(["bash", "-c", "sleep 2001 & sleep 2002 & wait"]) as foreign:
            poll(lambda: group_size(foreign.pid) == 3, 10)
            before = group_size(foreign.pid)
            ws.edit_server(0, pgid=foreign.pid)
            if mode == "drain" and alive(pid):
                os.kill(pid, signal.SIGSTOP)  # our workspace's server: frozen, it cannot drain
            args = ["sim-fleet", "stop", "--gpus", "0", "--mode", mode, "--timeout", "5"]
            run = ws.cli(args, timeout=90)
            if alive(pid):
                os.kill(pid, signal.SIGCONT)
            after = group_size(foreign.pid)
        stopped = not alive(pid)
        ok = before == after == 3 and not run.hung and not run.traceback
        ok = ok and ((run.rc == 0 and stopped) or (run.rc != 0 and not stopped))
        said = f"foreign group {before}->{after}; server pid {'stopped' if stopped else 'alive'}"
        note = ""
        if mode == "drain":
            # The drain escalated: the group's pgid was weighed (and refused) on the way.
            escalated = "is not the server's own" in run.out + run.err
            ok = ok and escalated
            note = "escalated past the drain" if escalated else "the drain never escalated"
        frozen = " (frozen)" if mode == "drain" else ""
        rows.append(
            Row(
                f"live pid + foreign pgid, --mode {mode}{frozen}",
                run,
                said,
                ok,
                run.line_with("pgid", "group", "REFUSED", "done"),
                note,
            )
        )
    rows.append(_pgid_one(ws))
    return rows


def _pgid_one(ws: Workspace) -> Row:
    from tui.state.fleet_state import read_fleet  # the parser, in-process, on this file only

    if not alive(_pid(ws, 0)):
        ws.cli(["apply", "atk-base", "--gpus", "0", *FAST_APPLY], timeout=150)
    pid = _pid(ws, 0)
    ws.edit_server(0, pgid=1)
    try:
        read_fleet(ws.state_file)
    except Exception as exc:
        refused = str(exc)
    else:
        ws.edit_server(0, pgid=os.getpgid(pid))
        return Row(
            "pgid 1 recorded",
            None,
            "stop NOT run",
            False,
            "",
            "the parser accepted pgid 1: the stop was not run",
        )
    run = ws.cli(["sim-fleet", "stop", "--gpus", "0", "--mode", "kill"], timeout=60)
    ok = run.rc == 2 and len(run.lines) == 1 and "pgid" in run.lines[0] and alive(pid)
    ws.edit_server(0, pgid=os.getpgid(pid))
    return Row(
        "pgid 1 recorded",
        run,
        f"nothing (server {'alive' if alive(pid) else 'GONE'})",
        ok and not run.traceback,
        note=f"parser: {refused.rsplit(': ', 2)[-2][:70]}",
    )


def clock_rows(ws: Workspace) -> list[Row]:
    """A clock step of what identity reads, then a truly foreign process recorded. Every
    recorded wall-clock time moves +24 s, and each command runs in a time namespace whose boot
    is 24 s earlier: every start tick it reads from ``/proc`` is 2,400 ticks later (on a
    100 Hz kernel) than the record's. Moving ``create_time`` alone checked nothing: identity no
    longer reads it, and the rows passed at -9.6e8 s too."""
    step = time_namespace(24.0)
    if step is None:
        why = "no time namespace can be made here (unshare --time): the clock rows cannot run"
        return [Row("+24 s clock step", None, "-", False, note=why)]
    rows: list[Row] = []
    steps: list[tuple[str, list[str]]] = [
        ("sim-fleet stop", ["sim-fleet", "stop", "--timeout", "5"]),
        ("apply", ["apply", "atk-aggr", *FAST_APPLY]),
        ("rollout", ["rollout", "atk-base", *ROLLOUT]),
    ]
    for name, args in steps:
        if not all(alive(_pid(ws, g)) for g in range(ws.gpus)):
            ws.up()
        before = [_pid(ws, g) for g in range(ws.gpus)]
        ws.shift_clock(24.0)
        run = ws.cli(args, timeout=180, prefix=step)
        gone = [p for p in before if not alive(p)]
        now = [_pid(ws, g) for g in range(ws.gpus)]
        relaunched = name == "sim-fleet stop" or all(alive(p) and p not in before for p in now)
        entry = ws.last_journal()
        ok = run.rc == 0 and len(gone) == len(before) and relaunched and bool(entry.get("ok"))
        ok = ok and entry.get("type") == args[0].replace("sim-fleet", "kill")
        said = f"own servers stopped {len(gone)}/{len(before)}" + (
            "" if name == "sim-fleet stop" else f", relaunched {'yes' if relaunched else 'NO'}"
        )
        rows.append(
            Row(
                f"+24 s clock step (wall clock and boottime): {name}",
                run,
                said,
                ok and not run.traceback,
                run.lines[-1] if run.lines else "",
                f"journal {entry.get('type')} ok={entry.get('ok')}",
            )
        )
    foreign_steps: list[tuple[str, list[str]]] = [
        ("sim-fleet stop --mode kill", ["sim-fleet", "stop", "--mode", "kill"]),
        ("apply", ["apply", "atk-aggr", *FAST_APPLY]),
        ("rollout", ["rollout", "atk-aggr", *ROLLOUT]),  # the fleet runs atk-base: a change
    ]
    kinds = {"sim-fleet stop --mode kill": "kill", "apply": "apply", "rollout": "rollout"}
    with started(["sleep", "2005"]) as stranger:
        for name, args in foreign_steps:
            if not all(alive(_pid(ws, g)) for g in range(ws.gpus)):
                up = ws.up()
                if not ws.server(0):  # seen on the code before the fixes: a row, not a crash
                    label = f"foreign process recorded (+24 s): {name}"
                    rows.append(Row(label, up, "-", False, note="the fleet did not come up"))
                    continue
            ws.shift_clock(24.0)
            ws.edit_server(0, pid=stranger.pid, pgid=stranger.pid)
            run = ws.cli(args, timeout=180, prefix=step)
            entry = ws.last_journal()
            journalled = entry.get("type") == kinds[name] and entry.get("ok") is False
            journalled = journalled and "refused" in json.dumps(entry)
            ok = run.rc not in (0, None) and alive(stranger.pid) and journalled
            rows.append(
                Row(
                    f"foreign process recorded (+24 s): {name}",
                    run,
                    f"stranger {'alive' if alive(stranger.pid) else 'KILLED'}",
                    ok and not run.traceback,
                    run.line_with("REFUSED", "refus"),
                    f"journal {entry.get('type')} ok={entry.get('ok')}",
                )
            )
    return rows


def console_row() -> Row:
    """The console's kill and Stop fleet after the step and with a stranger: its tmux test."""
    test = "tests/e2e/test_e2e_quit_refused.py"
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:cacheprovider", test]
    start = time.monotonic()
    try:
        done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=240)
        rc: int | None = done.returncode
        out = done.stdout
    except subprocess.TimeoutExpired as exc:
        rc, out = None, str(exc.stdout or "")
    run = Run(["pytest", test], rc, out, "", time.monotonic() - start)
    last = [line for line in out.splitlines() if line.strip()][-1:] or [""]
    return Row(
        "console: Stop fleet after +24 s with a stranger", run, "see the test", rc == 0, last[0]
    )


def _held(lock: Path) -> bool:
    fd = os.open(lock, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing drops a lock this probe took
    return False


def lock_rows(ws: Workspace) -> list[Row]:
    """Another user's process, and another process of ours, holding each state lock."""
    rows: list[Row] = []
    if not all(alive(_pid(ws, g)) for g in range(ws.gpus)):
        ws.up()
    for parent in (ws.root.parent, ws.root):  # traversable: only the state dir's own 0700 and
        parent.chmod(0o711)  # the lock's 0600 may keep another user out
    for name in ("fleet_state.json.lock", "cordons.json.lock"):
        lock = ws.state / name
        if not lock.exists():
            os.close(os.open(lock, os.O_CREAT | os.O_WRONLY, 0o600))
        nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        other = _foreign_uid([*nobody, "flock", "-x", "-w", "2", str(lock), "true"], ws.root)
        rows.append(
            Row(
                f"uid nobody: flock -x {name}",
                other,
                "-",
                other.rc not in (0, None),
                note=f"state dir {oct(ws.state.stat().st_mode & 0o777)}, lock "
                f"{oct(lock.stat().st_mode & 0o777)}",
            )
        )
        with started(["flock", "-x", str(lock), "sleep", "120"]) as holder:
            poll(lambda: _held(lock), 10)  # noqa: B023 - used within the loop's iteration
            for label, args in (
                ("apply", ["apply", "atk-base", *FAST_APPLY]),
                ("sim-fleet stop", ["sim-fleet", "stop", "--mode", "kill"]),
            ):
                before = [_pid(ws, g) for g in range(ws.gpus)]
                run = ws.cli(args, timeout=60)
                kept = all(alive(p) for p in before) and before == [
                    _pid(ws, g) for g in range(ws.gpus)
                ]
                named = str(holder.pid) in run.out + run.err
                ok = run.rc not in (0, None) and kept and named and run.seconds < 30
                rows.append(
                    Row(
                        f"{name} held by flock(1): {label}",
                        run,
                        f"servers {'all running' if kept else 'STOPPED'}",
                        ok and not run.traceback,
                        run.line_with("lock", "held"),
                        f"holder pid {holder.pid} {'named' if named else 'NOT named'}",
                    )
                )
    return rows


def _foreign_uid(argv: list[str], root: Path) -> Run:
    start = time.monotonic()
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=20)
        rc: int | None = done.returncode
        out, err = done.stdout, done.stderr
    except subprocess.TimeoutExpired:
        rc, out, err = None, "", ""
    here = str(root)  # the table names the workspace $WS
    shown = ["setpriv --reuid=nobody", *(a.replace(here, "$WS") for a in argv[4:])]
    return Run(
        shown, rc, out.replace(here, "$WS"), err.replace(here, "$WS"), time.monotonic() - start
    )


BAD_STATES: dict[str, Callable[[Workspace], object]] = {
    "version 99": lambda ws: ws.state_file.write_text('{"version": 99, "gpus": {}}'),
    "invalid current profile": lambda ws: ws.state_file.write_text(
        json.dumps(
            {
                "version": 2,
                "gpus": {
                    "0": {
                        "port": ws.ports[0],
                        "host": "127.0.0.1",
                        "server": None,
                        "current": {"name": "bad", "engine": {"kind": "nope"}},
                    }
                },
            }
        )
    ),
    "journal.jsonl a directory": lambda ws: (ws.state / "journal.jsonl").mkdir(),
}


def state_rows(ws: Workspace) -> list[Row]:
    """A state that must not read as "no fleet": start and apply refuse, launch nothing."""
    rows: list[Row] = []
    for case, make in BAD_STATES.items():
        for label, args in (
            ("sim-fleet start", ["sim-fleet", "start", "--profile", "atk-base", "--wait", "0"]),
            ("apply", ["apply", "atk-base", *FAST_APPLY]),
        ):
            ws.cleanup()
            shutil.rmtree(ws.state, ignore_errors=True)
            ws.state.mkdir(mode=0o700)
            make(ws)
            if ws.state_file.exists():
                ws.state_file.chmod(0o600)
            run = ws.cli(args, timeout=60)
            launched = ws.ours()
            ok = run.rc not in (0, None) and len(run.lines) == 1 and not launched
            rows.append(
                Row(
                    f"state {case}: {label}",
                    run,
                    "nothing launched" if not launched else f"LAUNCHED {len(launched)}",
                    ok and not run.traceback,
                )
            )
    ws.cleanup()
    return rows


PARTS = ("pgid", "clock", "locks", "state", "agent", "inputs", "damaged", "files", "network")


def main(argv: list[str] | None = None) -> int:
    """Run the parts asked for (default: all); print the table; exit 1 if a row failed."""
    parser = argparse.ArgumentParser(prog="python -m bench.attacks", description=__doc__)
    parser.add_argument("--only", nargs="*", choices=PARTS, default=list(PARTS))
    parser.add_argument("--no-console", action="store_true", help="skip the console's tmux test")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args(argv)
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    started_at = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="gpufleet-attacks-"))
    spaces: list[Workspace] = []

    def space(name: str, gpus: int) -> Workspace:
        spaces.append(Workspace(work / name, gpus))
        return spaces[-1]

    rows: list[Row] = []
    try:
        runs: dict[str, Callable[[], list[Row]]] = {
            "pgid": lambda: pgid_rows(space("pgid", 1)),
            "clock": lambda: (
                clock_rows(space("clock", 2)) + ([] if args.no_console else [console_row()])
            ),
            "locks": lambda: lock_rows(space("locks", 2)),
            "state": lambda: state_rows(space("state", 2)),
            "agent": lambda: agent_rows(space("agent", 1)),
            "inputs": lambda: input_rows(work / "inputs"),
            "damaged": lambda: damaged_rows(work / "damaged"),
            "files": lambda: files_rows(work),
            "network": lambda: network_rows(lambda name: space(name, 1)),
        }
        for part in args.only:
            t0 = time.monotonic()
            try:
                got = runs[part]()
            except Exception as exc:  # a part that broke is a failed row, and
                # the table of the others still prints (seen on the code before the fixes)
                got = [Row(f"{part}: the attack broke off", None, "-", False, note=repr(exc)[:200])]
            rows += got
            print(f"{part}: {len(got)} rows, {time.monotonic() - t0:.0f} s", file=sys.stderr)
    finally:
        for ws in spaces:
            with contextlib.suppress(Exception):
                ws.cli(["sim-fleet", "stop", "--mode", "kill"], timeout=60)
            ws.cleanup()
        shutil.rmtree(work, ignore_errors=True)
    failed = [r for r in rows if not r.ok]
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    print(f"attacks, {when}, commit {commit}, {time.monotonic() - started_at:.0f} s")
    print(table(rows))
    print(f"\n{len(rows) - len(failed)}/{len(rows)} rows pass")
    if args.json:
        cells = [dict(zip([*HEADER, "note"], [*r.cells(), r.note], strict=True)) for r in rows]
        args.json.write_text(json.dumps(cells, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

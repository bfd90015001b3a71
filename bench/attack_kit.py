"""The kit of ``bench.attacks``: a private workspace per simulated fleet, the bounded run of one
``gpufleet`` command, process counting, and the table's rows.

Everything runs against loopback only. Every command runs in its own session under a deadline:
one that outlives it is reported as hung and its session (ours: we made it) killed, never waited
on. The workspace's ``cleanup`` stops every process whose environment names the workspace's
state directory (the fleet's servers, a detached agent), and nothing else.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from bench.broken_builds import install
from bench.ports import free_ports
from bench.simfleet import AGGRESSIVE, BASELINE, FAST_APPLY, sim_profile_text
from tui import paths

ROOT = Path(__file__).resolve().parent.parent
SPEED = 200.0
"""Simulator speed: a server is ready about a second after its launch."""
ADDRESS_SPACE = 1 << 30
"""Each command's address-space limit: an endless read fails fast instead of eating memory."""


@dataclass(frozen=True)
class Run:
    """What one bounded command did."""

    argv: list[str]
    """``gpufleet`` and its arguments (the workspace's paths shortened)."""
    rc: int | None
    """Exit status (None: it hung and was killed)."""
    out: str
    """Its stdout."""
    err: str
    """Its stderr."""
    seconds: float
    """Wall time."""

    @property
    def hung(self) -> bool:
        """It outlived its deadline."""
        return self.rc is None

    @property
    def lines(self) -> list[str]:
        """The non-empty lines of stderr, else of stdout."""
        text = self.err if self.err.strip() else self.out
        return [line for line in text.splitlines() if line.strip()]

    @property
    def traceback(self) -> bool:
        """A traceback or a MemoryError anywhere in its output."""
        both = self.out + self.err
        return "Traceback" in both or "MemoryError" in both

    def line_with(self, *words: str) -> str:
        """The first output line holding one of ``words``, else the first line."""
        for line in self.lines:
            if any(w in line for w in words):
                return line.strip()
        return self.lines[0].strip() if self.lines else ""


@dataclass
class Row:
    """One line of the table."""

    attack: str
    run: Run | None
    signalled: str
    ok: bool
    key_line: str = ""
    note: str = ""

    def cells(self) -> list[str]:
        """The table's cells."""
        r = self.run
        argv = " ".join(r.argv) if r else "-"
        rc = "-" if r is None else ("HUNG" if r.hung else str(r.rc))
        lines = "-" if r is None else str(len(r.lines))
        tb = "-" if r is None else ("yes" if r.traceback else "no")
        line = (self.key_line or (r.line_with() if r else "")).replace("|", "/")
        line = line if len(line) <= 150 else line[:147] + "..."
        when = "-" if r is None else f"{r.seconds:.1f}"
        verdict = "pass" if self.ok else "FAIL"
        return [self.attack, f"`{argv}`", rc, when, lines, tb, line, self.signalled, verdict]


HEADER = ["attack", "argv", "exit", "s", "lines", "tb", "key line", "signalled", "verdict"]


def table(rows: list[Row]) -> str:
    """The rows as a Markdown table."""
    out = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    for row in rows:
        cells = row.cells()
        if row.note:
            cells[-1] += f" ({row.note})"
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


@dataclass
class Workspace:
    """A private state directory, config and profiles for one simulated fleet."""

    root: Path
    gpus: int = 2
    ports: list[int] = field(default_factory=list)
    broken: str | None = None
    """A deliberately broken build every command of the workspace runs (``bench.broken_builds``:
    a test shows a row fails there); None: gpufleet as it is."""

    def __post_init__(self) -> None:
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.state.mkdir(mode=0o700, exist_ok=True)
        (self.root / "config").mkdir(exist_ok=True)
        self.profiles.mkdir(exist_ok=True)
        self.ports = free_ports(self.gpus)
        gpus = list(range(self.gpus))
        for name, knobs in (("atk-base", BASELINE), ("atk-aggr", AGGRESSIVE)):
            text = sim_profile_text(name, gpus, self.ports, "{state}/logs", knobs, SPEED)
            (self.profiles / f"{name}.toml").write_text(text)

    @property
    def state(self) -> Path:
        """The state directory (0700)."""
        return self.root / "state"

    @property
    def profiles(self) -> Path:
        """The profiles directory."""
        return self.root / "profiles"

    @property
    def state_file(self) -> Path:
        """``fleet_state.json``."""
        return self.state / "fleet_state.json"

    def env(self, profiles: Path | None = None) -> dict[str, str]:
        """The environment of every command run for this workspace."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("GPUFLEET_")}
        env[paths.STATE_ENV] = str(self.state)
        env[paths.CONFIG_ENV] = str(self.root / "config")
        env[paths.PROFILES_ENV] = str(profiles or self.profiles)
        first = [str(install(self.broken, self.root / "broken"))] if self.broken else []
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (*first, str(ROOT), env.get("PYTHONPATH")) if p
        )
        return env

    def cli(
        self,
        args: list[str],
        timeout: float = 60.0,
        profiles: Path | None = None,
        prefix: list[str] | None = None,
        hangs: Callable[[], bool] | None = None,
    ) -> Run:
        """``gpufleet ARGS`` in its own session, bounded by ``timeout`` and the address-space
        limit; a command that outlives the deadline is killed with its session (it is ours).
        ``prefix`` runs it under another command (``unshare --time ...``;
        ``bench.in_tmpfs.wrapper``: on a small tmpfs). ``hangs``: the sign, polled while it
        runs, that the command will outlive its deadline (an agent that serves instead of
        refusing): it is then killed at once, a hang as at the deadline."""
        start = time.monotonic()
        proc = subprocess.Popen(
            [*(prefix or []), sys.executable, "-m", "tui", *args],
            cwd=ROOT,
            env=self.env(profiles),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
            preexec_fn=_limited,
        )
        try:
            if hangs is not None:
                # Its output is a few lines: the pipes cannot fill while it is polled.
                poll(lambda: proc.poll() is not None or hangs(), timeout, 0.1)
                if proc.poll() is None:
                    raise subprocess.TimeoutExpired(args, timeout)
            out, err = proc.communicate(timeout=timeout)
            rc: int | None = proc.returncode
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate(timeout=10)
            rc = None
        return self.run_of(args, rc, out, err, start)

    def run_of(self, args: list[str], rc: int | None, out: str, err: str, start: float) -> Run:
        """The ``Run`` of ``gpufleet ARGS`` started at ``start`` (monotonic), the workspace's
        paths shown as ``$WS``."""
        here = str(self.root)  # the table names the workspace $WS
        shown = ["gpufleet", *(a.replace(here, "$WS") for a in args)]
        return Run(
            shown, rc, out.replace(here, "$WS"), err.replace(here, "$WS"), time.monotonic() - start
        )

    def up(self, profile: str = "atk-base") -> Run:
        """Launch ``profile`` on every GPU (``gpufleet apply``)."""
        return self.cli(["apply", profile, *FAST_APPLY], timeout=150)

    def doc(self) -> dict[str, Any]:
        """The fleet state document."""
        if not self.state_file.is_file():
            return {}
        return dict(json.loads(self.state_file.read_text()))

    def write_doc(self, doc: dict[str, Any]) -> None:
        """Rewrite the fleet state (its 0600 mode kept: the file is rewritten in place)."""
        self.state_file.write_text(json.dumps(doc))

    def server(self, gpu: int) -> dict[str, Any] | None:
        """GPU ``gpu``'s recorded server, if any."""
        entry = self.doc().get("gpus", {}).get(str(gpu)) or {}
        return entry.get("server")

    def edit_server(self, gpu: int, **values: Any) -> None:
        """Set fields of GPU ``gpu``'s recorded server."""
        doc = self.doc()
        doc["gpus"][str(gpu)]["server"].update(values)
        self.write_doc(doc)

    def shift_clock(self, seconds: float) -> None:
        """What a step of the host's clock does to the record: every wall-clock time moves."""
        doc = self.doc()
        for entry in doc["gpus"].values():
            if entry.get("server"):
                entry["server"]["create_time"] += seconds
        self.write_doc(doc)

    def last_journal(self) -> dict[str, Any]:
        """The journal's last entry ({} when there is none)."""
        path = self.state / "journal.jsonl"
        if not path.is_file():
            return {}
        lines = [line for line in path.read_text().splitlines() if line.strip()]
        return dict(json.loads(lines[-1])) if lines else {}

    def ours(self) -> list[psutil.Process]:
        """Processes whose environment names this workspace's state directory."""
        found = []
        for proc in psutil.process_iter(["pid"]):
            with contextlib.suppress(psutil.Error):
                if proc.pid != os.getpid() and proc.environ().get(paths.STATE_ENV) == str(
                    self.state
                ):
                    found.append(proc)
        return found

    def servers_on_ports(self) -> list[int]:
        """Pids of this workspace's processes listening on its fleet's ports."""
        pids = []
        for proc in self.ours():
            with contextlib.suppress(psutil.Error):
                if any(c.laddr.port in self.ports for c in proc.net_connections("tcp")):
                    pids.append(proc.pid)
        return pids

    def cleanup(self) -> None:
        """SIGKILL every process of this workspace (identified by its environment)."""
        for proc in self.ours():
            with contextlib.suppress(psutil.Error):
                proc.kill()
                proc.wait(timeout=10)


def time_namespace(seconds: float) -> list[str] | None:
    """The prefix that runs a command in a new time namespace whose boot is ``seconds`` earlier
    (``unshare --time --boottime S``; in a user namespace where only that is allowed), or None
    where this machine permits neither."""
    for prefix in (["unshare", "--time"], ["unshare", "--user", "--map-root-user", "--time"]):
        argv = [*prefix, "--boottime", f"{seconds:g}", "true"]
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            if subprocess.run(argv, capture_output=True, timeout=10).returncode == 0:
                return [*prefix, "--boottime", f"{seconds:g}"]
    return None


def alive(pid: int) -> bool:
    """The pid runs (a zombie counts as gone; 0 and 1 are never a server)."""
    if pid <= 1:
        return False
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def group_size(pgid: int) -> int:
    """Live processes in process group ``pgid``."""
    count = 0
    for proc in psutil.process_iter(["pid"]):
        with contextlib.suppress(OSError, psutil.Error):
            if os.getpgid(proc.pid) == pgid and alive(proc.pid):
                count += 1
    return count


def poll(predicate: Callable[[], bool], timeout: float, interval: float = 0.05) -> bool:
    """Poll ``predicate`` until true or the deadline."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


@contextlib.contextmanager
def started(argv: list[str], **kwargs: Any) -> Iterator[subprocess.Popen[bytes]]:
    """A helper process of the attack (a foreign group, a lock holder) in its own session,
    killed with its session on exit (it is ours: we made it and it still leads it)."""
    proc = subprocess.Popen(argv, start_new_session=True, **kwargs)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)

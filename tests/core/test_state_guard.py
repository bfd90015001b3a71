"""The state other users cannot touch, locks that never wedge the fleet, and damaged state that is
never read as "no fleet" (issue 31).

- A state lock held by another process (a real one: ``fcntl.flock`` in a child) refuses the
  writer past its deadline naming the holder's pid and command line; an operation takes every
  lock it needs before it stops anything, so ``sim-fleet stop`` refuses and the server keeps
  running (before: on ``fleet_state.json.lock`` a stop killed the server and then blocked for
  ever; on ``cordons.json.lock`` it hung before signalling anything).
- The state directory is 0700 and its files 0600, made so and tightened when found looser.
- A state of an unknown ``version``, or whose ``current`` profile is not valid, and a journal
  that is a directory, are refused before anything is launched (before: servers launched).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from operator_helpers import cleaned, pid_alive, write_profiles

from tui import paths
from tui.ops.cli import apply as apply_cli
from tui.ops.cli import sim_fleet as sim_fleet_cli
from tui.ops.journal import read_journal
from tui.ops.service import FleetOps, OpsOptions
from tui.state.cordons import read_cordons
from tui.state.fleet_state import read_records

pytestmark = [pytest.mark.timeout(90)]

HOLD = (
    "import fcntl, os, sys\n"
    "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)\n"
    "fcntl.flock(fd, fcntl.LOCK_EX)\n"
    "print('held', flush=True)\n"
    "sys.stdin.read()\n"
)
"""A stranger holding a lock: it takes the flock and writes nothing into the file (so only
``/proc/locks`` can name it), then waits until its stdin closes."""


@contextmanager
def held(lock: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process holds ``lock`` (an exclusive flock) while the block runs."""
    lock.parent.mkdir(parents=True, exist_ok=True)
    child = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(lock)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == "held\n"
        yield child
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=10)


def test_a_held_state_lock_refuses_past_its_deadline_naming_the_holder(tmp_path: Path) -> None:
    from tui.state.locks import LockBusy, locked

    state = tmp_path / "fleet_state.json"
    with held(tmp_path / "fleet_state.json.lock") as child:
        started = time.monotonic()
        with pytest.raises(LockBusy) as caught, locked(state, timeout_s=0.3):
            pass
        assert time.monotonic() - started < 5
    message = str(caught.value)
    assert f"pid {child.pid} (" in message and "fcntl.flock" in message, message
    assert message.startswith(f"{state}.lock: is held by") and "\n" not in message
    with locked(state, timeout_s=0.3):  # free again once its holder let go
        pass


@pytest.fixture
def one_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    """One simulated server of the fleet, started through the operations core: its pid."""
    fleet = write_profiles(tmp_path / "profiles", [0])
    monkeypatch.setenv(paths.PROFILES_ENV, str(fleet.profiles_dir))
    with cleaned(paths.state_dir(), fleet.ports):
        outcome = asyncio.run(FleetOps(options=OpsOptions(settle_s=0.0)).start(fleet.baseline))
        assert outcome == {0: None}
        yield read_records()[0].pid


@pytest.mark.parametrize("lock_name", ["fleet_state.json.lock", "cordons.json.lock"])
def test_a_stop_refuses_before_it_signals_while_a_state_lock_is_held(
    lock_name: str,
    one_server: int,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with contextlib.suppress(ImportError):  # (the code before deadlines waits for ever)
        import tui.state.locks as locks

        monkeypatch.setattr(locks, "LOCK_TIMEOUT_S", 0.5)
    capsys.readouterr()
    with held(paths.state_dir() / lock_name) as child:
        started = time.monotonic()
        status = sim_fleet_cli.main(["stop", "--mode", "kill"])
        elapsed = time.monotonic() - started
        err = capsys.readouterr().err.strip()
    assert status == 2 and elapsed < 10, (status, elapsed, err)
    assert err.count("\n") == 0 and lock_name in err and f"pid {child.pid}" in err, err
    assert pid_alive(one_server), "the server was stopped before the locks were taken"
    assert read_records()[0].pid == one_server
    assert read_cordons() == {}
    last = read_journal().entries[-1]
    assert not last.ok and last.refused and f"pid {child.pid}" in last.refused[0]
    # Once the holder is gone the same stop runs.
    assert sim_fleet_cli.main(["stop", "--mode", "kill"]) == 0
    assert not pid_alive(one_server)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_state_directory_is_private_and_a_loose_one_is_tightened(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from tui.ops.entries import simple_entry
    from tui.ops.journal import append
    from tui.ops.lock import operation_lock
    from tui.servers.tokens import load_or_create
    from tui.state.cordons import cordon
    from tui.state.fleet_state import ProcessRecord, put_record

    fresh = tmp_path / "fresh" / "state"
    monkeypatch.setenv(paths.STATE_ENV, str(fresh))
    put_record(ProcessRecord(0, 30000, 5, 5, 1.0, ("x",), "/dev/null"))
    cordon(["127.0.0.1:30000"], "test")
    append(simple_entry("kill", 1.0, 2.0, True, (0,), "test", "x"))
    with operation_lock("test"):
        pass
    load_or_create(fresh / "agent.token")
    assert _mode(fresh) == 0o700
    files = sorted(p.name for p in fresh.iterdir())
    made = {"fleet_state.json", "fleet_state.json.lock", "cordons.json", "journal.jsonl"}
    assert made | {"operation.lock", "agent.token"} <= set(files)
    assert all(_mode(fresh / name) == 0o600 for name in files), {
        n: oct(_mode(fresh / n)) for n in files
    }
    assert capsys.readouterr().err == ""  # made private: nothing to say

    # A directory of an earlier version: 0755, its files 0644.
    old = tmp_path / "old"
    old.mkdir(mode=0o755)
    old.chmod(0o755)
    (old / "journal.jsonl").write_text("")
    (old / "fleet_state.json.lock").write_text("")
    for path in old.iterdir():
        path.chmod(0o644)
    monkeypatch.setenv(paths.STATE_ENV, str(old))
    read_journal()  # reading does not tighten; the first write does
    assert _mode(old) == 0o755
    append(simple_entry("kill", 1.0, 2.0, True, (0,), "test", "x"))
    assert _mode(old) == 0o700
    assert all(_mode(p) == 0o600 for p in old.iterdir())
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(old) in err[0] and "0755" in err[0] and "0700" in err[0], err


@pytest.fixture
def fleet_profiles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """A one-GPU simulated fleet's profiles on a free port (nothing started): its ports."""
    fleet = write_profiles(tmp_path / "profiles", [0])
    monkeypatch.setenv(paths.PROFILES_ENV, str(fleet.profiles_dir))
    with cleaned(paths.state_dir(), fleet.ports):
        yield fleet.ports


def _launched(ports: list[int]) -> list[str]:
    from operator_helpers import leftovers

    return leftovers(paths.state_dir(), ports)


def _refusal(command: str, capsys: pytest.CaptureFixture[str]) -> str:
    """Run ``command`` (``apply`` or ``sim-fleet start``) on op-baseline: it must refuse with
    exit status 2 and a one-line error, which is returned."""
    if command == "apply":
        status = apply_cli.main(["op-baseline", "--no-measure"])
    else:
        status = sim_fleet_cli.main(["start", "--profile", "op-baseline", "--wait", "0"])
    err = capsys.readouterr().err.strip()
    assert status == 2, err
    assert err.count("\n") == 0, err
    return err


@pytest.mark.parametrize(
    "state",
    [
        {"version": 99, "gpus": {}},
        {"gpus": {}},
        {"version": 2, "gpus": {"0": {"port": 30000, "current": {"name": "x", "engine": 5}}}},
        {"version": 2, "gpus": {"0": {"port": 30000, "previous": {"fleet": {"gpus": "all"}}}}},
    ],
    ids=["version 99", "no version", "current not a profile", "previous not a profile"],
)
@pytest.mark.parametrize("command", ["sim-fleet start", "apply"])
def test_a_state_of_another_version_or_a_bad_profile_is_never_an_empty_fleet(
    state: dict[str, object],
    command: str,
    fleet_profiles: list[int],
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = paths.fleet_state_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(state))
    err = _refusal(command, capsys)
    assert str(path) in err, err
    assert not _launched(fleet_profiles), "a server was launched"
    assert json.loads(path.read_text()) == state


@pytest.mark.parametrize("command", ["sim-fleet start", "apply"])
def test_a_journal_that_cannot_be_written_refuses_before_anything_is_launched(
    command: str, fleet_profiles: list[int], capsys: pytest.CaptureFixture[str]
) -> None:
    journal = paths.journal_file()
    journal.mkdir(parents=True)
    err = _refusal(command, capsys)
    assert str(journal) in err and "a directory" in err, err
    assert not _launched(fleet_profiles), "a server was launched"
    assert read_records() == {}
    assert os.path.isdir(journal)


def test_every_command_starts_with_a_private_state_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The dispatcher makes the state directory 0700 before any command makes a subdirectory
    in it (``demo/``, ``pipeline/``: made with the umask's 0755, parents included), and tightens
    an open one left by an earlier version, saying so once."""
    from tui import cli
    from tui.state.private import forget_checked

    fresh = tmp_path / "new" / "state"
    monkeypatch.setenv(paths.STATE_ENV, str(fresh))
    assert cli.main(["journal"]) == 0
    assert _mode(fresh) == 0o700 and "0700" not in capsys.readouterr().err
    forget_checked()
    fresh.chmod(0o755)
    assert cli.main(["journal"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert _mode(fresh) == 0o700
    assert len(err) == 1 and "was 0755: made 0700" in err[0], err

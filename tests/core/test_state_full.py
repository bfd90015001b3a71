"""A full state directory is a refusal, not ``unexpected error: OSError`` (issue 36).

Before anything is stopped or launched an operation checks that the state directory can take
what it will write (``tui.state.files.check_room``): a server stopped or started whose record
then cannot be written is a server gpufleet no longer manages. On a real full tmpfs (a mount
namespace of the test's own; skipped where mounting is not permitted) and, without root, with
the space check's allocation failing as a full disk fails it: exit 2, one line, nothing launched.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from operator_helpers import cleaned, leftovers, write_profiles
from pipeline_helpers import REPO

from bench import in_tmpfs
from tui import paths
from tui.ops.cli import apply as apply_cli
from tui.ops.cli import sim_fleet as sim_fleet_cli

from .test_pipeline_full_disk import needs_tmpfs

pytestmark = [pytest.mark.timeout(120)]

COMMANDS = {
    "sim-fleet start": ["sim-fleet", "start", "--profile", "op-baseline", "--wait", "0"],
    "apply": ["apply", "op-baseline", "--no-measure"],
}


@pytest.fixture
def ports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """A one-GPU simulated fleet's profiles (nothing started): its ports."""
    fleet = write_profiles(tmp_path / "profiles", [0])
    monkeypatch.setenv(paths.PROFILES_ENV, str(fleet.profiles_dir))
    with cleaned(paths.state_dir(), fleet.ports):
        yield fleet.ports


@needs_tmpfs
@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_full_state_tmpfs_is_refused_in_one_line(
    tmp_path: Path, ports: list[int], command: str
) -> None:
    state = paths.state_dir()
    state.mkdir(mode=0o700, parents=True, exist_ok=True)
    wrapper = in_tmpfs.wrapper("256k", state, tmp_path / "copied", full=True)
    argv = [*wrapper, sys.executable, "-m", "tui", *COMMANDS[command]]
    done = subprocess.run(
        argv, cwd=REPO, env=dict(os.environ), capture_output=True, text=True, timeout=90
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and "no space left" in lines[0], lines
    assert "unexpected error" not in done.stderr
    assert not leftovers(state, ports)


@pytest.mark.parametrize("command", list(COMMANDS))
def test_no_room_in_the_state_directory_refuses_before_anything_is_launched(
    ports: list[int],
    command: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """No root: the space check's allocation fails as a full disk's does."""

    def full(fd: int, offset: int, length: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "posix_fallocate", full)
    args = COMMANDS[command][1:]
    status = (sim_fleet_cli.main if command == "sim-fleet start" else apply_cli.main)(args)
    err = capsys.readouterr().err.strip()
    assert status == 2 and err.count("\n") == 0, err
    assert f"{paths.state_dir()}: has no room for the fleet's state" in err, err
    assert not leftovers(paths.state_dir(), ports)

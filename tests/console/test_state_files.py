"""A damaged state file is an error naming it, in one line, everywhere: never "no servers".

Each case writes a damaged ``fleet_state.json`` and runs the commands that read it; each must
exit non-zero with one line on stderr naming the file, print no traceback, and change nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from repo_paths import ROOT

from tui import paths
from tui.ops.cli import apply as apply_cli
from tui.ops.cli import canary as canary_cli
from tui.ops.cli import rollout as rollout_cli
from tui.ops.cli import sim_fleet as sim_fleet_cli
from tui.state.files import StateFileError
from tui.state.fleet_state import ProcessRecord, put_record, read_fleet, read_records
from tui.ui import cli as console_cli
from tui.ui import demo_cli

SHIPPED = ROOT / "profiles"

DAMAGE: dict[str, bytes] = {
    "empty": b"",
    "truncated": b'{"version": 2, "gpus": {"0": {"port": 30000, "ser',
    "garbage": b"\x00\x01not json at all",
    "not-utf8": b'{"gpus": {"0": {"host": "\xff\xfe"}}}',
    "a list": b"[]",
    "gpus is a list": b'{"version": 2, "gpus": []}',
    "server of the wrong type": b'{"version": 2, "gpus": {"0": {"server": 5}}}',
    "server missing its pid": b'{"version": 2, "gpus": {"0": {"server": {"gpu": 0}}}}',
    "a GPU key that is no index": b'{"version": 2, "gpus": {"\xc2\xb2": {}}}',
    "port of the wrong type": b'{"version": 2, "gpus": {"0": {"port": "30000"}}}',
    "nested too deeply": b'{"gpus": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    "port NaN": b'{"version": 2, "gpus": {"0": {"port": NaN}}}',
    "port 1e999": b'{"version": 2, "gpus": {"0": {"port": 1e999}}}',
    "create_time NaN": (
        b'{"version": 2, "gpus": {"0": {"server": {"gpu": 0, "port": 1, "pid": 9, "pgid": 9,'
        b' "create_time": NaN, "cmdline": [], "log_path": ""}}}}'
    ),
    "version 99": b'{"version": 99, "gpus": {}}',
    "no version": b'{"gpus": {}}',
    "current not a profile": b'{"version": 2, "gpus": {"0": {"current": {"engine": 5}}}}',
}

COMMANDS: dict[str, Callable[[], int]] = {
    "console --profile": lambda: console_cli.main(["--profile", "sim-baseline"]),
    "demo": lambda: demo_cli.main(["--gpus", "1", "--no-pipeline"]),
    "apply": lambda: apply_cli.main(["sim-baseline", "--no-measure"]),
    "apply --rollback": lambda: apply_cli.main(["--rollback"]),
    "canary": lambda: canary_cli.main(["sim-aggressive", "--gpu", "0"]),
    "rollout": lambda: rollout_cli.main(["sim-aggressive"]),
    "sim-fleet status": lambda: sim_fleet_cli.main(["status"]),
    "sim-fleet stop": lambda: sim_fleet_cli.main(["stop"]),
    "sim-fleet start": lambda: sim_fleet_cli.main(["start", "--gpus", "0", "--wait", "0"]),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_reading_a_damaged_state_file_names_it(damage: str) -> None:
    path = paths.fleet_state_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(DAMAGE[damage])
    with pytest.raises(StateFileError, match=str(path)) as caught:
        read_fleet()
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("damage", ["truncated", "a list", "server missing its pid"])
def test_every_command_refuses_in_one_line_and_changes_nothing(
    command: str,
    damage: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(paths.PROFILES_ENV, str(SHIPPED))
    path = paths.fleet_state_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(DAMAGE[damage])
    status = COMMANDS[command]()
    err = capsys.readouterr().err.strip()
    assert status != 0
    assert "Traceback" not in err
    assert err.count("\n") == 0 and str(path) in err, err
    assert path.read_bytes() == DAMAGE[damage]  # nothing written over it


def test_a_writer_refuses_to_write_over_a_damaged_file() -> None:
    path = paths.fleet_state_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("[]")
    record = ProcessRecord(0, 30000, 1, 1, 1.0, ("x",), "/dev/null")
    with pytest.raises(StateFileError):
        put_record(record)
    assert path.read_text() == "[]"


def test_the_files_of_earlier_versions_are_read_once(tmp_path: Path) -> None:
    server = ProcessRecord(3, 31003, 42, 42, 5.0, ("python", "-m", "x"), "/tmp/x.log", "p")
    state = paths.state_dir()
    state.mkdir(parents=True, exist_ok=True)
    (state / "fleet.json").write_text(
        json.dumps({"version": 1, "servers": {"3": server.to_json()}})
    )
    (state / "running_profiles.json").write_text(
        json.dumps({"gpus": {"3": {"current": {"name": "p"}, "previous": None}}})
    )
    assert read_records() == {3: server}
    assert read_fleet()[3].current_name == "p" and read_fleet()[3].port == 31003

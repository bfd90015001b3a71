"""``gpufleet demo`` before the console opens: bad options and a taken port get clear messages."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from operator_helpers import cleaned, free_port_run, leftovers

from tui.state.fleet_state import read_records
from tui.ui import demo_cli


def test_bad_option_names_the_option_and_range(capsys: pytest.CaptureFixture[str]) -> None:
    assert demo_cli.main(["--gpus", "9"]) == 2
    assert "--gpus: 9 is outside 1..7" in capsys.readouterr().err
    assert demo_cli.main(["--speed", "0"]) == 2
    assert "--speed" in capsys.readouterr().err


def test_taken_port_is_named_and_nothing_is_left(
    isolated_state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = free_port_run(3)
    ports = [base, base + 1, base + 2]
    with cleaned(isolated_state, ports), socket.socket() as holder:
        holder.bind(("127.0.0.1", base + 1))
        holder.listen()
        code = demo_cli.main(["--gpus", "3", "--speed", "200", "--base-port", str(base)])
        err = capsys.readouterr().err
        assert code == 1
        assert str(base + 1) in err and "GPU 1" in err, err
        assert read_records() == {}  # the GPUs that did start were stopped again
        assert leftovers(isolated_state, ports) == []

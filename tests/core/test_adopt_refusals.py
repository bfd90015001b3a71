"""``gpufleet adopt`` refuses what it cannot take over: one line naming the field, exit 2, nothing
written (issue 35, point 1). Real listeners on loopback; no server is ever signalled."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from control_helpers import running
from sim_helpers import wait_until

from bench.operator_fleet import answers, operator_fleet, sim_server
from bench.ports import free_port, free_ports
from tui import cli, paths
from tui.ops.journal import read_journal


def _adopt(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(["adopt", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def _nothing_written() -> None:
    assert not paths.fleet_state_file().exists()
    assert not list(paths.user_profiles_dir().glob("*.toml"))


@pytest.fixture()
def web_server() -> Iterator[tuple[int, int]]:
    """``python -m http.server`` on a loopback port: (port, pid)."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert wait_until(lambda: answers(f"http://127.0.0.1:{port}", ("/",)), 20)
        yield port, proc.pid
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_a_port_held_by_no_sglang_server_is_refused_and_named(
    web_server: tuple[int, int], capsys: pytest.CaptureFixture[str]
) -> None:
    port, pid = web_server
    code, out, err = _adopt(capsys, "--ports", str(port), "--gpus", "0", "--name", "mine")
    assert code == 2 and out == ""
    assert err.count("\n") == 1, err
    assert f"--ports: port {port}: held by pid {pid} (" in err
    assert "-m http.server" in err and "not an SGLang server" in err
    assert running(pid)
    _nothing_written()


def test_a_port_with_no_listener_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    port = free_port()
    code, _, err = _adopt(capsys, "--ports", str(port), "--gpus", "0", "--name", "mine")
    assert code == 2
    assert err.strip() == (
        f"gpufleet adopt: --ports: port {port}: nothing listens there (no server to adopt)"
    )
    _nothing_written()


def test_a_gpu_list_of_another_length_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    a, b = free_ports(2)
    code, _, err = _adopt(capsys, "--ports", f"{a},{b}", "--gpus", "0", "--name", "mine")
    assert code == 2
    assert err.strip() == "gpufleet adopt: --gpus: 1 GPUs for 2 ports; give one GPU per port"
    _nothing_written()


def test_a_name_that_exists_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    existing = paths.user_profiles_dir() / "mine.toml"
    existing.parent.mkdir(parents=True)
    existing.write_text("# the operator's own\n")
    code, _, err = _adopt(capsys, "--ports", str(free_port()), "--name", "mine")
    assert code == 2
    assert err.strip() == (
        f"gpufleet adopt: --name: a profile 'mine' exists ({existing}); choose another name"
    )
    assert existing.read_text() == "# the operator's own\n"
    assert not paths.fleet_state_file().exists()


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--ports", "30000-29990", "--name", "x"], "--ports: '30000-29990' is not a list"),
        (["--ports", "1-99999", "--name", "x"], "--ports: '1-99999': allowed range 1..65535"),
        (["--ports", "30000", "--gpus", "a", "--name", "x"], "--gpus: 'a' is not a list"),
        (["--ports", "30000", "--name", "../x"], "--name: '../x' must be letters"),
    ],
)
def test_bad_input_is_one_line_naming_the_field(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _adopt(capsys, *argv)
    assert code == 2 and err.count("\n") == 1 and said in err, err
    _nothing_written()


def test_gpus_names_the_slot_and_the_server_s_own_card_is_kept_as_its_device(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--gpus 1 for a server the script started on card 0 (a slot is gpufleet's number, the card
    its CUDA_VISIBLE_DEVICES): said, and its device in the plan; the same server adopted with
    its own card as its GPU afterwards, and adopted twice refused."""
    port = free_port()
    with operator_fleet([sim_server(0, port, tmp_path, ["--enable-metrics"], 50.0)]) as fleet:
        code, out, err = _adopt(
            capsys, "--ports", str(port), "--gpus", "1", "--name", "mine", "--dry-run"
        )
        assert code == 0, err
        assert f"GPU 1 (device 0): port {port}, pid {fleet.pids[0]} (" in out
        assert "[gpu.1]\ndevice = 0\n" in out
        _nothing_written()
        assert read_journal().entries == ()
        code, out, err = _adopt(capsys, "--ports", str(port), "--name", "mine", "--dry-run")
        assert code == 0 and "dry run: nothing was written" in out, err
        _nothing_written()
        code, out, err = _adopt(capsys, "--ports", str(port), "--name", "mine")
        assert code == 0, err
        assert f"GPU 0: port {port}, pid {fleet.pids[0]} (" in out
        entry = read_journal().entries[-1]
        assert entry.type == "adopt" and entry.ok and entry.gpus == (0,)
        code, _, err = _adopt(capsys, "--ports", str(port), "--name", "again")
        assert code == 2
        assert f"--ports: port {port} already runs the fleet's server (GPU 0" in err

"""Every file a command reads goes through one door (``tui.inputs``): a FIFO, ``/dev/zero`` or a
directory in its place is refused at once, in one line naming the file, with the command's
bad-input exit code, and nothing is launched or written.

Before: a FIFO hung ``status --status``, ``agent --status``, ``logs parse``, ``serve
--token-file``, ``console --fleet``, ``autotune start --config`` and every command reading the
fleet state (the agent then ignored SIGTERM); ``/dev/zero`` read until ``MemoryError``. The
FIFO and directory rows run in-process (a hang is pytest's timeout); the ``/dev/zero`` rows run
as real processes under a 1 GiB address-space limit, so the old code's endless read fails fast
instead of eating the machine's memory.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from repo_paths import ROOT as REPO

from bench.ports import free_ports
from tui import paths

pytestmark = [pytest.mark.timeout(60)]

SHIPPED = REPO / "profiles"


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


# --- the commands: FIFOs and directories, in-process ---------------------------------------------


def _status(path: Path) -> int:
    from tui.ops.cli import status

    return status.main(["--status", str(path), "--ports", "9"])


def _agent_status(path: Path) -> int:
    from tui.agent import cli

    port = free_ports(1)[0]
    return cli.main(["--status", str(path), "--profile", "sim-baseline", "--port", str(port)])


def _logs_parse(path: Path) -> int:
    from tui.logs import cli

    return cli.main(["parse", str(path)])


def _serve_token(path: Path) -> int:
    from tui.ui.serve import cli

    return cli.main(["--token-file", str(path), "--port", str(free_ports(1)[0])])


def _serve_fleet(path: Path) -> int:
    from tui.ui.serve import cli

    return cli.main(["--port", str(free_ports(1)[0]), "--fleet", str(path)])


def _console_fleet(path: Path) -> int:
    from tui.ui import cli

    return cli.main(["--fleet", str(path)])


def _autotune_config(path: Path) -> int:
    from tui.autotune import cli

    return cli.main(["start", "--config", str(path)])


def _agent_token(path: Path) -> int:
    from tui.agent import cli

    port = free_ports(1)[0]
    return cli.main(["--token-file", str(path), "--profile", "sim-baseline", "--port", str(port)])


def _plan_log(path: Path) -> int:
    from tui.retune import plan_cli

    try:
        return plan_cli.main(["qwen3.6-27b", "--log", str(path)])
    except SystemExit as exit_:  # its parser's error(): one line, exit 2
        return int(exit_.code or 0)


INPUTS: dict[str, tuple[Callable[[Path], int], int]] = {
    "plan --log": (_plan_log, 2),
    "status --status": (_status, 3),
    "agent --status": (_agent_status, 2),
    "agent --token-file": (_agent_token, 2),
    "logs parse": (_logs_parse, 2),
    "serve --token-file": (_serve_token, 2),
    "serve --fleet": (_serve_fleet, 2),
    "console --fleet": (_console_fleet, 2),
    "autotune start --config": (_autotune_config, 2),
}


@pytest.mark.parametrize("kind", ["fifo", "directory"])
@pytest.mark.parametrize("command", sorted(INPUTS))
def test_a_fifo_or_directory_input_is_refused_in_one_line(
    command: str,
    kind: str,
    fifo: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(paths.PROFILES_ENV, str(SHIPPED))
    path = fifo if kind == "fifo" else tmp_path
    run, code = INPUTS[command]
    status = run(path)
    err = capsys.readouterr().err.strip()
    assert status == code, err
    assert "Traceback" not in err
    assert err.count("\n") == 0 and str(path) in err, err
    assert not paths.fleet_state_file().exists()


# --- the fleet state as a FIFO or a directory ----------------------------------------------------


def _state_commands() -> dict[str, tuple[Callable[[], int], int]]:
    from tui.agent import cli as agent_cli
    from tui.ops.cli import apply as apply_cli
    from tui.ops.cli import canary as canary_cli
    from tui.ops.cli import sim_fleet as sim_fleet_cli
    from tui.ops.cli import status as status_cli

    port = free_ports(1)[0]
    return {
        "status": (lambda: status_cli.main([]), 3),
        "sim-fleet status": (lambda: sim_fleet_cli.main(["status"]), 2),
        "sim-fleet start": (lambda: sim_fleet_cli.main(["start", "--gpus", "0", "--wait", "0"]), 2),
        "apply": (lambda: apply_cli.main(["sim-baseline", "--no-measure"]), 2),
        "canary": (lambda: canary_cli.main(["sim-aggressive", "--gpu", "0"]), 2),
        "agent": (lambda: agent_cli.main(["--profile", "sim-baseline", "--port", str(port)]), 2),
        "agent --detach": (
            lambda: agent_cli.main(["--detach", "--profile", "sim-baseline", "--port", str(port)]),
            2,
        ),
    }


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_a_fifo_or_directory_as_the_fleet_state_is_refused_by_every_command(
    kind: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(paths.PROFILES_ENV, str(SHIPPED))
    state = paths.fleet_state_file()
    state.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(state)
    else:
        state.mkdir()
    for name, (run, code) in _state_commands().items():
        status = run()
        err = capsys.readouterr().err.strip().splitlines()
        assert status == code, (name, err)
        assert len(err) == 1 and str(state) in err[0], (name, err)
        assert not list(state.parent.glob("*.log")), name
    assert not (state.parent / "agent.pid.json").exists()


# --- /dev/zero: real processes under an address-space limit --------------------------------------


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


def _zero_rows() -> list[tuple[list[str], int, bool]]:
    """(arguments, exit code, whether /dev/zero stands for the fleet state): one row per kind of
    input (a status document, a token, a fleet file, a config, the state); the FIFO rows above
    cover every command."""
    port = str(free_ports(1)[0])
    zero = "/dev/zero"
    return [
        (["status", "--status", zero, "--ports", "9"], 3, False),
        (["serve", "--token-file", zero, "--port", port], 2, False),
        (["console", "--fleet", zero], 2, False),
        (["autotune", "start", "--config", zero], 2, False),
        (["sim-fleet", "status"], 2, True),
    ]


def _run_zero(row: tuple[list[str], int, bool], work: Path) -> str | None:
    args, code, as_state = row
    state = work / "state"
    state.mkdir(mode=0o700, parents=True)  # private, as gpufleet makes it: no notice line
    if as_state:
        (state / "fleet_state.json").symlink_to("/dev/zero")
    env = {**os.environ, paths.STATE_ENV: str(state), paths.PROFILES_ENV: str(SHIPPED)}
    env[paths.CONFIG_ENV] = str(work / "config")
    env.pop("GPUFLEET_DEBUG", None)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "tui", *args],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=40,
            stdin=subprocess.DEVNULL,
            preexec_fn=_limited,
        )
    except subprocess.TimeoutExpired:
        return f"{args}: did not end within 40 s"
    lines = done.stderr.strip().splitlines()
    named = "fleet_state.json: is a device" if as_state else "/dev/zero: is a device"
    if done.returncode != code or len(lines) != 1 or named not in lines[0]:
        return f"{args}: exit {done.returncode} (expected {code}), stderr {done.stderr[-400:]!r}"
    return None


def test_dev_zero_is_refused_at_once_by_every_command(tmp_path: Path) -> None:
    rows = _zero_rows()
    with ThreadPoolExecutor(3) as pool:
        found = list(pool.map(lambda i: _run_zero(rows[i], tmp_path / f"r{i}"), range(len(rows))))
    failures = [f for f in found if f]
    assert not failures, "\n".join(failures)


def test_the_agent_answers_a_damaged_state_in_one_line_never_a_traceback(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``gpufleet agent`` (served in the foreground, and ``--detach``) reads the fleet state
    through the checked path before uvicorn starts: before, each case was uvicorn's
    ``ERROR: Traceback`` from the app's lifespan and exit 1."""
    from tui.agent import cli as agent_cli

    monkeypatch.setenv(paths.PROFILES_ENV, str(SHIPPED))
    state = paths.fleet_state_file()
    state.parent.mkdir(parents=True, exist_ok=True)
    server = {"gpu": 0, "port": 1, "pgid": 9, "create_time": 1.0, "cmdline": [], "log_path": ""}
    cases = {
        "empty": b"",
        "truncated": b'{"version": 2, "gpus": {"0": {"po',
        "binary": bytes(range(256)),
        "a list": b"[]",
        "pid as a string": json.dumps(
            {"version": 2, "gpus": {"0": {"server": {**server, "pid": "12"}}}}
        ).encode(),
        "port NaN": b'{"version": 2, "gpus": {"0": {"port": NaN}}}',
        "port 1e999": b'{"version": 2, "gpus": {"0": {"port": 1e999}}}',
        "nested 100k deep": b'{"gpus": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        "version 99": b'{"version": 99, "gpus": {}}',
    }
    port = str(free_ports(1)[0])
    for name, raw in cases.items():
        state.write_bytes(raw)
        for detach in ([], ["--detach"]):
            status = agent_cli.main([*detach, "--profile", "sim-baseline", "--port", port])
            err = capsys.readouterr().err.strip()
            assert status == 2, (name, detach, err)
            assert "\n" not in err and str(state) in err and "Traceback" not in err, (name, err)


def test_the_pipelines_own_records_are_never_read_from_a_fifo(fifo: Path, tmp_path: Path) -> None:
    """A FIFO in the output directory (its job id, done record or job index) is refused at once
    (before: the pipeline hung opening it)."""
    from tui.pipeline import job_index
    from tui.pipeline.done_record import DoneRecord
    from tui.pipeline.job_id import JOB_ID_NAME, job_id

    out = tmp_path / "out"
    out.mkdir()
    os.mkfifo(out / JOB_ID_NAME)
    with pytest.raises(ValueError, match="is a FIFO"):
        job_id(out)
    with pytest.raises(ValueError, match="is a FIFO"):
        DoneRecord.load(fifo)
    os.mkfifo(out / job_index.REGISTRY_NAME)
    with pytest.raises(job_index.JobIndexDamaged, match="is a FIFO"):
        job_index.resolve(
            out,
            job_index.array("q", [1]),
            b"d" * 16,
            DoneRecord.load(tmp_path / "none"),
            by_id=False,
        )

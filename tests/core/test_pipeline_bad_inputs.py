"""Every subcommand against a table of bad inputs: a one-line error naming the input, a non-zero
exit, never a traceback, and nothing written or launched.

Each row runs ``python -m tui ...`` for real (what a user gets, exit status included) with its own
empty state directory, which must still be empty afterwards (no fleet record, journal, status or
log), and no output directory may appear. The bad files: missing, empty, binary, huge (a sparse
64 MiB file of zeros: one endless line), deeply nested (100,000 brackets), the wrong type,
non-UTF-8, a directory, a FIFO, ``/dev/zero``, and paths under ``/proc`` that cannot be written.
A few inputs are tolerated by design (a log is parsed whatever its bytes; a torn journal line is
skipped): those rows expect exit 0 and a warning, still without a traceback.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from repo_paths import ROOT as REPO

NO_SERVER = ["--server", "http://127.0.0.1:9", "--fleet-timeout", "1"]


@dataclass(frozen=True)
class Row:
    """One bad input: the arguments after ``gpufleet`` ({B} is the bad-files directory, {W} the
    row's work directory), what the error must say, and the exit status expected."""

    args: tuple[str, ...]
    says: str
    code: int | None = None
    """None: any non-zero status."""
    stream: str = "stderr"
    env: dict[str, str] = field(default_factory=dict)
    journal: str | None = None
    """A bad file (in {B}) to place as the journal, or "dir"."""


def _generate(*args: str) -> tuple[str, ...]:
    return ("generate", "--out", "{W}/out", "--status", "{W}/status.json", *args)


def _good(*args: str) -> tuple[str, ...]:
    return _generate("--prompts", "{B}/good.jsonl", *args)


ROWS = [
    # generate: the prompts file
    Row(_generate("--prompts", "{B}/missing.jsonl", *NO_SERVER), "missing.jsonl: no such file", 2),
    Row(_generate("--prompts", "{B}/empty", *NO_SERVER), "empty: no valid prompt in 0 line", 2),
    Row(_generate("--prompts", "{B}/binary", *NO_SERVER), "binary: no valid prompt", 2),
    Row(_generate("--prompts", "{B}/huge", *NO_SERVER), "huge: no valid prompt in 1 line", 2),
    Row(_generate("--prompts", "{B}/deep.jsonl", *NO_SERVER), "deep.jsonl: no valid prompt", 2),
    Row(_generate("--prompts", "{B}/wrong.jsonl", *NO_SERVER), "wrong.jsonl: no valid prompt", 2),
    Row(_generate("--prompts", "{B}/dir", *NO_SERVER), "dir: is a directory", 2),
    Row(_generate("--prompts", "/dev/zero", *NO_SERVER), "/dev/zero: is a character device", 2),
    Row(_generate("--prompts", "{B}/fifo", *NO_SERVER), "fifo: is a FIFO", 2),
    # generate: outputs, servers, S3, numbers
    Row(_generate("--prompts", "{B}/good.jsonl", *NO_SERVER, "--out", "{B}/empty"), "--out=", 2),
    Row(_good("--out", "/proc/gpufleet-out", *NO_SERVER), "--out=/proc/gpufleet-out", 2),
    Row(_good("--status", "{B}/dir", *NO_SERVER), "--status=", 2),
    Row(_good("--status", "/proc/gpufleet/s.json", *NO_SERVER), "--status=/proc/gpufleet", 2),
    Row(_good("--detach", "--log", "/proc/gpufleet/log", *NO_SERVER), "--log=/proc/gpufleet", 2),
    Row(_good("--server", "not a url"), "--server='not a url'", 2),
    Row(_good("--server", "http://h:99999"), "--server='http://h:99999'", 2),
    Row(
        _good(*NO_SERVER, "--s3-bucket", "gpufleet-x", "--s3-endpoint-url", "not a url"),
        "--s3-endpoint-url='not a url'",
        2,
    ),
    Row(_good(*NO_SERVER, "--s3-bucket", "Bad_Bucket!"), "--s3-bucket='Bad_Bucket!'", 2),
    Row(_good("--profile", "{B}/binary"), "--profile={B}/binary: is not UTF-8", 2),
    Row(_good("--profile", "{B}/deep.toml"), "deep.toml: nests tables or arrays deeper", 2),
    Row(_good(*NO_SERVER, "--shard-size", "abc"), "--shard-size: abc", 2),
    Row(_good(*NO_SERVER, "--fleet-timeout", "nan"), "--fleet-timeout: nan", 2),
    Row(_good(*NO_SERVER, "--max-line-bytes", "1e99"), "--max-line-bytes: 1e99", 2),
    # profile
    Row(("profile", "show", "{B}/missing.toml"), "no such file or profile", 1),
    Row(("profile", "show", "{B}/binary"), "binary: is not UTF-8 text", 1),
    Row(("profile", "show", "{B}/huge"), "huge: is larger than 1 MiB", 1),
    Row(("profile", "show", "{B}/deep.toml"), "deep.toml: nests tables or arrays deeper", 1),
    Row(("profile", "show", "{B}/dir"), "dir: is a directory", 1),
    Row(("profile", "show", "/dev/zero"), "/dev/zero: is a device", 1),
    Row(("profile", "show", "{B}/fifo"), "fifo: is a FIFO", 1),
    Row(("profile", "validate", "{B}/empty"), "fleet.gpus = None", 1),
    Row(("profile", "validate", "{B}/wrong.toml"), "fleet.gpus = 'abc'", 1),
    Row(("profile", "validate", "{B}/nonutf8.toml"), "nonutf8.toml: is not UTF-8", 1),
    Row(("profile", "validate", "{B}/superscript.toml"), "gpu.² = '²': no such GPU", 1),
    Row(("profile", "validate", "{B}/template.toml"), "fleet.log_file = 'g{gpu}{port.__doc__}'", 1),
    Row(("profile", "diff", "sim-baseline", "{B}/binary"), "binary: is not UTF-8", 1),
    Row(("profile", "argv", "sim-baseline", "--gpu", "abc"), "--gpu: abc", 2),
    Row(("profile", "argv", "sim-baseline", "--gpu", "99"), "--gpu 99: GPU 99 is not", 2),
    Row(
        ("profile", "list"),
        "{B}/missing is not a directory",
        2,
        env={"GPUFLEET_PROFILES_DIR": "{B}/missing"},
    ),
    Row(
        ("profile", "list"),
        "nonutf8                  INVALID: is not UTF-8",
        1,
        "stdout",
        env={"GPUFLEET_PROFILES_DIR": "{B}/profiles"},
    ),
    Row(("profile", "frobnicate"), "invalid choice: 'frobnicate'", 2),
    # operations: nothing may be stopped or launched
    Row(("apply", "{B}/binary"), "binary: is not UTF-8", 2),
    Row(("apply", "{B}/superscript.toml"), "gpu.² = '²'", 2),
    Row(("apply",), "PROFILE is required", 2),
    Row(("apply", "sim-baseline", "--gpus", "x"), "--gpus: 'x'", 2),
    Row(("apply", "sim-baseline", "--timeout", "nan"), "--timeout: nan", 2),
    Row(("canary", "{B}/deep.toml", "--gpu", "0"), "deep.toml: nests", 2),
    Row(("canary", "sim-baseline", "--gpu", "abc"), "--gpu: abc", 2),
    Row(("canary", "sim-baseline", "--gpu", "0", "--level", "2"), "--level: 2", 2),
    Row(("rollout", "{B}/nonutf8.toml"), "nonutf8.toml: is not UTF-8", 2),
    Row(("rollout", "sim-baseline", "--batch", "0"), "--batch: 0", 2),
    Row(("rollout", "sim-baseline", "--gpus", "x"), "--gpus: 'x'", 2),
    # journal
    Row(("journal", "--last", "abc"), "--last: invalid int value: 'abc'", 2),
    Row(("journal", "--last", "0"), "--last=0: must be >= 1", 2),
    Row(("journal",), "not a regular file, not a journal", 1, journal="dir"),
    Row(("journal",), "not a regular file, not a journal", 1, journal="fifo"),
    Row(("journal",), "4 unreadable line(s) skipped", 0, journal="journal.jsonl"),
    # logs
    Row(("logs", "parse", "{B}/missing"), "no such file: {B}/missing", 2),
    Row(("logs", "parse", "{B}/dir"), "FILE is a directory", 2),
    Row(("logs", "parse", "/dev/zero"), "not a log file: /dev/zero", 2),
    Row(("logs", "summary", "/dev/zero"), "not a log file: /dev/zero", 2),
    Row(("logs", "summary", "{B}/fifo"), "not a log file", 2),
    Row(("logs", "summary", "-"), "FILE must be a file", 2),
    Row(("logs", "frobnicate", "x"), "invalid choice: 'frobnicate'", 2),
    Row(("logs", "parse", "{B}/binary"), "", 0, "stdout"),  # any bytes parse: nothing matches
    Row(("logs", "summary", "{B}/huge"), '"lines"', 0, "stdout"),  # bounded: the line is skipped
    # gpus, sim, sim-fleet
    Row(("gpus", "--source", "frobnicate"), "--source: invalid choice", 2),
    Row(("sim", "--port", "abc"), "--port", 2),
    Row(("sim", "--port", "70000"), "--port: 70000 is out of range", 2),
    Row(("sim", "--sim-speed", "nan"), "--sim-speed: nan is out of range", 2),
    Row(("sim", "--mem-fraction-static", "2"), "--mem-fraction-static: 2", 2),
    Row(("sim-fleet", "start", "--profile", "{B}/binary"), "binary: is not UTF-8", 2),
    Row(("sim-fleet", "start", "--gpus", "x"), "--gpus 'x'", 2),
    Row(("sim-fleet", "start", "--wait", "nan"), "--wait: nan", 2),
    Row(("sim-fleet", "stop", "--timeout", "-1"), "--timeout: -1", 2),
    # console and demo: refused before any window opens or server starts
    Row(("console", "--ports", "x"), "--ports: 'x'", 2),
    Row(("console", "--ports", "1-2", "--gpus", "0"), "--ports gives 2 ports", 2),
    Row(("console", "--log-pattern", "g{gpu.__doc__}"), "--log-pattern='g{gpu.__doc__}'", 2),
    Row(("console", "--profile", "{B}/binary"), "binary: is not UTF-8", 2),
    Row(("console", "--measure-window", "nan"), "--measure-window: nan", 2),
    Row(("console", "--profile", "sim-baseline", "--prompts", "{B}/dir"), "--prompts:", 2),
    Row(("demo", "--gpus", "0"), "--gpus: 0 is outside 1..7", 2),
    Row(("demo", "--speed", "nan"), "--speed: nan is outside", 2),
    Row(("demo", "--base-port", "70000"), "--base-port: 70000 is outside", 2),
    Row(("demo", "--profile", "{B}/deep.toml"), "deep.toml: nests", 2),
    Row(("demo", "--measure-window", "0"), "--measure-window: 0", 2),
]


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bad inputs, made once."""
    bad = tmp_path_factory.mktemp("bad")
    rng = random.Random(15)
    (bad / "empty").write_bytes(b"")
    (bad / "binary").write_bytes(bytes(rng.getrandbits(8) for _ in range(4096)))
    with open(bad / "huge", "wb") as handle:
        handle.truncate(64 * 1024 * 1024)  # sparse: no disk, but 64 MiB to read
    (bad / "deep.jsonl").write_text("[" * 100_000 + "\n")
    (bad / "deep.toml").write_text("a = " + "[" * 100_000 + "]" * 100_000 + "\n")
    (bad / "wrong.jsonl").write_text('[1, 2]\n"text"\n{"custom_id": 5, "url": 1, "body": {}}\n')
    (bad / "wrong.toml").write_text('[fleet]\ngpus = "abc"\n')
    (bad / "nonutf8.toml").write_bytes(b'\xff\xfename = "x"\n')
    sim = '[engine]\nkind = "sim"\n[fleet]\ngpus = [0]\n'
    (bad / "superscript.toml").write_text(sim + '[gpu."²"]\nmem_fraction_static = 0.5\n')
    (bad / "template.toml").write_text(
        sim.replace("[0]\n", '[0]\nlog_file = "g{gpu}{port.__doc__}"\n')
    )
    (bad / "good.jsonl").write_text('{"prompt": "fine"}\n')
    (bad / "journal.jsonl").write_text(
        '{"type": "apply"}\n\xff\n' + "[" * 100_000 + '\n{"gpus": 5}\n'
    )
    (bad / "dir").mkdir()
    (bad / "profiles").mkdir()
    (bad / "profiles" / "nonutf8.toml").write_bytes((bad / "nonutf8.toml").read_bytes())
    os.mkfifo(bad / "fifo")
    return bad


def _listing(root: Path) -> Iterator[tuple[str, int]]:
    for path in sorted(root.rglob("*")):
        yield str(path.relative_to(root)), path.lstat().st_size


def _run(row: Row, bad: Path, work: Path) -> str | None:
    """Run one row; returns what is wrong with the outcome, or None."""
    state = work / "state"
    state.mkdir(parents=True)
    fill = {"{B}": str(bad), "{W}": str(work)}

    def expand(text: str) -> str:
        for key, value in fill.items():
            text = text.replace(key, value)
        return text

    if row.journal == "dir":
        (state / "journal.jsonl").mkdir()
    elif row.journal is not None:
        (state / "journal.jsonl").symlink_to(bad / row.journal)
    before = list(_listing(state))
    env = {**os.environ, "GPUFLEET_STATE_DIR": str(state)}
    env.pop("GPUFLEET_DEBUG", None)
    env.update({key: expand(value) for key, value in row.env.items()})
    argv = [sys.executable, "-m", "tui", *(expand(arg) for arg in row.args)]
    started = time.monotonic()
    try:
        done = subprocess.run(
            argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=60,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return "did not end within 60 s"
    print(f"{time.monotonic() - started:5.1f} s  {' '.join(row.args)}")
    text = done.stdout if row.stream == "stdout" else done.stderr
    lines = done.stderr.splitlines()
    problems = []
    if (row.code is None and done.returncode == 0) or row.code not in (None, done.returncode):
        problems.append(f"exit {done.returncode}, expected {row.code or 'non-zero'}")
    if "Traceback" in done.stderr or "unexpected error" in done.stderr:
        problems.append("a traceback (or the last-resort handler) reached the user")
    if row.args[0] == "sim":
        # The simulator is a drop-in for `python -m sglang.launch_server`: it prints SGLang's
        # own argparse text, a usage block and then one error line (`sglang serve: error: ...`).
        usage = [line for line in lines[:-1] if not line.startswith(("usage:", " "))]
        if usage or not lines or ": error: " not in lines[-1]:
            problems.append("stderr is not SGLang's usage block and one error line")
    elif any(not line.startswith(("gpufleet", "(")) for line in lines):
        problems.append("stderr has lines that are not one-line messages")
    said = text.splitlines()[-1] if text.strip() and row.stream == "stderr" else text
    if expand(row.says) not in said:
        problems.append(f"the error does not say {expand(row.says)!r}")
    if list(_listing(state)) != before or (work / "out").exists():
        problems.append("it wrote something")
    if not problems:
        return None
    return f"{' '.join(row.args)}: {'; '.join(problems)}\n    stderr: {done.stderr[-600:]!r}"


def test_every_subcommand_refuses_bad_input_in_one_named_line(
    bad_files: Path, tmp_path: Path
) -> None:
    before = list(_listing(bad_files))
    with ThreadPoolExecutor(4) as pool:
        outcomes = list(
            pool.map(lambda n: _run(ROWS[n], bad_files, tmp_path / f"row{n}"), range(len(ROWS)))
        )
    failures = [outcome for outcome in outcomes if outcome is not None]
    assert not failures, f"{len(failures)} of {len(ROWS)} rows:\n" + "\n".join(failures)
    assert list(_listing(bad_files)) == before  # the inputs themselves are untouched
    commands = {row.args[0] for row in ROWS}
    assert commands >= {"generate", "profile", "apply", "canary", "rollout", "journal", "logs"}
    assert commands >= {"gpus", "sim", "sim-fleet", "console", "demo"}

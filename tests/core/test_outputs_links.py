"""Nothing gpufleet writes follows a link or trusts another user (issue 36).

The red team's attack: a user who can write ``--out`` links ``OUT/.gpufleet-generate.lock`` to a
root 0600 file, and root's ``generate`` empties it. Here every kind of file gpufleet creates,
truncates or appends to meets a link (or a hard link) planted where it writes: the link's target
(a 0600 "victim" file of this user, or a name that does not exist yet) is never written, truncated
or created, and the writer refuses in one line naming the path. Directories another user could
write are refused before anything is written in them.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from pipeline_helpers import REPO, write_batch

from tui.outputs import (
    UnsafePath,
    append_record,
    check_dir,
    create_new,
    open_writable,
    replace_file,
    write_holder,
)

pytestmark = [pytest.mark.timeout(60)]

SECRET = b"root's secret\n"


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A 0600 file of this user that an attacker wants emptied or written."""
    path = tmp_path / "victim"
    path.write_bytes(SECRET)
    path.chmod(0o600)
    return path


def _out_lock(out: Path) -> None:
    from tui.pipeline.out_lock import OutDirLock

    OutDirLock.acquire(out).release()


def _done_record(out: Path) -> None:
    from tui.pipeline.done_record import DoneRecord

    DoneRecord(out / "done_record.bin", bytearray(), set(), 0).append(1, [0, 1])


def _failures(out: Path) -> None:
    from tui.pipeline.failures import FailureLog

    FailureLog.open(out / "failures.jsonl").append([b'{"x": 1}\n'])


def _shard(out: Path) -> None:
    from tui.pipeline.shards import ShardStore

    ShardStore(out).write(1, [b'{"index": 0}\n'])


def _journal(out: Path) -> None:
    from tui.ops.entries import simple_entry
    from tui.ops.journal import append

    append(simple_entry("kill", 1.0, 2.0, True, (0,), "test", "x"), out / "journal.jsonl")


def _state_lock(out: Path) -> None:
    from tui.state.locks import locked

    with locked(out / "fleet_state.json"):
        pass


def _detached_log(out: Path) -> None:
    from tui.pipeline.detach import start_detached

    start_detached(["--help"], out / "pipeline.log", out / "status.json")


WRITERS: dict[str, tuple[str, Callable[[Path], None]]] = {
    "generate's output lock": (".gpufleet-generate.lock", _out_lock),
    "the done record": ("done_record.bin", _done_record),
    "failures.jsonl": ("failures.jsonl", _failures),
    "a shard's temporary file": (".shard-000001.jsonl.tmp", _shard),
    "the journal": ("journal.jsonl", _journal),
    "a state file's lock": ("fleet_state.json.lock", _state_lock),
    "a detached job's log": ("pipeline.log", _detached_log),
}


CASES = [
    (writer, kind)
    for writer in WRITERS
    for kind in ("symlink", "hard link")
    # O_NOFOLLOW already refused a symlink there (a hard link was truncated)
    if (writer, kind) != ("a state file's lock", "symlink")
]


@pytest.mark.parametrize(("writer", "kind"), CASES)
def test_a_link_where_gpufleet_writes_is_refused_and_its_target_untouched(
    tmp_path: Path, victim: Path, writer: str, kind: str
) -> None:
    name, write = WRITERS[writer]
    out = tmp_path / "out"
    out.mkdir(mode=0o700)
    if kind == "symlink":
        (out / name).symlink_to(victim)
    else:
        os.link(victim, out / name)
    with pytest.raises(Exception) as refused:
        write(out)
    assert victim.read_bytes() == SECRET and stat.S_IMODE(victim.stat().st_mode) == 0o600
    assert str(out / name) in str(refused.value), refused.value
    assert "\n" not in str(refused.value)


def test_a_dangling_link_never_creates_its_target(tmp_path: Path) -> None:
    """A link to a name that does not exist (``/etc/cron.d/x``): following it would create the
    file there. A server's log is rotated (the link itself moved to ``.1``) and made afresh; the
    history database is refused."""
    from tui.control.launch import launch
    from tui.history.store import HistoryError, HistoryStore

    logs = tmp_path / "logs"
    logs.mkdir()
    planted = tmp_path / "planted"
    (logs / "gpu0.log").symlink_to(planted)
    argv = [sys.executable, "-c", "print('up')"]
    server = launch(argv, {}, logs / "gpu0.log", gpu=0, port=1, record=False)
    assert server.popen.wait(timeout=30) == 0
    assert (logs / "gpu0.log").read_text() == "up\n" and not (logs / "gpu0.log").is_symlink()
    (tmp_path / "history.sqlite3").symlink_to(tmp_path / "planted-db")
    with pytest.raises(HistoryError):
        HistoryStore(tmp_path / "history.sqlite3")
    assert not planted.exists() and not (tmp_path / "planted-db").exists()


@pytest.mark.parametrize("detach", [False, True], ids=["run", "--detach"])
def test_generate_refuses_a_linked_lock_in_one_line(
    tmp_path: Path, victim: Path, detach: bool
) -> None:
    """The red team's reproduction, as the command runs it (and as --detach checks it before
    starting the job): exit 2, one line, the root 0600 file whole (it used to be emptied)."""
    out = tmp_path / "out"
    out.mkdir()
    (out / ".gpufleet-generate.lock").symlink_to(victim)
    prompts = write_batch(tmp_path / "prompts.jsonl", ["a", "b"])
    argv = [sys.executable, "-m", "tui", "generate", "--prompts", str(prompts), "--out", str(out)]
    argv += ["--status", str(tmp_path / "status.json"), "--server", "http://127.0.0.1:9"]
    argv += ["--detach", "--log", str(tmp_path / "job.log")] if detach else []
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "symbolic link" in lines[0], lines
    assert victim.read_bytes() == SECRET


@pytest.mark.parametrize(
    ("mode", "words"),
    [(0o777, "group and others"), (0o775, "its group"), (0o757, "others")],
)
def test_a_directory_others_can_write_is_refused_unless_sticky(
    tmp_path: Path, mode: int, words: str
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(mode)
    with pytest.raises(UnsafePath) as refused:
        create_new(shared / "file")
    assert f"is writable by {words}" in str(refused.value) and str(shared) in str(refused.value)
    assert not (shared / "file").exists()
    shared.chmod(mode | stat.S_ISVTX)  # like /tmp: nobody can rename or remove our files
    os.close(create_new(shared / "file"))
    check_dir(shared / "missing" / "deeper")  # what does not exist yet is made by this user


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory away needs root")
def test_a_directory_of_another_user_is_refused(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, 4321, 4321)
    with pytest.raises(UnsafePath, match="owned by uid 4321"):
        replace_file(theirs / "status.json", b"{}")
    (tmp_path / "mine").mkdir()
    os.chown(tmp_path / "mine", 0, 0)
    os.symlink(theirs, tmp_path / "mine" / "via-link")  # resolved: where the files would land
    with pytest.raises(UnsafePath, match="owned by uid 4321"):
        check_dir(tmp_path / "mine" / "via-link")


def test_a_lock_file_is_never_truncated(tmp_path: Path) -> None:
    lock = tmp_path / "x.lock"
    fd = open_writable(lock)
    try:
        write_holder(fd, b'{"pid": 1, "a long record": "' + b"x" * 900 + b'"}')
        write_holder(fd, b'{"pid": 2}')
        assert os.fstat(fd).st_size == 931
        assert os.pread(fd, 4096, 0).strip() == b'{"pid": 2}'
    finally:
        os.close(fd)


APPEND_PAST_LIMIT = """
import os, resource, signal, sys
sys.path.insert(0, sys.argv[1])
from tui.outputs import append_record, open_writable
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # past the limit: EFBIG, not a killed process
resource.setrlimit(resource.RLIMIT_FSIZE, (100, 100))
fd = open_writable(sys.argv[2], append=True)
append_record(fd, b"a" * 59 + b"\\n")
try:
    append_record(fd, b"b" * 59 + b"\\n")  # 40 bytes fit: the write is cut short
except OSError as exc:
    print(exc.errno)
"""


def test_a_record_cut_short_by_the_file_size_limit_is_cut_off_whole(tmp_path: Path) -> None:
    """No root needed: ``RLIMIT_FSIZE`` makes the second record's write stop midway, as a full
    disk does; the file then holds the first record only, never half of the second."""
    target = tmp_path / "records"
    argv = [sys.executable, "-c", APPEND_PAST_LIMIT, str(REPO), str(target)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert done.stdout.strip() == "27", done.stderr  # EFBIG
    assert target.read_bytes() == b"a" * 59 + b"\n"
    fd = open_writable(target, append=True)
    try:
        append_record(fd, b"c\n")
    finally:
        os.close(fd)
    assert target.read_bytes().splitlines() == [b"a" * 59, b"c"]

"""Every file gpufleet creates, truncates or appends to goes through this one door.

A file gpufleet writes may sit in a directory another user can write: an ``--out`` on a shared
disk, a ``--status`` in ``/tmp``. That user can put a symbolic link where gpufleet is about to
write (``ln -s /etc/shadow OUT/.gpufleet-generate.lock``), or a hard link to a file of root's,
and root's gpufleet would truncate, overwrite or append to its target. So every write here:

1. happens in a directory checked first (``check_dir``): it and every directory above it are
   owned by the running user or root, and none is writable by group or others unless it is
   sticky (``/tmp``: there others may create names, but never rename or remove ours). A
   directory that fails is refused, never "fixed": only its owner should change it;
2. opens with ``O_NOFOLLOW`` (a link in the file's place is refused, never followed) and, where it
   creates, ``O_EXCL`` (a name someone put there first is refused); a file that already existed
   must be a regular file of the running user with one link (``fstat`` of the opened descriptor,
   not a racy ``stat`` of the path);
3. replaces a document through a temporary file created ``O_EXCL`` in the same directory,
   fsynced, then renamed over the name (a rename replaces a link, it never writes through one);
4. never truncates a lock file: its holder record is written over in place, padded.

A refusal is an ``UnsafePath`` (an ``OSError``, so whoever reports a failed write reports it
too) whose message is one line naming the path and why. A write that fails for want of space
(``ENOSPC``, a quota, ``RLIMIT_FSIZE``) is named by ``write_problem`` in the words the operator
needs: ``no space left on /data/out/shard-000003.jsonl``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from tui.inputs import kind_of

FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
"""Write failures that mean "no room": the disk, a quota, the process's file size limit."""
HOLDER_BYTES = 512
"""A lock file's holder record is padded to this (or to the file's size, if larger)."""
_HOLDER_MOST = 4 << 10
"""A lock file larger than this is not padded to its size (it is not gpufleet's record)."""
_OPEN = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


class UnsafePath(PermissionError):
    """gpufleet will not write there; ``str()`` is one line naming the path and the reason."""

    def __init__(self, path: str | Path, problem: str) -> None:
        super().__init__(errno.EPERM, problem, str(path))
        self.path = Path(path)
        """The file or directory refused."""
        self.problem = problem
        """Why, in words (without the path)."""

    def __str__(self) -> str:
        return f"{self.path}: {self.problem}"


class WriteFailed(OSError):
    """A write of ``path`` failed; ``str()`` is one line in the operator's words
    (``write_problem``: 'no space left on /data/out/shard-000003.jsonl')."""

    def __init__(self, path: str | Path, cause: OSError) -> None:
        super().__init__(cause.errno, write_problem(path, cause), str(path))
        self.path = Path(path)
        """The file that could not be written."""
        self.cause = cause
        """The error the system gave."""

    def __str__(self) -> str:
        return str(self.strerror)


@contextlib.contextmanager
def writing(path: str | Path) -> Iterator[None]:
    """Turn a failed write inside the block into ``WriteFailed`` naming ``path`` (a
    ``WriteFailed`` raised deeper, naming its own file, passes through)."""
    try:
        yield
    except WriteFailed:
        raise
    except OSError as exc:
        raise WriteFailed(path, exc) from exc


def _directories(directory: str | Path) -> list[str]:
    """``directory`` and every directory above it, as written and as resolved (a link's
    target is where the files land; the link itself lives in the directory written)."""
    seen: list[str] = []
    for start in (os.path.abspath(directory), os.path.realpath(directory)):
        here = start
        while True:
            if here not in seen:
                seen.append(here)
            parent = os.path.dirname(here)
            if parent == here:
                break
            here = parent
    return seen


def _trusted(path: str, st: os.stat_result) -> str | None:
    """Why ``st`` (a directory) lets another user swap gpufleet's files, or None."""
    me = os.geteuid()
    if st.st_uid not in (me, 0):
        return f"is owned by uid {st.st_uid}, not by this user (uid {me}) or root"
    if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
        who = (
            "group and others"
            if st.st_mode & 0o022 == 0o022
            else ("its group" if st.st_mode & 0o020 else "others")
        )
        return f"is writable by {who} (mode {stat.S_IMODE(st.st_mode):04o}, not sticky)"
    return None


_TRUSTED: set[str] = set()
"""Directories found trusted by this process, with every directory above them. Kept: once they
are, only this user or root could make them otherwise (an attacker would need to own or write
one of them already), so a write every second (the status document) walks them once."""
_TRUSTED_MOST = 4096


def check_dir(directory: str | Path) -> None:
    """Refuse a directory where another user could put a link in gpufleet's way.

    Directories that do not exist yet are skipped (``make_dir`` creates them, as this user).

    Raises:
        UnsafePath: it, or a directory above it, is owned by another user (not root) or is
            writable by group or others without the sticky bit; or it is not a directory.
    """
    key = os.path.abspath(directory)
    if key in _TRUSTED:
        return
    complete = True
    for path in _directories(directory):
        try:
            st = os.stat(path)
        except FileNotFoundError:
            complete = False  # made later: checked again then
            continue
        except OSError as exc:
            raise UnsafePath(path, f"cannot be checked ({exc.strerror or exc})") from None
        if not stat.S_ISDIR(st.st_mode):
            raise UnsafePath(path, "is not a directory")
        problem = _trusted(path, st)
        if problem is not None:
            raise UnsafePath(
                path,
                f"{problem}: another user could swap the files gpufleet writes there; refused "
                "(write elsewhere, or make it the user's own and not group/world-writable)",
            )
    if complete and len(_TRUSTED) < _TRUSTED_MOST:
        _TRUSTED.add(key)


def make_dir(directory: str | Path, mode: int = 0o755) -> Path:
    """Create ``directory`` (and missing parents, ``mode`` less the umask), then ``check_dir``.

    Returns:
        The directory.

    Raises:
        UnsafePath: see ``check_dir``.
        OSError: it cannot be created.
    """
    path = Path(directory)
    check_dir(path)  # before: a link among the missing parents' ancestors is not made through
    path.mkdir(mode=mode, parents=True, exist_ok=True)
    check_dir(path)
    return path


def _checked(fd: int, path: str | Path) -> int:
    """``fd`` if it is a regular file of this user with one link; else closed and refused."""
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafePath(path, f"is {kind_of(st.st_mode)}, not a regular file: refused")
        if st.st_uid != os.geteuid():
            raise UnsafePath(path, f"is owned by uid {st.st_uid}, not by this user: refused")
        if st.st_nlink != 1:
            raise UnsafePath(path, f"has {st.st_nlink} hard links: refused")
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open(path: str | Path, flags: int, mode: int) -> int:
    try:
        return os.open(path, flags | _OPEN, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafePath(
                path, "is a symbolic link: gpufleet never writes through one"
            ) from None
        raise


def create_new(path: str | Path, mode: int = 0o600) -> int:
    """Create ``path`` for writing; it must not exist (``O_EXCL``: a link or a file put there
    first is refused). Returns the descriptor (blocking writes are plain on a regular file).

    Raises:
        UnsafePath: the directory is refused (``check_dir``).
        FileExistsError: something is already there.
    """
    check_dir(Path(path).parent)
    return _open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)


def open_writable(
    path: str | Path, *, create: bool = True, append: bool = False, mode: int = 0o600
) -> int:
    """Open ``path`` to read and write (``append``: every write lands at the end), creating it
    if ``create``; an existing file must be a regular file of this user with one link.

    Raises:
        UnsafePath: the directory or the file is refused.
        FileNotFoundError: it does not exist and ``create`` is False.
    """
    check_dir(Path(path).parent)
    flags = os.O_RDWR | (os.O_CREAT if create else 0) | (os.O_APPEND if append else 0)
    return _checked(_open(path, flags, mode), path)


def open_log(path: str | Path, mode: int = 0o600) -> int:
    """A log to append to (a detached job's stdout and stderr), created if missing."""
    return open_writable(path, append=True, mode=mode)


def open_lock(path: str | Path, mode: int = 0o600) -> int:
    """A lock file, created if missing, never truncated (``write_holder`` writes over it)."""
    return open_writable(path, mode=mode)


def write_holder(fd: int, record: bytes) -> None:
    """Write a lock's holder record at its start, padded with spaces to the file's length:
    the lock file is never truncated, and what an earlier holder wrote is wholly covered.

    A reader strips the spaces; blank means "nobody".
    """
    size = os.fstat(fd).st_size
    width = max(HOLDER_BYTES, size if size <= _HOLDER_MOST else 0, len(record))
    os.pwrite(fd, record.ljust(width, b" "), 0)


def clear_holder(fd: int) -> None:
    """Blank a lock's holder record (released: nobody holds it)."""
    write_holder(fd, b"")


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of ``data`` (a short write is continued; zero progress is an error)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if written <= 0:
            raise OSError(errno.EIO, "the write made no progress")
        view = view[written:]


def append_record(fd: int, data: bytes) -> None:
    """Append ``data`` whole or not at all: a write cut short (the disk filled up midway) is
    cut back off, so the file never ends in half a record.

    Raises:
        OSError: the write failed (the file is as it was).
    """
    before = os.lseek(fd, 0, os.SEEK_END)
    try:
        write_all(fd, data)
    except OSError:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, before)
        raise


def fsync_dir(directory: str | Path) -> None:
    """fsync a directory so a new or renamed entry in it survives a power loss."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def replace_file(path: str | Path, data: bytes, mode: int = 0o600, durable: bool = True) -> None:
    """Replace ``path`` with ``data`` atomically: a temporary file created ``O_EXCL`` beside it,
    written, renamed over it (``durable``: the file fsynced before, the directory after, so it
    survives a power loss). A reader sees the old document or the new one, never half of one; a
    link in its place is replaced, never written through.

    Raises:
        UnsafePath: the directory is refused (``check_dir``).
        OSError: it cannot be written (nothing is left behind; the old document stays).
    """
    target = Path(path)
    check_dir(target.parent)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        try:
            write_all(fd, data)
            if mode != 0o600:
                os.fchmod(fd, mode)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if durable:
        fsync_dir(target.parent)


def check_space(directory: str | Path, need: int) -> None:
    """Make sure ``need`` bytes can still be written in ``directory`` (reserved, then let go).

    Raises:
        OSError: there is no room (``ENOSPC``, a quota, the file size limit), or the directory
            cannot take a file at all.
    """
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".gpufleet-space.")
    try:
        os.posix_fallocate(fd, 0, max(1, need))
    finally:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def is_full(exc: BaseException) -> bool:
    """Whether ``exc`` is a write that failed for want of room."""
    return isinstance(exc, OSError) and exc.errno in FULL_ERRNOS


_FULL_WORDS = {
    errno.ENOSPC: "no space left",
    errno.EDQUOT: "disk quota exceeded",
    errno.EFBIG: "file size limit reached",
}


def write_reason(exc: OSError) -> str:
    """Why a write failed, without the path: 'no space left on the device', 'disk quota
    exceeded', 'file size limit reached', an ``UnsafePath``'s problem, else the OS's words."""
    if isinstance(exc, UnsafePath):
        return exc.problem
    if exc.errno == errno.ENOSPC:
        return "no space left on the device"
    return _FULL_WORDS.get(exc.errno or 0) or exc.strerror or str(exc)


def write_problem(path: str | Path, exc: OSError) -> str:
    """What a failed write of ``path`` means, in one line.

    'no space left on /data/out/shard-000003.jsonl', 'disk quota exceeded on ...', 'file size
    limit reached on ...', an ``UnsafePath``'s line, else 'cannot write PATH (reason)'.
    """
    if isinstance(exc, UnsafePath):
        return str(exc)
    if exc.errno in _FULL_WORDS:
        return f"{_FULL_WORDS[exc.errno]} on {path}"
    return f"cannot write {path} ({exc.strerror or exc})"

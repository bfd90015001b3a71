"""gpufleet's state directory is its user's alone: 0700, and every file in it 0600.

What the state holds decides which processes gpufleet signals (server identities), what the
pipeline sends work to (cordons) and who may call the agent (its token); its lock files decide
whether an operation can run at all. Another user who can open them can wedge the fleet (hold a
lock) or read the token. So the directory is made 0700 and each file 0600 (``mkstemp`` and
``os.open(..., 0o600)`` everywhere), and a directory found looser (made by an older version, or
by hand) is tightened on first use, with one line on stderr saying so.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
import threading
from pathlib import Path

from tui.outputs import check_dir

_CHECKED: set[str] = set()
"""Directories already made private by this process (each is checked once)."""
_GUARD = threading.Lock()


def _notice(line: str) -> None:
    with contextlib.suppress(OSError):
        print(f"gpufleet: {line}", file=sys.stderr, flush=True)


def ensure_private_dir(directory: Path) -> None:
    """Make ``directory`` (and missing parents) exist, 0700, with its files 0600.

    Checked once per process. A file of another owner is left as it is (only its owner may
    change it), and so is anything that is not a regular file.

    Raises:
        UnsafePath: the directory, or one above it, is another user's or writable by others
            (``tui.outputs.check_dir``): gpufleet keeps no state where it could be swapped.
    """
    key = os.path.abspath(directory)
    with _GUARD:
        if key in _CHECKED:
            return
    check_dir(os.path.dirname(key))  # the parents, before anything is made in them
    if not os.path.isdir(key):
        Path(key).mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        st = os.stat(key)
    except OSError:
        return
    loose = stat.S_IMODE(st.st_mode) & 0o077
    if st.st_uid == os.geteuid() and loose:
        with contextlib.suppress(OSError):
            os.chmod(key, 0o700)
    # Inside a 0700 directory a looser file reaches nobody else: tightened without a word.
    tightened = _tighten_files(key)
    if st.st_uid == os.geteuid() and loose:
        files = f" and {tightened} file(s) in it 0600" if tightened else ""
        _notice(
            f"{key} was {stat.S_IMODE(st.st_mode):04o}: made 0700{files} (other users could "
            "read the fleet's state and hold its locks)"
        )
    check_dir(key)
    with _GUARD:
        _CHECKED.add(key)


def _tighten_files(directory: str) -> int:
    count = 0
    with contextlib.suppress(OSError), os.scandir(directory) as entries:
        for entry in entries:
            if not entry.is_file(follow_symlinks=False):
                continue
            with contextlib.suppress(OSError):
                # Opened, not chmod-ed by name: a symlink swapped in meanwhile is not followed.
                fd = os.open(entry.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
                try:
                    st = os.fstat(fd)
                    loose = stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) & 0o077
                    if loose and st.st_uid == os.geteuid():
                        os.fchmod(fd, 0o600)
                        count += 1
                finally:
                    os.close(fd)
    return count


def forget_checked() -> None:
    """Check every directory again on next use (tests that loosen one on purpose)."""
    with _GUARD:
        _CHECKED.clear()

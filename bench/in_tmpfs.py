"""Run a command with a small tmpfs on a directory, in a mount namespace of its own: a real full
disk for one test, seen by nobody else and gone when the command ends.

``unshare -m --propagation private -- python bench/in_tmpfs.py SIZE DIR COPY [--full] -- ARGV...``
(``wrapper`` builds that prefix; ``permitted`` says whether this user may mount one at all)
mounts a tmpfs of SIZE (e.g. ``300k``) on DIR (copying in what DIR held), with ``--full`` fills it
to the last byte (a file ``.filler``), runs ARGV to its end, copies what DIR holds to COPY
(outside the namespace the tmpfs cannot be seen) and exits with ARGV's status. The command
is started, not exec'd, so the copy is made however it ends; a signal meant for it is sent to
its pid (the status document names it), not to this wrapper.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path


@functools.cache
def permitted() -> bool:
    """Whether this user may mount a tmpfs in a mount namespace of its own (root, or a user
    namespace that allows it); tests and attack rows that need one are skipped otherwise."""
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return False
    with tempfile.TemporaryDirectory() as probe:
        argv = ["unshare", "-m", "--propagation", "private", "--"]
        argv += ["mount", "-t", "tmpfs", "-o", "size=4k", "tmpfs", probe]
        try:
            return subprocess.run(argv, capture_output=True, timeout=20).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            return False


def wrapper(size: str, directory: Path, copy: Path, *, full: bool = False) -> list[str]:
    """The argv prefix that runs a command (appended after it) with a ``size`` tmpfs on
    ``directory``, filled first when ``full``; its files come back in ``copy``."""
    argv = ["unshare", "-m", "--propagation", "private", "--", sys.executable, __file__]
    return [*argv, size, str(directory), str(copy), *(["--full"] if full else []), "--"]


def _fill(directory: str) -> None:
    """Write zeros into ``directory`` until the file system says it is full."""
    with open(os.path.join(directory, ".filler"), "wb", buffering=0) as filler:
        block = bytes(4096)
        while True:
            try:
                filler.write(block)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                block = block[: len(block) // 2]
                if not block:
                    return


def main(argv: list[str]) -> int:
    """Mount, run, copy out; returns the command's exit status."""
    size, directory, copy, *rest = argv
    full = rest[:1] == ["--full"]
    dash, *command = rest[1:] if full else rest
    if dash != "--" or not command:
        print("usage: in_tmpfs.py SIZE DIR COPY [--full] -- ARGV...", file=sys.stderr)
        return 2
    held = tempfile.mkdtemp()
    shutil.copytree(directory, held, dirs_exist_ok=True)  # what the test put there first
    mode = f"{os.stat(directory).st_mode & 0o7777:o}"
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode={mode}", "tmpfs", directory], check=True
    )
    shutil.copytree(held, directory, dirs_exist_ok=True)
    shutil.rmtree(held)
    if full:
        _fill(directory)
    try:
        return subprocess.run(command).returncode
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(directory, ".filler"))
        shutil.copytree(directory, copy, dirs_exist_ok=True)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

"""Run a command with a small tmpfs on a directory, in a mount namespace of its own: a real full
disk for one test, seen by nobody else and gone when the command ends.

``unshare -m --propagation private -- python tests/in_tmpfs.py SIZE DIR COPY [--full] -- ARGV...``
mounts a tmpfs of SIZE (e.g. ``300k``) on DIR (copying in what DIR held), with ``--full`` fills it
to the last byte (a file ``.filler``), runs ARGV to its end, copies what DIR holds to COPY
(outside the namespace the tmpfs cannot be seen) and exits with ARGV's status. The command
is started, not exec'd, so the copy is made however it ends; a signal meant for it is sent to
its pid (the status document names it), not to this wrapper.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
import sys
import tempfile


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

"""Locked, atomic JSON state files whose damage is reported, never read as "nothing there".

Every writer takes an exclusive ``fcntl`` lock on a side file (``<name>.lock``) for its whole
read-modify-write and replaces the document atomically (temporary file, fsync, rename), so
concurrent writers never lose each other's changes and a reader never sees half a file. A file
that exists but cannot be read as its document (truncated, garbage, wrong shape, not UTF-8,
nested too deep) raises ``StateFileError`` naming the file and the problem: state that is read
as empty would let servers run on unmanaged.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

MAX_STATE_BYTES = 16 << 20
"""A state file larger than this is damage (the fleet state of 16 GPUs is a few hundred KB)."""


class StateFileError(RuntimeError):
    """A state file exists but is not a valid document; the message names the file."""

    def __init__(self, path: Path, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        """The damaged file."""
        self.problem = problem
        """What is wrong with it, in words."""


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold the exclusive writer lock of ``path`` (a side file ``<name>.lock``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def read_document(path: Path, parse: Callable[[Any], T], missing: T) -> T:
    """Read and parse a JSON state document.

    Args:
        path: The file.
        parse: Turns the decoded JSON into the document; raises ValueError, TypeError or
            KeyError (with a message) when the shape is wrong.
        missing: What a file that does not exist means.

    Returns:
        The parsed document, or ``missing``.

    Raises:
        StateFileError: the file exists but cannot be read or is not a valid document.
    """
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_STATE_BYTES + 1)
    except FileNotFoundError:
        return missing
    except OSError as exc:
        raise StateFileError(path, f"cannot be read ({exc.strerror or exc})") from None
    if len(raw) > MAX_STATE_BYTES:
        raise StateFileError(path, f"is larger than {MAX_STATE_BYTES >> 20} MiB: not a state file")
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise StateFileError(path, "is not UTF-8 text (damaged)") from None
    except RecursionError:
        raise StateFileError(path, "is nested too deeply (damaged)") from None
    except ValueError as exc:
        what = "is empty" if not raw.strip() else f"is not valid JSON ({exc})"
        raise StateFileError(path, f"{what} (truncated or damaged)") from None
    try:
        return parse(data)
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
        raise StateFileError(path, f"has the wrong shape: {_reason(exc)}") from None


def _reason(exc: BaseException) -> str:
    if isinstance(exc, KeyError):
        return f"missing field {exc.args[0]!r}" if exc.args else "missing field"
    return str(exc) or type(exc).__name__


def write_document(path: Path, doc: Any) -> None:
    """Replace ``path`` with ``doc`` as JSON, atomically and durably (call it under ``locked``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump(doc, handle, indent=1, default=str)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def expect(condition: bool, what: str) -> None:
    """Raise ValueError(``what``) unless ``condition``: for ``parse`` functions' shape checks."""
    if not condition:
        raise ValueError(what)

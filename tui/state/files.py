"""Atomic JSON state files whose damage is reported, never read as "nothing there".

Every writer takes the file's writer lock (``tui.state.locks.locked``: an exclusive ``flock`` on a
side file ``<name>.lock``, with a deadline) for its whole read-modify-write and replaces the
document atomically through the one door for writes (``tui.outputs.replace_file``: a temporary
file 0600, fsync, rename; never through a link), so concurrent writers never lose each other's
changes and a reader never sees half a file. Reads go through the one door for files
(``tui.inputs``): a FIFO, a device or a directory in a state file's place is refused without
blocking, and at most ``MAX_STATE_BYTES`` are read. A file that exists but cannot be read as its
document (truncated, garbage, wrong shape, not UTF-8, NaN or 1e999, nested too deep, an unknown
version) raises ``StateFileError`` naming the file and the problem: state that is read as empty
would let servers run on unmanaged.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from tui.inputs import STATE_LIMIT, InputError, parse_json, read_bytes
from tui.outputs import check_space, replace_file, write_reason
from tui.state.private import ensure_private_dir

T = TypeVar("T")

MAX_STATE_BYTES = STATE_LIMIT
"""A state file larger than this is damage (the fleet state of 16 GPUs is a few hundred KB)."""
ROOM_BYTES = 1 << 20
"""What an operation may write into the state directory (the fleet state a few times over, the
cordons, its journal entry): checked free before it stops anything."""


class StateFileError(RuntimeError):
    """A state file exists but is not a valid document; the message names the file."""

    def __init__(self, path: Path, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        """The damaged file."""
        self.problem = problem
        """What is wrong with it, in words."""


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
        raw = read_bytes(path, MAX_STATE_BYTES, "a state file")
    except FileNotFoundError:
        return missing
    except InputError as exc:
        raise StateFileError(path, exc.problem) from None
    try:
        data = parse_json(raw, finite=False)
    except UnicodeDecodeError:
        raise StateFileError(path, "is not UTF-8 text (damaged)") from None
    except ValueError as exc:
        what = "is empty" if not raw.strip() else f"is not valid JSON ({exc})"
        raise StateFileError(path, f"{what} (truncated or damaged)") from None
    try:
        return parse(data)
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
        raise StateFileError(path, f"has the wrong shape: {_reason(exc)}") from None


def expect_version(doc: Any, versions: tuple[int, ...]) -> None:
    """Refuse a document whose ``version`` is not one of ``versions`` (a newer gpufleet's file,
    or damage): read as anything else, its servers would be left unmanaged.

    Raises:
        ValueError: naming the version found and the ones this gpufleet reads.
    """
    expect(isinstance(doc, dict), "the document is not an object")
    found = doc.get("version")
    if found not in versions or isinstance(found, bool):
        known = ", ".join(str(v) for v in versions)
        raise ValueError(f"version {found!r} is not one this gpufleet reads ({known})")


def _reason(exc: BaseException) -> str:
    if isinstance(exc, KeyError):
        return f"missing field {exc.args[0]!r}" if exc.args else "missing field"
    return str(exc) or type(exc).__name__


def write_document(path: Path, doc: Any) -> None:
    """Replace ``path`` with ``doc`` as JSON, atomically and durably (call it under ``locked``).

    Raises:
        StateFileError: it cannot be written (a full disk, a directory another user could
            write): one line naming the file and why; the old document stays whole.
    """
    data = json.dumps(doc, indent=1, default=str).encode()
    try:
        ensure_private_dir(path.parent)
        replace_file(path, data)
    except OSError as exc:
        raise StateFileError(path, f"cannot be written ({write_reason(exc)})") from None


def check_room(directory: Path, need: int = ROOM_BYTES) -> None:
    """Refuse now, before anything is stopped, a state directory that cannot take ``need`` more
    bytes (a full disk: a server stopped whose record then cannot be written is a server lost).

    Raises:
        StateFileError: naming the directory and why (one line).
    """
    try:
        ensure_private_dir(directory)
        check_space(directory, need)
    except OSError as exc:
        raise StateFileError(
            directory,
            f"has no room for the fleet's state ({write_reason(exc)}): refused before anything "
            "was stopped",
        ) from None


def expect(condition: bool, what: str) -> None:
    """Raise ValueError(``what``) unless ``condition``: for ``parse`` functions' shape checks."""
    if not condition:
        raise ValueError(what)

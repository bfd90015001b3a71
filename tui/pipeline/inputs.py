"""``gpufleet generate``'s inputs checked at start: URLs, the bucket, the output paths.

Each check raises :class:`InputError` with one line naming the option, the value and what is
allowed, so the command exits 2 before anything is launched or written, instead of failing with a
traceback (``--s3-endpoint-url "not a url"``), after a whole run (an invalid bucket name read as
"S3 unreachable"), or once a second forever (a status path under ``/proc``).
"""

from __future__ import annotations

import ipaddress
import os
import re
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

from tui.outputs import UnsafePath, make_dir

_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class InputError(ValueError):
    """A command-line input that cannot be used (the message names it)."""


def http_url(field: str, text: str) -> str:
    """Check an ``http://`` or ``https://`` base URL with a host (and a valid port, if any).

    Args:
        field: the option, e.g. ``--server``.
        text: its value.

    Returns:
        The URL without a trailing slash.

    Raises:
        InputError: naming the option and the value.
    """
    allowed = "must be an http:// or https:// URL with a host, e.g. http://127.0.0.1:30000"
    if _CONTROL.search(text) or " " in text:
        raise InputError(f"{field}={text!r}: {allowed}")
    try:
        parts = urlsplit(text)
        port = parts.port  # raises ValueError when out of range or not a number
    except ValueError as exc:
        raise InputError(f"{field}={text!r}: {allowed} ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError(f"{field}={text!r}: {allowed}")
    if port == 0 or parts.query or parts.fragment or parts.username or parts.password:
        raise InputError(f"{field}={text!r}: {allowed}, without credentials, query or fragment")
    return text.rstrip("/")


def bucket_name(text: str) -> str:
    """Check an S3 bucket name (AWS's rules for new buckets).

    Raises:
        InputError: naming ``--s3-bucket``, the value and the rules.
    """
    ok = bool(_BUCKET.match(text)) and ".." not in text and ".-" not in text and "-." not in text
    try:
        ipaddress.ip_address(text)
        ok = False
    except ValueError:
        pass
    if not ok:
        raise InputError(
            f"--s3-bucket={text!r}: not a bucket name: 3-63 lowercase letters, digits, '.' and "
            "'-', starting and ending with a letter or digit, not an IP address"
        )
    return text


def key_prefix(text: str) -> str:
    """Check an S3 key prefix (printable, at most 512 characters).

    Raises:
        InputError: naming ``--s3-prefix``.
    """
    if len(text) > 512 or _CONTROL.search(text):
        raise InputError(f"--s3-prefix={text[:60]!r}: must be at most 512 printable characters")
    return text


def text_value(field: str, text: str, limit: int = 256) -> str:
    """Check a short free-text option (non-empty, printable, at most ``limit`` characters)."""
    if not text or len(text) > limit or _CONTROL.search(text):
        raise InputError(f"{field}={text[:60]!r}: must be 1-{limit} printable characters")
    return text


def _reason(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def output_dir(path: Path) -> Path:
    """Create the output directory if needed and check that files can be created in it, and
    that nobody else can swap them (``tui.outputs.check_dir``).

    Raises:
        InputError: it is not a directory, cannot be created or written, or another user could
            write it (naming ``--out``).
    """
    if path.exists() and not path.is_dir():
        raise InputError(f"--out={path}: exists and is not a directory")
    try:
        make_dir(path)
    except UnsafePath as exc:
        raise InputError(f"--out={path}: {_where(path, exc)}") from None
    except OSError as exc:
        raise InputError(f"--out={path}: cannot create it ({_reason(exc)})") from None
    writable_dir("--out", path)
    return path


def _where(path: Path, exc: UnsafePath) -> str:
    """An ``UnsafePath``'s words, naming the directory refused when it is not ``path``."""
    return exc.problem if exc.path == path else str(exc)


def writable_dir(field: str, directory: Path) -> None:
    """Check that a file can be created (and removed) in ``directory``.

    Raises:
        InputError: naming ``field``.
    """
    try:
        fd, probe = tempfile.mkstemp(dir=directory, prefix=".gpufleet-probe.")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise InputError(f"{field}={directory}: cannot write in it ({_reason(exc)})") from None


def output_file(field: str, path: Path) -> Path:
    """Check a file the run will (re)write: not a directory or a device, its directory writable.

    A missing directory is created (the writer would create it anyway); when it cannot be,
    nothing is left behind.

    Raises:
        InputError: naming ``field``.
    """
    try:
        if path.is_dir():
            raise InputError(f"{field}={path}: is a directory, not a file")
        if os.path.islink(path):
            raise InputError(
                f"{field}={path}: is a symbolic link: gpufleet never writes through one"
            )
        if path.exists() and not path.is_file():
            raise InputError(f"{field}={path}: exists and is not a regular file")
        missing = [d for d in (path.parent, *path.parent.parents) if not d.exists()]
    except OSError as exc:
        raise InputError(f"{field}={path}: cannot be checked ({_reason(exc)})") from None
    try:
        make_dir(path.parent)
        writable_dir(field, path.parent)
    except UnsafePath as exc:
        _remove(missing)
        raise InputError(f"{field}={path}: {_where(path.parent, exc)}") from None
    except OSError as exc:
        _remove(missing)
        raise InputError(f"{field}={path}: cannot create its directory ({_reason(exc)})") from None
    except InputError:
        _remove(missing)
        raise
    return path


def _remove(created: list[Path]) -> None:
    """Remove directories this check created (deepest first), if they are still empty."""
    for directory in created:
        try:
            directory.rmdir()
        except OSError:
            return

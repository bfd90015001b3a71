"""Every file gpufleet reads that someone else may have put there goes through this one door.

A path the operator names (a token, a fleet file, a profile, a status document, a settings or
config file) or a file another process writes (the fleet state, the cordons, the journal) may
turn out to be a FIFO (``open`` blocks until a writer comes: for ever), a device (``/dev/zero``
never ends), a directory, or a file of gigabytes. So every read here:

1. opens with ``O_NONBLOCK`` (a FIFO's open returns at once instead of waiting for a writer);
2. checks with ``fstat`` on the descriptor it opened (not a racy ``stat`` of the path) that it
   is a regular file, else refuses naming what it is;
3. reads at most the bound stated for its kind (``*_LIMIT`` below) and refuses a larger file.

Every refusal is an ``InputError`` whose message is one line naming the file. Logs, which are
followed and streamed rather than read whole, get ``open_stream``: the same checks, no bound.
JSON and TOML are parsed strictly (``parse_json``, ``parse_toml``): no NaN or infinite numbers,
no nesting deeper than ``MAX_DEPTH``.
"""

from __future__ import annotations

import fcntl
import io
import json
import math
import os
import stat
import tomllib
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

TOKEN_LIMIT = 16 << 10
"""A token file: a few scoped lines of ~50 bytes each."""
CONFIG_LIMIT = 1 << 20
"""settings.toml, a fleet file (``console --fleet``), an autotune ``--config``."""
PROFILE_LIMIT = 1 << 20
"""A tuning profile (a real one is a few KB)."""
STATUS_LIMIT = 4 << 20
"""The pipeline's status document (a few KB; its server table grows with the fleet)."""
STATE_LIMIT = 16 << 20
"""A state file of gpufleet's own (fleet state, cordons, pid files; a few hundred KB at most)."""
JOURNAL_LIMIT = 256 << 20
"""The journal, read whole by ``gpufleet journal`` and the console (a 41-hour job with an
operation a minute writes ~10 MB)."""
HOLDER_LIMIT = 4 << 10
"""What a lock file says about its holder (one small JSON object)."""
JOB_RECORD_LIMIT = 2 << 30
"""A pipeline's own record in its output directory (its done record, its job index: 8 bytes a
prompt, so a 100-million-prompt job's index is 800 MB)."""
MODEL_META_LIMIT = 32 << 20
"""A model's ``config.json``, its safetensors index, a cache ref (an index of thousands of
tensors is a few MB)."""

MAX_DEPTH = 64
"""Deepest nesting of objects/arrays (tables/arrays) accepted in JSON or TOML read here: every
document gpufleet reads needs fewer than 8; 100,000 brackets would exhaust the parser's stack."""


class InputError(ValueError):
    """A file cannot be read as what it should be; the message names it, in one line."""

    def __init__(self, path: str | Path, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = Path(path)
        """The file."""
        self.problem = problem
        """What is wrong with it, in words (without the path)."""


def kind_of(mode: int) -> str:
    """What a non-regular file is, in words ('a FIFO', 'a device', 'a directory', ...)."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def open_regular(path: str | Path, what: str) -> int:
    """Open ``path`` for reading, without blocking, and make sure it is a regular file.

    Args:
        path: The file.
        what: What it should be, for the error ('a token file', 'a profile').

    Returns:
        The open descriptor (blocking mode restored; the caller closes it).

    Raises:
        FileNotFoundError: it does not exist (the caller decides what a missing file means).
        InputError: it cannot be opened, or is a FIFO, device, directory or socket.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise InputError(path, f"cannot be read ({exc.strerror or exc})") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise InputError(path, f"is {kind_of(mode)}, not {what}")
        # A regular file never blocks; clearing the flag keeps later reads plain.
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        fcntl.fcntl(fd, fcntl.F_SETFL, flags & ~os.O_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _size(limit: int) -> str:
    if limit >= 1 << 20 and limit % (1 << 20) == 0:
        return f"{limit >> 20} MiB"
    if limit >= 1 << 10 and limit % (1 << 10) == 0:
        return f"{limit >> 10} KiB"
    return f"{limit} bytes"


def read_bytes(path: str | Path, limit: int, what: str) -> bytes:
    """The whole of a regular file of at most ``limit`` bytes.

    Raises:
        FileNotFoundError: it does not exist.
        InputError: not a regular file, unreadable, or larger than ``limit``.
    """
    fd = open_regular(path, what)
    with os.fdopen(fd, "rb", buffering=0) as handle:
        try:
            raw = _read_upto(handle, os.fstat(fd).st_size, limit + 1)
        except OSError as exc:
            raise InputError(path, f"cannot be read ({exc.strerror or exc})") from None
    if len(raw) > limit:
        raise InputError(path, f"is larger than {_size(limit)}: not {what}")
    return raw


def read_tail(path: str | Path, limit: int, what: str) -> tuple[bytes, int]:
    """The newest whole lines of a regular file, at most ``limit`` bytes of them: all of it
    when it is no larger, else its last ``limit`` bytes from their first newline on (an
    append-only record grown past its bound is read by its end, never refused).

    Returns:
        (the bytes, the file's size): the caller says what was left unread.

    Raises:
        FileNotFoundError: it does not exist.
        InputError: not a regular file, or unreadable.
    """
    fd = open_regular(path, what)
    with os.fdopen(fd, "rb", buffering=0) as handle:
        try:
            size = os.fstat(fd).st_size
            if size <= limit:
                return _read_upto(handle, size, limit), size
            handle.seek(size - limit)
            raw = _read_upto(handle, limit, limit)
        except OSError as exc:
            raise InputError(path, f"cannot be read ({exc.strerror or exc})") from None
    cut = raw.find(b"\n")
    return (raw[cut + 1 :] if cut >= 0 else b""), size


def _read_upto(handle: io.RawIOBase, size: int, most: int) -> bytes:
    """At most ``most`` bytes of ``handle``, asking for what ``size`` (its fstat) says is there.

    Why not ``read(most)``: CPython allocates the whole ``most`` first and shrinks it after, so
    a 2 KB state file read once a second against a 16 MiB bound cost a 16 MiB allocation a
    second (an mmap and munmap, or worse, a malloc arena grown and fragmented by it: the
    console's RSS crept up by it over a long job). A file that grew since its ``fstat`` (or a
    ``/proc`` file, whose size reads 0) is read on in 64 KiB pieces up to ``most``.
    """
    chunks: list[bytes] = []
    total = 0
    want = min(most, size + 1)
    while total < most:
        chunk = handle.read(max(1, min(want, most - total)))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
        want = 64 << 10
    return b"".join(chunks)


def decode_utf8(path: str | Path, raw: bytes) -> str:
    """``raw`` as UTF-8 text.

    Raises:
        InputError: not UTF-8 (naming the first bad byte and its offset).
    """
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(
            path, f"is not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start})"
        ) from None


def read_text(path: str | Path, limit: int, what: str) -> str:
    """A regular file of at most ``limit`` bytes, as UTF-8 text.

    Raises:
        FileNotFoundError: it does not exist.
        InputError: not a regular file, unreadable, too large, or not UTF-8.
    """
    return decode_utf8(path, read_bytes(path, limit, what))


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is out of range for a number")
    return value


def too_deep(value: object, limit: int = MAX_DEPTH) -> bool:
    """Whether ``value`` (decoded JSON or TOML) nests dicts and lists deeper than ``limit``."""
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth >= limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def _within_depth(parse: Callable[[], Any], what: str) -> Any:
    """What ``parse`` returns, refused (``ValueError``) when it nests deeper than ``MAX_DEPTH``:
    both a parser that recursed too deep and a result that ``too_deep`` finds too deep; ``what``
    names what nests (with its trailing space) in the message."""
    try:
        data = parse()
    except RecursionError:
        raise ValueError(f"nests {what}deeper than {MAX_DEPTH} levels") from None
    if too_deep(data):
        raise ValueError(f"nests {what}deeper than {MAX_DEPTH} levels")
    return data


def parse_json(raw: bytes | str, *, finite: bool = True) -> Any:
    """Strict JSON: at most ``MAX_DEPTH`` deep and, with ``finite``, no NaN, Infinity or number
    too large for a float (``1e999``).

    Args:
        raw: The document.
        finite: Refuse non-finite numbers. gpufleet's own state documents are written by
            ``json.dump`` (which writes NaN as ``NaN``) and check their numbers field by field,
            so they pass False.

    Raises:
        ValueError: with the reason (``UnicodeDecodeError`` for bytes that are not UTF-8).
    """
    if finite:
        return _within_depth(
            lambda: json.loads(raw, parse_constant=_reject_constant, parse_float=_finite), ""
        )
    return _within_depth(lambda: json.loads(raw), "")


def parse_toml(text: str) -> dict[str, Any]:
    """TOML, at most ``MAX_DEPTH`` deep.

    Raises:
        ValueError: not TOML (``tomllib.TOMLDecodeError``), or nested too deeply.
    """
    data: dict[str, Any] = _within_depth(lambda: tomllib.loads(text), "tables or arrays ")
    return data


def read_json(path: str | Path, limit: int, what: str) -> Any:
    """A regular file of at most ``limit`` bytes of strict JSON (``parse_json``).

    Raises:
        FileNotFoundError: it does not exist.
        InputError: not a regular file, too large, not UTF-8, empty, not JSON, too deep.
    """
    raw = read_bytes(path, limit, what)
    try:
        return parse_json(raw)
    except UnicodeDecodeError as exc:
        raise InputError(
            path, f"is not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start})"
        ) from None
    except ValueError as exc:
        if not raw.strip():
            raise InputError(path, f"is empty: not {what}") from None
        raise InputError(path, f"is not valid JSON ({exc})") from None


def read_toml(path: str | Path, limit: int, what: str) -> dict[str, Any]:
    """A regular file of at most ``limit`` bytes of UTF-8 TOML (``parse_toml``).

    Raises:
        FileNotFoundError: it does not exist.
        InputError: not a regular file, too large, not UTF-8, not TOML, too deep.
    """
    text = read_text(path, limit, what)
    try:
        return parse_toml(text)
    except ValueError as exc:
        raise InputError(path, f"is not valid TOML ({exc})") from None


def settings_table(
    path: Path, name: str, allowed: Collection[str], error: type[ValueError]
) -> dict[str, Any] | None:
    """The ``[name]`` table of the operator's settings file, its keys checked.

    Args:
        path: The settings file (``tui.paths.settings_file()``).
        name: The table (``alerts``, ``energy``).
        allowed: The keys it may hold.
        error: Raised (one line naming the file and the key) when it cannot be used.

    Returns:
        The table (empty when the file has none); None when there is no settings file.
    """
    try:
        text = read_text(path, CONFIG_LIMIT, "a settings file")
    except FileNotFoundError:
        return None
    except InputError as problem:
        raise error(str(problem)) from None
    try:
        table = parse_toml(text).get(name, {})
    except ValueError as problem:
        raise error(f"{path}: not valid TOML ({problem})") from None
    if not isinstance(table, dict):
        raise error(f"{path}: {name} must be a table ([{name}])")
    unknown = sorted(set(table) - set(allowed))
    if unknown:
        raise error(f"{path}: {name}.{unknown[0]} is not a setting (allowed: {', '.join(allowed)})")
    return table


def open_stream(path: str | Path, what: str) -> io.BufferedReader:
    """A regular file opened for streaming (a log followed or parsed line by line): unbounded,
    but never a FIFO or device, whose reads may block for ever or never end.

    Raises:
        FileNotFoundError: it does not exist.
        InputError: not a regular file, or unreadable.
    """
    return os.fdopen(open_regular(path, what), "rb")


def check_readable(path: str | Path, what: str) -> None:
    """Refuse now what a later read would refuse: a path that exists but is not a regular file.

    A missing file passes (the command that reads it later says what missing means).

    Raises:
        InputError: it exists and is not a regular file, or cannot be opened.
    """
    try:
        os.close(open_regular(path, what))
    except FileNotFoundError:
        return

"""Cordons: servers closed to new work while an operation drains and stops them.

SGLang 0.5.23 drains on SIGTERM to its main pid, but a draining server still accepts
``/generate`` (only ``/health``, ``/health_generate`` and ``/ready`` answer 503), and its drain
ends only when no request is left at one of its 5 s checks (``tokenizer_manager.py``,
``sigterm_watchdog``). So whoever sends work must stop sending to a server *before* it is told to
drain, or the drain never ends. The operations core writes a cordon here before it signals a
server; the pipeline's dispatcher reads it before it picks a server and sends that server
nothing new (its in-flight requests finish normally). The cordon is lifted when the relaunched
server is ready, or when the stop is over.

One small JSON document (``tui.paths.cordon_file()``)::

    {"version": 1, "cordons": {"127.0.0.1:30003": {"since": 1733.2, "reason": "relaunch GPU 3"}}}

Keys are ``host:port`` with loopback spellings folded to ``127.0.0.1`` (``address_of``), so a
pipeline that was given ``http://localhost:30003`` honours a cordon of ``0.0.0.0:30003``.
Writers take the state files' lock for the read-modify-write and replace the file atomically
(``tui.state.files``);
``CordonWatch`` re-reads it only when its stat changes, so a reader may check it before every
dispatch.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tui.paths import cordon_file
from tui.state.files import (
    StateFileError,
    expect,
    expect_version,
    read_document,
    write_document,
)
from tui.state.locks import locked

VERSION = 1

_LOOPBACK = {"localhost", "127.0.0.1", "0.0.0.0", "::1", "::", "[::1]", "[::]", ""}
"""Host spellings that all mean "this machine" for a cordon's purpose."""


@dataclass(frozen=True, slots=True)
class Cordon:
    """One server closed to new work."""

    address: str
    """``host:port`` (loopback folded to 127.0.0.1)."""
    since: float
    """``time.time()`` when it was cordoned."""
    reason: str
    """Why, in plain words (e.g. 'relaunch GPU 3')."""


def address_of(target: str, port: int | None = None) -> str:
    """The cordon key of a server: ``host:port`` with loopback names folded.

    Args:
        target: A URL (``http://localhost:30003``), ``host:port``, or a bare host when
            ``port`` is given.
        port: The port, when ``target`` is a bare host.

    Returns:
        e.g. ``127.0.0.1:30003``.

    Raises:
        ValueError: no port can be found.
    """
    if port is None:
        parts = urlsplit(target if "//" in target else f"//{target}")
        host = parts.hostname or ""
        if parts.port is None:
            raise ValueError(f"cordon: {target!r} names no port")
        port = parts.port
    else:
        host = target
    host = "127.0.0.1" if host.lower() in _LOOPBACK else host.lower()
    return f"{host}:{port}"


def _since(value: Any, key: str) -> float:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    expect(ok, f"cordons.{key}.since is not a time")
    return float(value)


def _parse(doc: Any) -> dict[str, Cordon]:
    expect_version(doc, (VERSION,))
    expect(isinstance(doc.get("cordons"), dict), "no 'cordons' object")
    out = {}
    for key, value in doc["cordons"].items():
        expect(isinstance(value, dict), f"cordons.{key} is not an object")
        out[str(key)] = Cordon(str(key), _since(value["since"], key), str(value.get("reason", "")))
    return out


def read_cordons(path: Path | None = None) -> dict[str, Cordon]:
    """Every cordon, by address (empty when the file does not exist).

    Raises:
        StateFileError: the file exists but is damaged (never read as "no cordons").
    """
    return read_document(path or cordon_file(), _parse, {})


def _write(path: Path, cordons: dict[str, Cordon]) -> None:
    write_document(
        path,
        {
            "version": VERSION,
            "cordons": {
                c.address: {"since": c.since, "reason": c.reason}
                for c in sorted(cordons.values(), key=lambda c: c.address)
            },
        },
    )


def _current(path: Path) -> dict[str, Cordon]:
    # A damaged file is replaced by the writer: the operation that cordons must not be blocked
    # by it, and what it held (stale cordons) is re-asserted by the operations still running.
    try:
        return read_cordons(path)
    except StateFileError:
        return {}


def cordon(addresses: Iterable[str], reason: str, path: Path | None = None) -> None:
    """Close ``addresses`` (``address_of`` keys) to new work."""
    target = path or cordon_file()
    with locked(target):
        cordons = _current(target)
        now = time.time()
        for address in addresses:
            cordons[address] = Cordon(address, now, reason)
        _write(target, cordons)


def uncordon(addresses: Iterable[str], path: Path | None = None) -> None:
    """Open ``addresses`` to new work again (those not cordoned are ignored)."""
    target = path or cordon_file()
    wanted = set(addresses)
    with locked(target):
        cordons = _current(target)
        if not wanted & cordons.keys():
            return
        _write(target, {k: v for k, v in cordons.items() if k not in wanted})


class CordonWatch:
    """The cordoned addresses, re-read only when the file's stat changes (cheap per dispatch).

    A damaged file keeps the last good set and reports the error once through ``error``.

    Args:
        path: The cordon file (default ``tui.paths.cordon_file()``).
    """

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or cordon_file()
        self._stamp: tuple[int, int, int] | None = None
        self._addresses: frozenset[str] = frozenset()
        self.error: str | None = None
        """The last read error (None when the file read cleanly)."""

    def current(self) -> frozenset[str]:
        """Addresses closed to new work now."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self._stamp, self._addresses, self.error = None, frozenset(), None
            return self._addresses
        except OSError as exc:
            self.error = f"{self.path}: cannot stat: {exc.strerror or exc}"
            return self._addresses
        stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        if stamp != self._stamp:
            try:
                self._addresses = frozenset(read_cordons(self.path))
                self.error = None
            except StateFileError as exc:
                self.error = str(exc)
            self._stamp = stamp
        return self._addresses

    def is_cordoned(self, address: str) -> bool:
        """Whether ``address`` (an ``address_of`` key) is closed to new work."""
        return address in self.current()

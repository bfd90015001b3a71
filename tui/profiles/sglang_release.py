"""Which SGLang release judges a profile's flags: ``engine.sglang_version``, or ``auto`` resolved.

``engine.sglang_version`` names a release gpufleet ships a flag table for (0.5.17 to 0.5.23), or
``auto``; absent, it is the newest (``PINNED_VERSION``). ``auto`` is resolved each time the
profile is validated (``gpufleet profile validate``, the tuning form, ``apply --preflight-only``
and every launch path go through ``tui.profiles.flag_check``), in this order:

1. ``engine.python`` itself, the interpreter the servers will be launched with, in the
   environment they get (the profile's ``[env]``: a ``PYTHONPATH`` there counts): it reads the
   ``sglang/_version.py`` that ``sglang.__version__`` comes from, found the way ``import sglang``
   would find it but without running SGLang's ``__init__`` (which imports PyTorch: seconds), and
   imports ``sglang`` only when there is no such file. An argv list, a bounded time.
2. Where that fails (no such interpreter here, no SGLang in it): the ``version`` field of a
   running server's ``/server_info`` (``tui.servers.payloads.parse_server_info``, as the monitor
   reads it), on the profile's own host and ports.

The launch runs what ``engine.python`` has, so that comes first; a running server only tells
what ran last. A release gpufleet has no table for, or no answer at all, is a ``ReleaseError``:
one line, naming what was tried and the releases known.

The answer of ``engine.python`` is remembered per (python, the profile's ``[env]``), a running
server's per (host, ports): the tuning form validates on the console's event loop at every
keystroke. Past ``REMEMBER_S`` the remembered answer is still given at once while a background
thread asks again (an upgrade shows within a probe's time), so only the first question for a
pair ever waits, and that wait is bounded (``PROBE_TIMEOUT_S``, ``SERVER_INFO_BUDGET_S``).
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

import httpx

from tui.profiles.model import Profile
from tui.servers.payloads import parse_server_info
from tui.servers.probe import SERVER_INFO_PATHS
from tui.sglang.flagtable.table import PINNED_VERSION, known_versions

AUTO_RELEASE = "auto"
"""``engine.sglang_version = "auto"``: the release engine.python (or a running server) has."""

PROBE_TIMEOUT_S = 30.0
"""Limit for ``engine.python``'s answer (the fallback ``import sglang`` imports PyTorch)."""

SERVER_INFO_TIMEOUT_S = 2.0
"""Limit for each ``/server_info`` read (it goes through the scheduler)."""

SERVER_INFO_BUDGET_S = 5.0
"""Limit for all the ``/server_info`` reads of one resolution (a hung fleet)."""

REMEMBER_S = 30.0
"""How long a resolution (or its failure) is reused before it is asked again (in the
background: the remembered answer is given meanwhile)."""

PROBE = """\
import importlib.util, os, sys
spec = importlib.util.find_spec("sglang")
if spec is None:
    sys.exit("No module named 'sglang'")
read = getattr(spec.loader, "get_data", None)
for where in spec.submodule_search_locations or ():
    try:
        source = read(os.path.join(where, "_version.py"))
    except (OSError, TypeError):
        continue
    scope = {}
    exec(compile(source, "sglang/_version.py", "exec"), scope)
    print(scope["__version__"])
    break
else:
    import sglang
    print(sglang.__version__)
"""
"""What ``engine.python -c`` runs: ``sglang.__version__`` without SGLang's ``__init__`` (a
wheel, a ``pip --target`` directory or a zip on ``PYTHONPATH`` alike), else by importing it."""


class ReleaseError(ValueError):
    """``auto`` could not be resolved to a release gpufleet knows (the message is one line)."""


def _known() -> str:
    return ", ".join(known_versions())


def _one_line(text: str, limit: int = 160) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    return last if len(last) <= limit else last[: limit - 3] + "..."


def installed_release(
    python: str, env: Mapping[str, str] | None = None, timeout_s: float = PROBE_TIMEOUT_S
) -> str:
    """The SGLang version ``python`` imports (``PROBE``), whether gpufleet knows it or not.

    Args:
        python: an interpreter, by name on ``PATH`` or by path.
        env: its whole environment (default: this process's).
        timeout_s: limit for its answer; it is killed past it.

    Returns:
        The version string it printed, e.g. ``"0.5.17"``.

    Raises:
        ReleaseError: it could not run, failed (its last line quoted), gave nothing or timed out.
    """
    try:
        done = subprocess.run(
            [python, "-c", PROBE],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=dict(os.environ if env is None else env),
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise ReleaseError(f"{python} gave no SGLang version within {timeout_s:g} s") from None
    except OSError as exc:
        raise ReleaseError(f"{python} could not be run ({exc.strerror or exc})") from None
    if done.returncode != 0:
        why = _one_line(done.stderr) or f"exit status {done.returncode}"
        raise ReleaseError(f"{python} could not read SGLang's version ({why})")
    version = _one_line(done.stdout)
    if not version:
        raise ReleaseError(f"{python} printed no SGLang version")
    return version


def served_release(
    host: str, ports: Sequence[int], budget_s: float = SERVER_INFO_BUDGET_S
) -> tuple[int, str] | None:
    """The first running server's SGLang version, from its ``/server_info`` ``version``.

    Args:
        host: the servers' address (a bind-all address is read on loopback).
        ports: their ports, tried in order.
        budget_s: limit for all the reads together.

    Returns:
        (port, version) of the first server that reports one, or None.
    """
    address = "127.0.0.1" if host in ("0.0.0.0", "", "::") else host
    deadline = time.monotonic() + budget_s
    with httpx.Client(timeout=SERVER_INFO_TIMEOUT_S) as client:
        for port in ports:
            for path in SERVER_INFO_PATHS:
                if time.monotonic() >= deadline:
                    return None
                try:
                    reply = client.get(f"http://{address}:{port}{path}")
                except httpx.HTTPError:
                    break  # nothing there (or hung): the next server
                if reply.status_code == 404:
                    continue  # the older spelling
                if reply.status_code != 200:
                    break
                try:
                    version = parse_server_info(reply.json()).version
                except ValueError:
                    break
                if version:
                    return port, version
                break
    return None


@dataclass(frozen=True, slots=True)
class Release:
    """The SGLang release a profile targets, and how gpufleet knows it."""

    version: str
    """The release, e.g. ``"0.5.17"``."""
    source: str
    """Where it came from: ``auto: /opt/sglang/bin/python``, ``auto: the server on port
    30000``, ``engine.sglang_version``, ``engine.sglang_version unset: the newest``, or
    ``the simulator's`` (a simulator profile's unset or ``auto``)."""

    def describe(self) -> str:
        """``SGLang 0.5.17 (auto: /opt/sglang/bin/python)``."""
        return f"SGLang {self.version} ({self.source})"


_Outcome = TypeVar("_Outcome")


class _Memo(Generic[_Outcome]):
    """Answers remembered per key. Past ``REMEMBER_S`` the remembered answer is still given at
    once while one background thread asks again: the tuning form validates on the console's
    event loop at every keystroke, and a probe takes 50 ms to seconds (30 at most) that the
    form must not freeze for. Only a key never asked before waits for its answer."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._lock = threading.Lock()
        self._seen: dict[Hashable, tuple[float, _Outcome]] = {}
        self._asking: set[Hashable] = set()
        self._generation = 0

    def get(self, key: Hashable, ask: Callable[[], _Outcome]) -> _Outcome:
        with self._lock:
            seen = self._seen.get(key)
            if seen is None:  # the first time: asked here, under the lock (asked once)
                seen = (time.monotonic(), ask())
                self._seen[key] = seen
            elif time.monotonic() - seen[0] >= REMEMBER_S and key not in self._asking:
                self._asking.add(key)
                threading.Thread(
                    target=self._refresh,
                    args=(key, ask, self._generation),
                    name=f"gpufleet-{self._name}",
                    daemon=True,
                ).start()
            return seen[1]

    def _refresh(self, key: Hashable, ask: Callable[[], _Outcome], generation: int) -> None:
        try:
            outcome = ask()
        except Exception:  # never expected (each ask returns its failure): ask again later
            with self._lock:
                self._asking.discard(key)
            raise
        with self._lock:
            self._asking.discard(key)
            if generation == self._generation:  # not forgotten meanwhile
                self._seen[key] = (time.monotonic(), outcome)

    def forget(self) -> None:
        with self._lock:
            self._seen.clear()
            self._asking.clear()
            self._generation += 1


def _ask_installed(python: str, env: tuple[tuple[str, str], ...]) -> str | ReleaseError:
    try:
        return installed_release(python, dict(os.environ) | dict(env))
    except ReleaseError as exc:
        return exc


_installed: _Memo[str | ReleaseError] = _Memo("sglang-version")
"""``engine.python``'s release per (python, the profile's ``[env]``)."""
_served: _Memo[tuple[int, str] | None] = _Memo("server-version")
"""A running server's release per (host, ports)."""


def _resolve(profile: Profile) -> Release:
    python, env = profile.engine.python, profile.env
    found = _installed.get((python, env), lambda: _ask_installed(python, env))
    if not isinstance(found, ReleaseError):
        source = f"{python} has SGLang {found}"
        release = Release(found, f"auto: {python}")
    else:
        host, ports = profile.host, profile.ports
        served = _served.get((host, ports), lambda: served_release(host, ports))
        if served is None:
            listed = ", ".join(map(str, ports))
            raise ReleaseError(
                f"{found}, and no server on {host} port(s) {listed} reports one on "
                f"/server_info; set it to one of {_known()}"
            )
        port, version = served
        source = f"{python} gave none and the server on port {port} runs SGLang {version}"
        release = Release(version, f"auto: the server on port {port}; {python} gave none")
    if release.version not in known_versions():
        raise ReleaseError(f"{source}, which gpufleet has no flag table for (known: {_known()})")
    return release


def resolve_auto(profile: Profile) -> str:
    """The release ``auto`` stands for in ``profile`` (see the module doc; remembered).

    Raises:
        ReleaseError: neither engine.python nor a running server names a release gpufleet knows.
    """
    return _resolve(profile).version


def forget() -> None:
    """Drop every remembered resolution (after an upgrade; tests)."""
    _installed.forget()
    _served.forget()


def profile_release(profile: Profile) -> Release:
    """The release whose flag table judges ``profile`` and whose arithmetic plans it: as
    written, ``auto`` resolved, the newest when absent; a simulator profile's ``auto`` is the
    release the simulator models.

    Raises:
        ReleaseError: ``auto`` could not be resolved (one line naming what was tried).
    """
    version = profile.engine.sglang_version
    if version not in (None, AUTO_RELEASE):
        return Release(version, "engine.sglang_version")
    if profile.engine.kind == "sim":
        return Release(PINNED_VERSION, "the simulator's")
    if version is None:
        return Release(PINNED_VERSION, "engine.sglang_version unset: the newest")
    return _resolve(profile)


def target_release(profile: Profile) -> str:
    """``profile_release(profile).version``: the release whose flag table judges ``profile``.

    Raises:
        ReleaseError: ``auto`` could not be resolved.
    """
    return profile_release(profile).version

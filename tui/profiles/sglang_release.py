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

A resolution is remembered for ``REMEMBER_S`` per (python, environment, host, ports): the tuning
form validates at every keystroke.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence

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
"""How long a resolution (or its failure) is reused."""

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


def _resolve(profile: Profile) -> str:
    python = profile.engine.python
    env = dict(os.environ) | dict(profile.env)
    try:
        found = installed_release(python, env)
        source = f"{python} has SGLang {found}"
    except ReleaseError as exc:
        served = served_release(profile.host, profile.ports)
        if served is None:
            ports = ", ".join(map(str, profile.ports))
            raise ReleaseError(
                f"{exc}, and no server on {profile.host} port(s) {ports} reports one on "
                f"/server_info; set it to one of {_known()}"
            ) from None
        port, found = served
        source = f"{python} gave none and the server on port {port} runs SGLang {found}"
    if found not in known_versions():
        raise ReleaseError(f"{source}, which gpufleet has no flag table for (known: {_known()})")
    return found


_lock = threading.Lock()
_remembered: dict[tuple[object, ...], tuple[float, str | ReleaseError]] = {}


def resolve_auto(profile: Profile) -> str:
    """The release ``auto`` stands for in ``profile`` (see the module doc; remembered a while).

    Raises:
        ReleaseError: neither engine.python nor a running server names a release gpufleet knows.
    """
    key = (profile.engine.python, profile.env, profile.host, profile.ports)
    with _lock:
        now = time.monotonic()
        seen = _remembered.get(key)
        if seen is None or now - seen[0] >= REMEMBER_S:
            try:
                outcome: str | ReleaseError = _resolve(profile)
            except ReleaseError as exc:
                outcome = exc
            seen = (time.monotonic(), outcome)
            _remembered[key] = seen
    if isinstance(seen[1], ReleaseError):
        raise seen[1]
    return seen[1]


def forget() -> None:
    """Drop every remembered resolution (after an upgrade; tests)."""
    with _lock:
        _remembered.clear()


def target_release(profile: Profile) -> str:
    """The release whose flag table judges ``profile``: as written, ``auto`` resolved, the newest
    when absent; a simulator profile's ``auto`` is the release the simulator models.

    Raises:
        ReleaseError: ``auto`` could not be resolved.
    """
    version = profile.engine.sglang_version or PINNED_VERSION
    if version != AUTO_RELEASE:
        return version
    if profile.engine.kind == "sim":
        return PINNED_VERSION
    return resolve_auto(profile)

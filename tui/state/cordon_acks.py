"""Acknowledgements of cordons: which jobs have stopped sending to a server being stopped.

A cordon (``tui.state.cordons``) closes a server to new work, but a job honours it only from its
next read of the cordon file: gpufleet's pipeline reads it before each dispatch (and a few times
a second while idle), its router sync once a reconciliation. A SIGTERM sent before the job has
read it may still see requests arrive, and a SGLang drain ends only when none is left: so a stop
cordons first, then waits until every job that sends to the server says it has stopped, then
signals (``tui.control.stop_release``).

Each job that honours cordons (``gpufleet generate``) keeps one small file here,
``cordon-acks/<pid>.json``, written by ``AckWriter``: who it is (pid and start ticks, so a reused
pid is never taken for it), the servers it sends to, and those it has stopped sending to (closed
by a cordon, or taken off its router). A file whose job no longer runs is ignored (and removed by
the next writer or waiter that finds it). A client that does not honour cordons has no file:
nothing is waited for it, and the drain's watch then says it is still sending.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tui.paths import cordon_ack_dir
from tui.servers.procinfo import start_ticks
from tui.state.files import StateFileError, expect, expect_version, read_document, write_document

VERSION = 1

ACK_WAIT_S = 5.0
"""How long a stop waits for the jobs' acknowledgements before it drains anyway (the pipeline
answers within a fraction of a second; its router sync within about one)."""
POLL_S = 0.05
"""How often a waiting stop looks at the acknowledgements."""


@dataclass(frozen=True, slots=True)
class SenderAck:
    """One job's acknowledgement file."""

    pid: int
    """The job's process id."""
    start_ticks: int
    """Its start in clock ticks since boot (``/proc/PID/stat``): its identity with the pid."""
    job: str
    """What it is, for the operator (``gpufleet generate``)."""
    sends_to: frozenset[str]
    """The servers (``tui.state.cordons.address_of`` keys) it sends to."""
    closed: frozenset[str]
    """Those it has stopped sending to (cordoned, or off its router)."""

    def alive(self) -> bool:
        """Whether the job still runs (same pid, same start)."""
        return start_ticks(self.pid) == self.start_ticks

    def describe(self) -> str:
        """``gpufleet generate (pid 4242)``."""
        return f"{self.job} (pid {self.pid})"


def _parse(doc: Any) -> SenderAck:
    expect_version(doc, (VERSION,))
    for key in ("pid", "start_ticks"):
        value = doc.get(key)
        expect(isinstance(value, int) and not isinstance(value, bool), f"no '{key}' number")
    lists = {}
    for key in ("sends_to", "closed"):
        value = doc.get(key)
        expect(isinstance(value, list) and all(isinstance(a, str) for a in value), f"no '{key}'")
        lists[key] = frozenset(value)
    return SenderAck(doc["pid"], doc["start_ticks"], str(doc.get("job", "a job")), *lists.values())


class AckWriter:
    """A job's acknowledgement file: created at once, rewritten when what it has stopped sending
    to changes, removed by ``close``.

    Args:
        sends_to: The servers the job sends to (``address_of`` keys).
        job: What it is, for the operator.
        directory: Where the files live (default ``tui.paths.cordon_ack_dir()``).
    """

    def __init__(self, sends_to: Iterable[str], job: str, directory: Path | None = None) -> None:
        self.sends_to = frozenset(sends_to)
        self.job = job
        self.path = (directory or cordon_ack_dir()) / f"{os.getpid()}.json"
        self._ticks = start_ticks(os.getpid()) or 0
        self._closed: frozenset[str] | None = None
        self.error: str | None = None
        """Why the last write failed (None when it did not): the job goes on without it."""
        self.acknowledge(())

    def acknowledge(self, closed: Iterable[str]) -> None:
        """Say which of its servers the job now sends nothing new to (written when changed)."""
        now = frozenset(closed) & self.sends_to
        if now == self._closed:
            return
        doc = {
            "version": VERSION,
            "pid": os.getpid(),
            "start_ticks": self._ticks,
            "job": self.job,
            "sends_to": sorted(self.sends_to),
            "closed": sorted(now),
            "at": time.time(),
        }
        try:
            write_document(self.path, doc)
        except OSError as exc:
            self.error = f"{self.path}: cannot write: {exc.strerror or exc}"
            return
        self._closed, self.error = now, None

    def close(self) -> None:
        """Remove the file (the job sends nothing any more)."""
        with contextlib.suppress(OSError):
            self.path.unlink()


def senders(directory: Path | None = None) -> list[SenderAck]:
    """The jobs that honour cordons and still run (a dead job's file is removed)."""
    folder = directory or cordon_ack_dir()
    try:
        names = sorted(p for p in folder.iterdir() if p.suffix == ".json")
    except OSError:
        return []
    found = []
    for path in names:
        try:
            ack = read_document(path, _parse, None)
        except StateFileError:
            continue  # half of a write we raced, or damage: not a job we can wait for
        if ack is None:
            continue
        if ack.alive():
            found.append(ack)
        else:
            with contextlib.suppress(OSError):
                path.unlink()
    return found


@dataclass(frozen=True, slots=True)
class AckWait:
    """What waiting for the jobs' acknowledgements found."""

    acknowledged: tuple[SenderAck, ...]
    """Jobs that sent to the server and stopped."""
    silent: tuple[SenderAck, ...]
    """Jobs that send to it and did not say they stopped before the deadline."""
    waited_s: float
    """How long it waited."""

    def describe(self) -> str:
        """One phrase for the stop's progress ("" when no job sends to the server)."""
        parts = []
        if self.acknowledged:
            who = ", ".join(a.describe() for a in self.acknowledged)
            parts.append(f"{who} stopped sending to it")
        if self.silent:
            who = ", ".join(a.describe() for a in self.silent)
            parts.append(f"{who} did not say it stopped sending within {self.waited_s:.0f} s")
        return "; ".join(parts)


def wait_acknowledged(
    address: str,
    timeout_s: float = ACK_WAIT_S,
    directory: Path | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> AckWait:
    """Wait until every running job that sends to ``address`` has stopped sending to it.

    Args:
        address: The cordoned server (an ``address_of`` key).
        timeout_s: How long to wait at most.
        directory: The acknowledgements' folder (default ``tui.paths.cordon_ack_dir()``).
        sleep: How to pause between looks (a poll of files other processes write).

    Returns:
        Who acknowledged, who did not.
    """
    started = time.monotonic()
    while True:
        sending = [a for a in senders(directory) if address in a.sends_to]
        silent = tuple(a for a in sending if address not in a.closed)
        done = tuple(a for a in sending if address in a.closed)
        waited = time.monotonic() - started
        if not silent or waited >= timeout_s:
            return AckWait(done, silent, waited)
        sleep(POLL_S)

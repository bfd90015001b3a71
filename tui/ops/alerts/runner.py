"""The alerts of one node, run: the engine fed each poll, every alert written to the alerts'
journal and posted to the webhook, by one process only.

Whoever runs the alerts (the agent, a console, ``gpufleet alerts``) feeds ``AlertRunner.feed``
its snapshots. The first of them to take ``tui.paths.alerts_lock_file()`` (an exclusive
``flock``, dropped by the kernel when its holder dies) publishes: it journals each alert and
posts it; the others evaluate the same rules to show them and publish nothing, so an alert is
never journalled or posted twice. The alerts' journal (``tui.paths.alerts_journal_file()``) is
the operations' journal's format through its one door (``tui.ops.journal.append``: one line,
fsynced), type ``alert`` with its state as the verdict, in a file of its own: the operations'
journal stays what changed the fleet (its readers, the chart's markers, the API, count on it),
and ``gpufleet journal --alerts`` reads this one. The operation lock
being held (an apply, canary, rollout... changing the fleet) holds the server rules
(``tui.ops.alerts.engine``). Blocking (the journal's fsync, the lock): call from a thread.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from pathlib import Path

import httpx

from tui import paths
from tui.fleet.snapshot import FleetSnapshot
from tui.ops.alerts.engine import AlertEngine, AlertEvent, AlertFired
from tui.ops.alerts.rules import AlertConfig
from tui.ops.alerts.webhook import WebhookPoster
from tui.ops.journal import JournalEntry, JournalError, append
from tui.ops.lock import current_holder
from tui.pipeline.status import PipelineStatus
from tui.state.private import ensure_private_dir


def journal_entry(event: AlertEvent, by: str) -> JournalEntry:
    """An alert as the journal keeps it: type ``alert``, ``firing`` or ``resolved`` as its
    verdict, the rule and subject in its detail."""
    firing = isinstance(event, AlertFired)
    state = "firing" if firing else "resolved"
    began = event.since if isinstance(event, AlertFired) else event.fired_at
    return JournalEntry(
        type="alert",
        started_at=began,
        finished_at=event.at,
        ok=True,
        gpus=(event.gpu,) if event.gpu is not None else (),
        by=by,
        summary=f"{event.rule} {state}: {event.message}",
        verdict=state,
        detail={
            "rule": event.rule,
            "subject": event.subject,
            "state": state,
            "message": event.message,
        },
    )


class AlertRunner:
    """Rules, engine, journal and webhook of one node's alerts.

    Args:
        config: The rules and the webhook (``tui.ops.alerts.rules``).
        by: Who runs them, in the journal ('agent', 'console', 'cli').
        node: The node's name in the webhook's body (default: the hostname).
        publish: False: never publish (only show); True/None: publish when the lock is free.
        transport: The webhook's httpx transport (tests inject one).
    """

    def __init__(
        self,
        config: AlertConfig,
        *,
        by: str,
        node: str | None = None,
        publish: bool = True,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.config = config
        self.by = by
        self.engine = AlertEngine(config.rules)
        """The rules' hysteresis."""
        self._lock: int | None = self._take_lock() if publish else None
        self.poster: WebhookPoster | None = None
        """The webhook, when one is set and this process publishes."""
        if config.webhook and self.publishing:
            self.poster = WebhookPoster(config.webhook, config.webhook_timeout_s, node, transport)
        self.journal_error = ""
        """Why the last alert could not be journalled ('' when it could)."""

    @property
    def publishing(self) -> bool:
        """Whether this process journals and posts the node's alerts."""
        return self._lock is not None

    @property
    def active(self) -> tuple[AlertFired, ...]:
        """The alerts firing now."""
        return self.engine.active

    @staticmethod
    def _take_lock() -> int | None:
        target: Path = paths.alerts_lock_file()
        try:
            ensure_private_dir(target.parent)
            fd = os.open(target, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NONBLOCK, 0o600)
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return None  # another process publishes
        return fd

    def feed(
        self, snapshot: FleetSnapshot, job: PipelineStatus | None, now: float | None = None
    ) -> tuple[AlertEvent, ...]:
        """One poll: the engine's events, journalled and posted when this process publishes.

        Args:
            snapshot: The monitor's snapshot.
            job: The job's status document (None: none).
            now: time.time() of the poll (default: now).

        Returns:
            The alerts that fired and cleared at this poll.
        """
        operation = current_holder() is not None
        events = self.engine.feed(
            snapshot, job, time.time() if now is None else now, operation=operation
        )
        if not self.publishing:
            return events
        for event in events:
            try:
                append(journal_entry(event, self.by), paths.alerts_journal_file())
            except JournalError as error:
                self.journal_error = str(error)
            if self.poster is not None:
                self.poster.post(event)
        return events

    def close(self, wait_s: float | None = None) -> int:
        """Send what the webhook still holds, and let another process publish.

        Args:
            wait_s: Seconds the webhook gets to send what it holds (None: its default).

        Returns:
            The alerts the webhook did not send (0 without one).
        """
        unsent = 0
        if self.poster is not None:
            unsent = self.poster.close() if wait_s is None else self.poster.close(wait_s)
        if self._lock is not None:
            with contextlib.suppress(OSError):
                os.close(self._lock)
            self._lock = None
        return unsent

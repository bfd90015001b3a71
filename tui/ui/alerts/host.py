"""``AlertsHost``: the console runs the node's alerts (``tui.ops.alerts.runner``).

Each fleet snapshot is fed to the ``AlertRunner`` in a thread (the runner takes a lock file
and fsyncs its journal: never on the event loop), one feed at a time, at most every
``FEED_EVERY_S`` (a snapshot that arrives meanwhile is skipped: the next carries the same
conditions). Its answer (``AlertsRead``) changes the screen only when it says something new:
the count in the header (``2 alerts (!)``), the terminal bell when an alert newly fires
(``[console] bell = false`` turns it off), the list screen (``!``: what fires and what
resolved lately). When another process publishes
the node's alerts (the agent holds the lock), the console evaluates the same rules to show them
and posts nothing (``AlertRunner.publishing``). Off unless the console's command turns it on
(``alerts_on``): tests run many apps in one process.

A console over many nodes runs no rules: its port carries the alerts the nodes' agents fire
(``FleetReads.node_alerts``, each naming its node), and the same feed shows them: the count, the
bell for one this console had not seen, the list (what it saw resolve: each node journals its
own). It takes no lock and journals and posts nothing, whatever ``alerts_on`` says.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Sequence
from typing import Any

from textual.binding import Binding

from tui.fleet.snapshot import FleetSnapshot
from tui.ops.alerts.engine import AlertCleared, AlertEvent, AlertFired
from tui.ops.alerts.rules import AlertConfigError, load_alert_config
from tui.ops.alerts.runner import AlertRunner
from tui.pipeline.status import PipelineStatus
from tui.ui.alerts.alerts_screen import AlertsScreen
from tui.ui.alerts.messages import AlertsRead
from tui.ui.host import ConsoleHost
from tui.ui.settings import SettingsError, load_console_settings

ALERTS = "alerts-feed"
"""Worker group of the alerts' feed."""
FEED_EVERY_S = 2.0
"""Seconds between two feeds at least. Why not every poll: each feed is a thread hop and a wake
of the loop, which under load measured +15 % of the console's CPU at one a second
(``bench.bench_console``); an alert's rule holds for seconds to minutes, and the crash rule's
alert comes at most this much later."""
RESOLVED_KEPT = 50
"""Resolved alerts the console keeps in memory for the list screen."""


ALERTS_BINDING = Binding(
    "exclamation_mark", "alerts", "Alerts", id="app.alerts", key_display="!", show=False
)
"""``!``: the alerts list (in the app's BINDINGS, so the help lists it; the header's count
names the key)."""


def seen_change(
    before: Sequence[AlertFired], now: Sequence[AlertFired], at: float
) -> tuple[AlertEvent, ...]:
    """What changed between two readings of alerts another process fires: each one not firing
    before fired, each one gone cleared (``at``: when this console saw it gone).

    Args:
        before: What fired at the last reading.
        now: What fires now.
        at: time.time() of this reading.

    Returns:
        The alerts that fired, then those that cleared.
    """
    known = {(a.rule, a.subject, a.at) for a in before}
    still = {(a.rule, a.subject, a.at) for a in now}
    fired: list[AlertEvent] = [a for a in now if (a.rule, a.subject, a.at) not in known]
    cleared = [
        AlertCleared(a.rule, a.subject, a.gpu, a.message, at, a.at)
        for a in before
        if (a.rule, a.subject, a.at) not in still
    ]
    return (*fired, *cleared)


class AlertsHost(ConsoleHost):
    """The console's part that runs the alerts (see the module)."""

    alerts_on = False
    """Whether the console runs the alerts (the console's commands set it)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.alert_runner: AlertRunner | None = None
        """The runner (made in the worker at the first feed)."""
        self.alerts_active: tuple[AlertFired, ...] = ()
        """What fires now."""
        self.alerts_resolved: deque[AlertCleared] = deque(maxlen=RESOLVED_KEPT)
        """What this console saw resolve, newest last."""
        self.alerts_publishing = False
        """Whether this console journals and posts the node's alerts."""
        self.alerts_problem = ""
        """Why the alerts do not run ('' when they do)."""
        self.alerts_from_nodes = False
        """Whether the alerts shown are the nodes' agents', carried by the port (a console over
        many nodes: the app sets it from its port)."""
        self.bell_on = True
        """Ring the terminal bell on a newly firing alert (``[console] bell``)."""
        self._feeding = False
        self._fed_at = -FEED_EVERY_S
        self._feed_task: asyncio.Future[None] | None = None
        self._last_read: AlertsRead | None = None
        self._title_base: str | None = None

    def feed_alerts(
        self,
        snapshot: FleetSnapshot,
        job: PipelineStatus | None,
        carried: tuple[AlertFired, ...] | None = None,
    ) -> None:
        """Feed one snapshot to the runner off the loop (skipped while a feed runs), or show
        the alerts the port carries (``carried``: the nodes' agents', not None on many nodes).

        Why a thread hop and not a thread worker: a worker a poll cost Textual a Worker, its
        three state messages and their dispatch each second (the poll's own status read hops
        the same way, ``FleetApp._read_status``)."""
        if (carried is None and not self.alerts_on) or self._feeding or self.alerts_problem:
            return
        now = time.monotonic()
        if now - self._fed_at < FEED_EVERY_S:
            return
        self._fed_at = now
        self._feeding = True
        task = asyncio.ensure_future(self._feed(snapshot, job, carried))
        self._feed_task = task  # kept: a task only the loop holds may be collected

    async def _feed(
        self,
        snapshot: FleetSnapshot,
        job: PipelineStatus | None,
        carried: tuple[AlertFired, ...] | None,
    ) -> None:
        """One poll through the runner in a thread (blocking: its lock file, its journal's
        fsync), or the nodes' alerts read against the last (the settings' bell read there);
        its answer shown (``_show_alerts``) when it says something new."""
        try:
            if carried is None:
                read = await asyncio.to_thread(self._feed_blocking, snapshot, job)
            else:
                read = await asyncio.to_thread(self._carried, carried)
        except Exception as error:  # one failed feed must never end the alerts
            self.log.error(f"{ALERTS} failed: {error!r}")
            return
        finally:
            self._feeding = False
        last = self._last_read
        if (
            read.events
            or last is None
            or read.active != last.active
            or (read.publishing != last.publishing or read.problem)
        ):
            self._last_read = read
            self._show_alerts(read)

    def _feed_blocking(self, snapshot: FleetSnapshot, job: PipelineStatus | None) -> AlertsRead:
        runner = self.alert_runner
        if runner is None:
            try:
                self.bell_on = load_console_settings().bell
                runner = AlertRunner(load_alert_config(), by="console")
            except (AlertConfigError, SettingsError) as error:
                return AlertsRead((), (), False, str(error))
            self.alert_runner = runner
        events = runner.feed(snapshot, job)
        return AlertsRead(events, runner.active, runner.publishing)

    def _carried(self, carried: tuple[AlertFired, ...]) -> AlertsRead:
        if self._last_read is None:  # the first reading: the bell's setting, once
            try:
                self.bell_on = load_console_settings().bell
            except SettingsError as error:
                return AlertsRead((), (), False, str(error))
        before = self._last_read.active if self._last_read is not None else ()
        return AlertsRead(seen_change(before, carried, time.time()), carried, False)

    def _show_alerts(self, message: AlertsRead) -> None:
        """Keep what fires, ring the bell for what newly fires, retitle, refresh the list."""
        if message.problem:
            self.alerts_problem = message.problem
            self.notify(message.problem, title="Alerts off", severity="error", timeout=10)
            self._retitle_alerts()
            return
        self.alerts_active = message.active
        self.alerts_publishing = message.publishing
        self.alerts_resolved.extend(e for e in message.events if isinstance(e, AlertCleared))
        if self.bell_on and any(isinstance(e, AlertFired) for e in message.events):
            self.bell()
        self._retitle_alerts()
        for screen in self.screen_stack:
            if isinstance(screen, AlertsScreen):
                screen.show(self.alerts_active, tuple(self.alerts_resolved), message.publishing)

    def _retitle_alerts(self) -> None:
        """``gpufleet · 2 alerts (!)`` in every screen's header while alerts fire."""
        if self._title_base is None:
            self._title_base = self.title
        count = len(self.alerts_active)
        if self.alerts_problem:
            suffix = " · alerts off (settings)"
        elif count:
            suffix = f" · {count} alert{'s' if count > 1 else ''} (!)"
        else:
            suffix = ""
        self.title = self._title_base + suffix

    def action_alerts(self) -> None:
        """The list of alerts: firing, then lately resolved."""
        if isinstance(self.screen, AlertsScreen):
            return
        self.push_screen(
            AlertsScreen(
                self.alerts_active,
                tuple(self.alerts_resolved),
                self.alerts_publishing,
                running=(self.alerts_on or self.alerts_from_nodes) and not self.alerts_problem,
                from_nodes=self.alerts_from_nodes,
            )
        )

    async def close_alerts(self) -> None:
        """Send what the webhook still holds and let another process publish (at exit)."""
        task = self._feed_task
        if task is not None and not task.done():
            await asyncio.wait([task], timeout=10.0)  # its thread still uses the runner
        runner, self.alert_runner = self.alert_runner, None
        if runner is not None:
            await asyncio.to_thread(runner.close)

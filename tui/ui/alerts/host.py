"""``AlertsHost``: the console runs the node's alerts (``tui.ops.alerts.runner``).

Each fleet snapshot is fed to the ``AlertRunner`` in a thread worker (the runner takes a lock
file and fsyncs its journal: never on the event loop), one feed at a time (a snapshot that
arrives while one runs is skipped: the next poll carries the same conditions). The worker posts
``AlertsRead``; the console then shows the count in the header (``2 alerts (!)``), rings the
terminal bell when an alert newly fires (``[console] bell = false`` turns it off), and the
list screen (``!``) shows what fires and what resolved lately. When another process publishes
the node's alerts (the agent holds the lock), the console evaluates the same rules to show them
and posts nothing (``AlertRunner.publishing``). Off unless the console's command turns it on
(``alerts_on``): tests run many apps in one process.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

from textual import work
from textual.app import App
from textual.binding import Binding

from tui.fleet.snapshot import FleetSnapshot
from tui.ops.alerts.engine import AlertCleared, AlertFired
from tui.ops.alerts.rules import AlertConfigError, load_alert_config
from tui.ops.alerts.runner import AlertRunner
from tui.pipeline.status import PipelineStatus
from tui.ui.alerts.alerts_screen import AlertsScreen
from tui.ui.alerts.messages import AlertsRead
from tui.ui.settings import SettingsError, load_console_settings

ALERTS = "alerts-feed"
"""Worker group of the alerts' feed."""
RESOLVED_KEPT = 50
"""Resolved alerts the console keeps in memory for the list screen."""


ALERTS_BINDING = Binding(
    "exclamation_mark", "alerts", "Alerts", id="app.alerts", key_display="!", show=False
)
"""``!``: the alerts list (in the app's BINDINGS, so the help lists it; the header's count
names the key)."""


class AlertsHost(App[None]):
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
        self.bell_on = True
        """Ring the terminal bell on a newly firing alert (``[console] bell``)."""
        self._feeding = False
        self._title_base: str | None = None

    def feed_alerts(self, snapshot: FleetSnapshot, job: PipelineStatus | None) -> None:
        """Feed one snapshot to the runner off the loop (skipped while a feed runs)."""
        if not self.alerts_on or self._feeding or self.alerts_problem:
            return
        self._feeding = True
        self._feed(snapshot, job)

    @work(thread=True, group=ALERTS, exit_on_error=False, name="alerts feed")
    def _feed(self, snapshot: FleetSnapshot, job: PipelineStatus | None) -> None:
        """One poll through the runner (blocking: its lock file, its journal's fsync)."""
        try:
            runner = self.alert_runner
            if runner is None:
                try:
                    self.bell_on = load_console_settings().bell
                    runner = AlertRunner(load_alert_config(), by="console")
                except (AlertConfigError, SettingsError) as error:
                    self.post_message(AlertsRead((), (), False, str(error)))
                    return
                self.alert_runner = runner
            events = runner.feed(snapshot, job)
            self.post_message(AlertsRead(events, runner.active, runner.publishing))
        finally:
            self._feeding = False

    def on_alerts_read(self, message: AlertsRead) -> None:
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
                running=self.alerts_on and not self.alerts_problem,
            )
        )

    async def close_alerts(self) -> None:
        """Send what the webhook still holds and let another process publish (at exit)."""
        runner, self.alert_runner = self.alert_runner, None
        if runner is not None:
            await asyncio.to_thread(runner.close)

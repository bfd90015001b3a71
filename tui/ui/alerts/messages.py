"""What the alerts' thread worker hands the console (immutable)."""

from __future__ import annotations

from textual.message import Message

from tui.ops.alerts.engine import AlertEvent, AlertFired


class AlertsRead(Message):
    """One poll's alerts: what fired or cleared at it and what fires now."""

    def __init__(
        self,
        events: tuple[AlertEvent, ...],
        active: tuple[AlertFired, ...],
        publishing: bool,
        problem: str = "",
    ) -> None:
        self.events = events
        """What fired and cleared at this poll."""
        self.active = active
        """What fires now, oldest first."""
        self.publishing = publishing
        """Whether this console journals and posts them (False: another process does)."""
        self.problem = problem
        """Why the alerts do not run ('' when they do): the settings cannot be used."""
        super().__init__()

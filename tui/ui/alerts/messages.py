"""What one feed of the alerts hands the console (immutable)."""

from __future__ import annotations

from dataclasses import dataclass

from tui.ops.alerts.engine import AlertEvent, AlertFired


@dataclass(frozen=True, slots=True)
class AlertsRead:
    """One poll's alerts: what fired or cleared at it and what fires now."""

    events: tuple[AlertEvent, ...]
    """What fired and cleared at this poll."""
    active: tuple[AlertFired, ...]
    """What fires now, oldest first."""
    publishing: bool
    """Whether this console journals and posts them (False: another process does)."""
    problem: str = ""
    """Why the alerts do not run ('' when they do): the settings cannot be used."""

"""The alert engine: fed a fleet snapshot and the job's status document, it says which alerts
fire and which clear, with hysteresis.

Per rule and subject (a GPU, the job): an alert fires once its condition
(``tui.ops.alerts.conditions``) has held for the rule's ``for_s`` without a break, and clears
once it has been false for ``clear_s`` without a break; a condition that flickers back within
those spans restarts its count, so one noisy reading neither fires nor clears anything. While an
operation changes the fleet (``operation=True``: the operation lock is held), the server rules
are held as they are (their stops and starts are the operation's): nothing of them fires or
clears, and their counts do not run. Pure: no I/O, no clock of its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tui.fleet.snapshot import FleetSnapshot
from tui.ops.alerts.conditions import SERVER_RULES, Condition, Watch
from tui.ops.alerts.rules import Rule
from tui.pipeline.status import PipelineStatus


@dataclass(frozen=True, slots=True)
class AlertFired:
    """An alert began: its condition held for the rule's ``for_s``."""

    rule: str
    """The rule."""
    subject: str
    """What it is about ('GPU 3', 'job')."""
    gpu: int | None
    """The GPU's panel index (None: the job)."""
    message: str
    """What is wrong, in one line."""
    at: float
    """time.time() it fired."""
    since: float
    """time.time() its condition began to hold."""


@dataclass(frozen=True, slots=True)
class AlertCleared:
    """An alert ended: its condition was false for the rule's ``clear_s``."""

    rule: str
    """The rule."""
    subject: str
    """What it was about."""
    gpu: int | None
    """The GPU's panel index (None: the job)."""
    message: str
    """What it had said when it fired."""
    at: float
    """time.time() it cleared."""
    fired_at: float
    """time.time() it had fired."""


AlertEvent = AlertFired | AlertCleared
"""What the engine says."""


@dataclass
class _Track:
    """One rule's state for one subject (mutable, the engine's own)."""

    since: float | None = None
    """When its condition began to hold without a break (None: false now)."""
    false_since: float | None = None
    """When it began to be false again while firing."""
    firing: AlertFired | None = None
    """The alert, while it fires."""


class AlertEngine:
    """Hysteresis over the rules' conditions. Not thread-safe: one feeder.

    Args:
        rules: The rules that are on (``tui.ops.alerts.rules``).
    """

    def __init__(self, rules: Sequence[Rule]) -> None:
        self.rules = {rule.name: rule for rule in rules}
        """The rules by name."""
        self._watch = Watch()
        self._tracks: dict[tuple[str, str], _Track] = {}

    @property
    def active(self) -> tuple[AlertFired, ...]:
        """The alerts firing now, oldest first."""
        firing = [t.firing for t in self._tracks.values() if t.firing is not None]
        return tuple(sorted(firing, key=lambda a: (a.at, a.rule, a.subject)))

    def feed(
        self,
        snapshot: FleetSnapshot,
        job: PipelineStatus | None,
        now: float,
        *,
        operation: bool = False,
    ) -> tuple[AlertEvent, ...]:
        """One reading of the fleet and the job.

        Args:
            snapshot: The monitor's snapshot.
            job: The job's status document (None: none).
            now: time.time() of the reading.
            operation: An operation changes the fleet now (the server rules are held).

        Returns:
            The alerts that fired and cleared at this reading.
        """
        true: dict[tuple[str, str], Condition] = {}
        for found in self._watch.conditions(self.rules, snapshot, job, now, operation):
            true[(found.rule, found.subject)] = found
        events: list[AlertEvent] = []
        for key in sorted(set(true) | set(self._tracks)):
            if operation and key[0] in SERVER_RULES:
                continue
            track = self._tracks.setdefault(key, _Track())
            rule = self.rules[key[0]]
            condition = true.get(key)
            if condition is not None:
                track.false_since = None
                if track.since is None:  # from when it began, where the condition knows
                    track.since = now if condition.since is None else condition.since
                if track.firing is None and now - track.since >= rule.for_s:
                    track.firing = AlertFired(
                        rule.name, condition.subject, condition.gpu, condition.message, now,
                        track.since,
                    )  # fmt: skip
                    events.append(track.firing)
            else:
                track.since = None
                if track.firing is not None:
                    track.false_since = now if track.false_since is None else track.false_since
                    if now - track.false_since >= rule.clear_s:
                        fired = track.firing
                        events.append(
                            AlertCleared(
                                fired.rule, fired.subject, fired.gpu, fired.message, now, fired.at
                            )
                        )
                        track.firing = None
            if track.since is None and track.firing is None:
                del self._tracks[key]
        return tuple(events)

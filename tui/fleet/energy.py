"""Energy per GPU and for the fleet: joules, mean power and output tokens per joule over the
rolling window.

Each GPU's joules come from its :class:`~tui.gpu.energy.EnergyMeter` (the driver's counter, or
its power samples integrated); its tokens from its server's ``generation_tokens_total`` (output
tokens since the server started). A reading is kept every ``THIN_S`` for ``WINDOW_S``; over the
window, watts = joules / seconds and tokens per joule = tokens / joules. A server restart (another
pid, or the counter going down) counts the new process's tokens from zero, as Prometheus's
``increase`` does. The fleet's tokens per joule is every GPU's tokens over every GPU's joules.

Two slots on one card (``[gpu.N] device``) read one energy counter and one power sensor: the card
is metered once, each slot's figure is its own server's tokens over the card's joules (and says
which slots share it), and the fleet counts each card's joules and watts once, with the tokens of
every server on it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Iterable
from dataclasses import dataclass

from tui.fleet.latency import THIN_S, WINDOW_S


@dataclass(frozen=True, slots=True)
class GpuEnergy:
    """One GPU's energy as the monitor measured it."""

    joules: float
    """Joules since this monitor began metering (the console's or the agent's start)."""
    counter: bool
    """From the driver's total energy counter (False: its power samples integrated)."""
    window_s: float | None = None
    """Seconds the window's figures cover; None before a second reading."""
    watts: float | None = None
    """Mean power over the window."""
    tokens_per_joule: float | None = None
    """Output tokens per joule over the window; None without a server's token counter, or
    while it used no energy."""
    shared_with: tuple[int, ...] = ()
    """The other slots on this GPU's card: the joules and watts are the card's, shared with
    them (counted once in the fleet's), the tokens this slot's server's alone."""

    def shared_words(self) -> str:
        """``shared with GPU 1`` ("" when the card is the slot's alone)."""
        if not self.shared_with:
            return ""
        word = "GPU" if len(self.shared_with) == 1 else "GPUs"
        return f"shared with {word} {', '.join(str(g) for g in self.shared_with)}"


@dataclass(frozen=True, slots=True)
class FleetEnergy:
    """The fleet's energy: every GPU's summed."""

    joules: float
    """Joules since this monitor began metering."""
    window_s: float | None
    """Seconds the window covers (the shortest of the GPUs'); None before a second reading."""
    watts: float | None
    """Mean power over the window, all GPUs."""
    tokens_per_joule: float | None
    """Every GPU's output tokens over every GPU's joules, over the window."""


class EnergyWindow:
    """One GPU's (joules, tokens) over the rolling window. Not thread-safe."""

    def __init__(self, window_s: float = WINDOW_S, thin_s: float = THIN_S) -> None:
        self.window_s = window_s
        self.thin_s = thin_s
        self._readings: deque[tuple[float, float, float | None]] = deque()
        self._tokens = 0.0
        """Output tokens since the window began, across restarts."""
        self._last: tuple[object, float] | None = None
        """(epoch, the counter's value) of the last token reading."""

    def add(self, t: float, joules: float, tokens: float | None, epoch: object = None) -> None:
        """A reading: the meter's joules, the server's token counter (None: no server or no
        counter) and the server's identity (its pid)."""
        counted: float | None = None
        if tokens is not None:
            last = self._last
            if last is None:
                pass  # the first: its value is the server's history, not the window's
            elif epoch != last[0] or tokens < last[1]:
                self._tokens += tokens  # a restart: the new process counted from zero
            else:
                self._tokens += tokens - last[1]
            self._last = (epoch, tokens)
            counted = self._tokens
        else:
            self._last = None
        readings = self._readings
        if len(readings) >= 2 and t - readings[-2][0] < self.thin_s:
            readings[-1] = (t, joules, counted)  # the newest stays fresh, one every THIN_S kept
            return
        readings.append((t, joules, counted))
        while len(readings) >= 2 and readings[1][0] <= t - self.window_s:
            readings.popleft()

    def reading(self, joules: float, counter: bool) -> GpuEnergy:
        """The GPU's energy now (``joules`` and ``counter`` from its meter)."""
        readings = self._readings
        if len(readings) < 2:
            return GpuEnergy(joules, counter)
        (t0, j0, _), (t1, j1, _) = readings[0], readings[-1]
        seconds, used = t1 - t0, j1 - j0
        tokens = self._tokens_span()
        per_joule = tokens[1] / tokens[0] if tokens is not None and tokens[0] > 0 else None
        return GpuEnergy(joules, counter, seconds, used / seconds if seconds > 0 else None,
                         per_joule)  # fmt: skip

    def _tokens_span(self) -> tuple[float, float] | None:
        """(joules, tokens) between the oldest and the newest reading that counted tokens: a
        reading from before the server's load was first read (a console's first seconds, a
        relaunch) holds none, and must not blank tokens per joule for the whole window."""
        counted = [(j, k) for _, j, k in self._readings if k is not None]
        if len(counted) < 2:
            return None
        (j0, k0), (j1, k1) = counted[0], counted[-1]
        return j1 - j0, k1 - k0

    def span(self) -> tuple[float, float, tuple[float, float] | None] | None:
        """(seconds, joules, (joules, tokens) of the readings that counted tokens) over the
        window; None before a second reading."""
        readings = self._readings
        if len(readings) < 2:
            return None
        (t0, j0, _), (t1, j1, _) = readings[0], readings[-1]
        return t1 - t0, j1 - j0, self._tokens_span()


def fleet_energy(
    parts: Iterable[tuple[Hashable, float, EnergyWindow]],
) -> FleetEnergy | None:
    """The fleet's energy from each slot's (card, meter joules, window).

    Slots on one card share its joules: the card's are counted once (its first slot's window
    gives its seconds and joules), with the tokens of every slot on it.

    Returns:
        None without any GPU metered.
    """
    cards: dict[Hashable, tuple[float, list[EnergyWindow]]] = {}
    for card, total, window in parts:
        first, windows = cards.setdefault(card, (total, []))
        cards[card] = (max(first, total), [*windows, window])
    if not cards:
        return None
    joules, spans = 0.0, []
    for total, windows in cards.values():
        joules += total
        found = [s for w in windows if (s := w.span()) is not None]
        if found:
            seconds, used, _ = found[0]
            # the card's joules while its slots' tokens were counted (its first such slot's)
            tokens = [t for _, _, t in found if t is not None]
            counted = (tokens[0][0], sum(k for _, k in tokens)) if tokens else None
            spans.append((seconds, used, counted))
    if not spans:
        return FleetEnergy(joules, None, None, None)
    seconds = min(s for s, _, _ in spans)
    watts = sum(j / s for s, j, _ in spans if s > 0)
    pairs = [t for _, _, t in spans if t is not None]
    used = sum(j for j, _ in pairs)
    per_joule = sum(k for _, k in pairs) / used if pairs and used > 0 else None
    return FleetEnergy(joules, seconds, watts, per_joule)
